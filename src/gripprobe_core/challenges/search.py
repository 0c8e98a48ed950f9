"""The ``search`` challenge: ranked JSON results with decoys, one right answer per phase.

``GET /search?q=<token>`` answers JSON ``{"query": ..., "results": [{"id", "title", "url", "score",
"snippet"}, ...]}`` in shuffled order. The right answer is the highest-scored result whose *title*
contains the token. Decoys make shortcuts fail: results scored higher whose title holds a near-miss
of the token or whose snippet (not title) holds it, and lower-scored results whose title does hold
it. Other queries get an empty result list; no ``q`` is a 400. ``GET /data.json`` serves another
result set of the same kind (same token, its own answer) for tests that fetch a raw document.

Facts: ``url`` (``http://127.0.0.1:<port>/search``), ``query_url`` (``url?q=<token>``), ``token``,
``answer`` (``{"id", "url"}``), ``raw`` (the exact body served for the right query), ``data_url``,
``data_answer``, ``raw_data``. Option ``results`` (int, 6..50, default 8): results per set.
"""

from __future__ import annotations

import json
import random
import secrets
from typing import Any

from aiohttp import web

from .http import ChallengeHTTPServer

__all__ = ["SearchChallenge", "make_result_set", "make_search_challenge", "right_answer"]

_TOPICS = ("Release checklist", "Deployment guide", "Incident report", "Migration notes", "API reference",
           "Onboarding handbook", "Benchmark summary", "Design review", "Security advisory", "Changelog")
_HEX = "0123456789abcdef"


def _near_miss(token: str, rng: random.Random) -> str:
    """``token`` with one character changed: looks right, does not contain the token."""
    i = rng.randrange(len(token))
    replacement = rng.choice([c for c in _HEX if c != token[i]])
    return token[:i] + replacement + token[i + 1:]


def make_result_set(token: str, rng: random.Random, size: int = 8) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Shuffled results for ``token`` and the one right answer ``{"id", "url"}``.

    Scores are distinct. Above the answer: at least one near-miss-title decoy and one
    token-in-snippet-only decoy (plus maybe unrelated results); below it: at least two results
    whose title contains the token (plus maybe unrelated ones).
    """
    size = max(6, min(size, 50))
    scores = sorted(rng.sample(range(100, 1000), size), reverse=True)
    answer_at = rng.randint(2, size - 3)
    above = ["near_miss", "snippet_only"] + ["unrelated"] * (answer_at - 2)
    below = ["match", "match"] + [rng.choice(["match", "unrelated"]) for _ in range(size - answer_at - 3)]
    rng.shuffle(above)
    rng.shuffle(below)
    roles = above + ["answer"] + below

    results: list[dict[str, Any]] = []
    ids: set[str] = set()
    answer: dict[str, str] = {}
    for role, score in zip(roles, scores):
        rid = f"r-{rng.getrandbits(24):06x}"
        while rid in ids:
            rid = f"r-{rng.getrandbits(24):06x}"
        ids.add(rid)
        topic = rng.choice(_TOPICS)
        url = f"https://docs.example.test/{rid}"
        if role in ("answer", "match"):
            title, snippet = f"{topic} for {token}", f"Everything about {token}: {topic.lower()}."
        elif role == "near_miss":
            other = _near_miss(token, rng)
            title, snippet = f"{topic} for {other}", f"Everything about {other}: {topic.lower()}."
        elif role == "snippet_only":
            title, snippet = f"{topic} (general)", f"Mentions {token} in passing; not about it."
        else:
            title, snippet = f"{topic} (archive)", f"Older {topic.lower()} material."
        results.append({"id": rid, "title": title, "url": url, "score": score / 1000, "snippet": snippet})
        if role == "answer":
            answer = {"id": rid, "url": url}
    rng.shuffle(results)
    return results, answer


def right_answer(document: dict[str, Any], token: str) -> dict[str, str] | None:
    """The highest-scored result whose title contains ``token``, as ``{"id", "url"}`` (None if none)."""
    matching = [r for r in document.get("results", []) if token in str(r.get("title", ""))]
    if not matching:
        return None
    best = max(matching, key=lambda r: r["score"])
    return {"id": best["id"], "url": best["url"]}


def _body(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


class SearchChallenge(ChallengeHTTPServer):
    kind = "search"

    def __init__(self, options: dict[str, Any] | None = None, phase: str = "measured") -> None:
        super().__init__(options, phase)
        rng = random.Random(secrets.randbits(128))
        try:
            size = int(self.options.get("results", 8))
        except (TypeError, ValueError):
            size = 8
        self.token = secrets.token_hex(6)
        results, answer = make_result_set(self.token, rng, size)
        data_results, data_answer = make_result_set(self.token, rng, size)
        self.raw = _body({"query": self.token, "results": results})
        self.raw_data = _body({"query": self.token, "results": data_results})
        self.facts = {"token": self.token, "answer": answer, "raw": self.raw,
                      "data_answer": data_answer, "raw_data": self.raw_data}

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/search", self._search)
        app.router.add_get("/data.json", self._data)

    def on_started(self) -> None:
        self.facts["url"] = f"{self.url}/search"
        self.facts["query_url"] = f"{self.url}/search?q={self.token}"
        self.facts["data_url"] = f"{self.url}/data.json"

    async def _search(self, request: web.Request) -> web.Response:
        query = request.query.get("q")
        if query is None:
            raise web.HTTPBadRequest(text="missing query parameter q\n")
        query = query.strip()
        if query == self.token:
            return web.Response(text=self.raw, content_type="application/json")
        return web.Response(text=_body({"query": query, "results": []}), content_type="application/json")

    async def _data(self, request: web.Request) -> web.Response:
        return web.Response(text=self.raw_data, content_type="application/json")


def make_search_challenge(options: dict[str, Any], phase: str) -> SearchChallenge:
    """Challenge factory for kind ``search`` (option ``results``: results per set)."""
    return SearchChallenge(options, phase)
