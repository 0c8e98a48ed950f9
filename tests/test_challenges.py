"""Challenge servers, exercised over real HTTP on 127.0.0.1 with a real aiohttp client."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pluggy
from hypothesis import given, settings, strategies as st

from gripprobe_core import hookspecs
from gripprobe_core.defaults import challenges as builtin_challenges
from gripprobe_core.defaults.challenges import BUILTIN_CHALLENGES
from gripprobe_core.challenges.nonce import NonceChallenge
from gripprobe_core.challenges.search import SearchChallenge, make_result_set, right_answer
from gripprobe_core.pluginmanager import GripProbePluginManager, Registry


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(url) as response:
            return response.status, response.headers.get("Content-Type", ""), await response.text()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ------------------------------------------------------------------------------------------------ nonce

def test_nonce_serves_its_facts_and_logs_requests() -> None:
    async def scenario() -> tuple[NonceChallenge, list]:
        server = NonceChallenge({}, "measured")
        await server.start()
        try:
            host = urlsplit(server.url).hostname
            assert host == "127.0.0.1"
            answers = [await get(server.facts["url"]),
                       await get(server.url + "/challenge/not-the-token"),
                       await get(server.url + "/elsewhere?x=1")]
        finally:
            await server.stop()
        return server, answers

    server, answers = run(scenario())
    facts = server.facts
    (status, ctype, body), (wrong_status, _, _), (other_status, _, _) = answers
    assert status == 200 and ctype.startswith("text/plain")
    assert body == f"NONCE={facts['nonce']}\nPAYLOAD={facts['payload']}\n"
    assert facts["proof"] == hashlib.sha256(f"{facts['nonce']}:{facts['payload']}".encode()).hexdigest()
    assert facts["url"] == f"{server.url}/challenge/{facts['token']}"
    assert (wrong_status, other_status) == (404, 404)
    log = [(r["method"], r["path"], r["query"], r["status"]) for r in server.requests]
    assert log == [("GET", f"/challenge/{facts['token']}", "", 200), ("GET", "/challenge/not-the-token", "", 404),
                   ("GET", "/elsewhere", "x=1", 404)]
    assert all(r["ts"].endswith("Z") for r in server.requests)


def test_nonce_instances_differ() -> None:
    async def facts_of_two() -> list[dict]:
        out = []
        for phase in ("warmup", "measured"):
            async with NonceChallenge({}, phase) as server:
                out.append(dict(server.facts))
        return out

    warmup, measured = run(facts_of_two())
    for key in ("url", "token", "nonce", "payload", "proof"):
        assert warmup[key] != measured[key], key


def test_stopped_server_refuses_connections() -> None:
    async def scenario() -> None:
        server = NonceChallenge({}, "measured")
        await server.start()
        url = server.facts["url"]
        await server.stop()
        try:
            await get(url)
        except aiohttp.ClientConnectionError:
            return
        raise AssertionError("server still answering after stop()")

    run(scenario())


# ----------------------------------------------------------------------------------------------- search

def check_result_set(document: dict, token: str, answer: dict) -> None:
    """The decoy design: one right answer, beaten by decoys that do not hold the token in the title."""
    results = document["results"]
    scores = [r["score"] for r in results]
    assert len(set(scores)) == len(scores), "scores must be distinct"
    assert len({r["id"] for r in results}) == len(results)
    assert all(set(r) == {"id", "title", "url", "score", "snippet"} for r in results)
    assert right_answer(document, token) == answer
    best = next(r for r in results if r["id"] == answer["id"])
    higher = [r for r in results if r["score"] > best["score"]]
    lower_matching = [r for r in results if r["score"] < best["score"] and token in r["title"]]
    assert higher and all(token not in r["title"] for r in higher)
    assert any(token in r["snippet"] for r in higher), "a snippet-only decoy scores higher"
    assert any(sum(a != b for a, b in zip(r["title"].split()[-1], token)) == 1 for r in higher), "near-miss decoy"
    assert len(lower_matching) >= 2
    assert [r for r in results if token in r["title"] and r["score"] >= best["score"]] == [best]


def test_search_serves_ranked_results_with_decoys() -> None:
    async def scenario() -> tuple[SearchChallenge, list]:
        async with SearchChallenge({}, "measured") as server:
            facts = server.facts
            answers = [await get(facts["query_url"]), await get(facts["url"] + "?q=something-else"),
                       await get(facts["url"]), await get(facts["data_url"]), await get(server.url + "/nope")]
        return server, answers

    server, answers = run(scenario())
    facts = server.facts
    (status, ctype, body), (other_status, _, other_body), (noq_status, _, _), (data_status, _, data_body), \
        (nope_status, _, _) = answers
    assert status == 200 and ctype.startswith("application/json")
    assert body == facts["raw"]
    document = json.loads(body)
    assert document["query"] == facts["token"]
    check_result_set(document, facts["token"], facts["answer"])
    assert other_status == 200 and json.loads(other_body)["results"] == []
    assert noq_status == 400 and nope_status == 404
    assert data_status == 200 and data_body == facts["raw_data"]
    data = json.loads(data_body)
    check_result_set(data, facts["token"], facts["data_answer"])
    assert facts["data_answer"] != facts["answer"]
    assert facts["query_url"] == f"{facts['url']}?q={facts['token']}"
    log = [(r["path"], r["query"], r["status"]) for r in server.requests]
    assert log == [("/search", f"q={facts['token']}", 200), ("/search", "q=something-else", 200),
                   ("/search", "", 400), ("/data.json", "", 200), ("/nope", "", 404)]


def test_search_instances_differ_and_honour_size() -> None:
    async def facts_of_two() -> list[dict]:
        out = []
        for phase in ("warmup", "measured"):
            async with SearchChallenge({"results": 12}, phase) as server:
                out.append(dict(server.facts))
        return out

    warmup, measured = run(facts_of_two())
    for key in ("url", "token", "answer", "raw", "data_answer", "raw_data"):
        assert warmup[key] != measured[key], key
    assert len(json.loads(measured["raw"])["results"]) == 12


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(0, 60))
def test_result_sets_always_have_exactly_one_right_answer(seed: int, size: int) -> None:
    token = random.Random(seed).getrandbits(48).to_bytes(6, "big").hex()
    results, answer = make_result_set(token, random.Random(seed), size)
    assert len(results) == max(6, min(size, 50))
    check_result_set({"results": results}, token, answer)


# --------------------------------------------------------------------------------------- registration

def test_registered_through_the_hook() -> None:
    pm = pluggy.PluginManager("gripprobe")
    pm.add_hookspecs(hookspecs)
    pm.register(builtin_challenges, name="gripprobe_core.defaults.challenges")
    registry = Registry.collect(GripProbePluginManager(pm))
    assert registry.challenges == BUILTIN_CHALLENGES
    assert isinstance(registry.challenges["nonce"]({}, "warmup"), NonceChallenge)
    assert isinstance(registry.challenges["search"]({"results": "bad"}, "measured"), SearchChallenge)
