"""Web validators: ``web_nonce_proof`` and ``web_search_result``.

Both judge against the *measured* phase's challenge facts and request log (``ctx.challenge``,
``ctx.challenge_requests``), so an answer remembered from warmup, or guessed without fetching,
fails.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .context import ValidatorContext
from ..models.results import ValidatorResult
from . import (
    Options, WorkspacePath, clip, find_source, invalid_options, parse_options, read_workspace_file, render_path,
    variables, with_options,
)

__all__ = ["find_request", "json_subset", "web_nonce_proof", "web_search_result"]


class NonceProofOptions(Options):
    path: WorkspacePath


class SearchResultOptions(Options):
    path: WorkspacePath
    expected: dict[str, Any] | None = None
    """A literal JSON object the file must contain (a subset match)."""
    expected_from_challenge: bool | str = False
    """``true``: the challenge fact ``answer``; a string: the challenge fact of that name (a string
    fact, such as a served body, is parsed as JSON first)."""
    require_request: bool | str = False
    """``true``: the challenge's ``query_url`` (else ``url``) must have been fetched; a string: that
    fact's URL must have been fetched."""


def find_request(requests: list[Any], url: str) -> dict[str, Any] | None:
    """The last successful GET in ``requests`` for ``url``'s path carrying ``url``'s query parameters."""
    wanted = urlsplit(url)
    wanted_query = parse_qs(wanted.query, keep_blank_values=True)
    found = None
    for entry in requests:
        if not isinstance(entry, dict) or str(entry.get("method", "")).upper() != "GET":
            continue
        if entry.get("path") != wanted.path:
            continue
        status = entry.get("status")
        if not isinstance(status, int) or not 200 <= status < 300:
            continue
        got = parse_qs(str(entry.get("query") or ""), keep_blank_values=True)
        if all(got.get(k) and got[k][-1].strip() == v[-1].strip() for k, v in wanted_query.items()):
            found = entry
    return found


def json_subset(expected: Any, observed: Any) -> bool:
    """Objects match key by key (extra observed keys allowed); everything else must be equal."""
    if isinstance(expected, dict):
        return isinstance(observed, dict) and all(
            k in observed and json_subset(v, observed[k]) for k, v in expected.items())
    if isinstance(expected, bool) or isinstance(observed, bool):
        return type(expected) is type(observed) and expected == observed
    return expected == observed


def _no_challenge(kind: str) -> ValidatorResult:
    return ValidatorResult(kind=kind, passed=False, message="no challenge facts: does the test declare a challenge?")


def _parse_key_values(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().upper()] = value.strip()
    return values


@with_options(NonceProofOptions)
def web_nonce_proof(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """``path`` holds NONCE=, PAYLOAD= and PROOF= lines matching the measured challenge, and the
    challenge URL was really fetched."""
    kind = "web_nonce_proof"
    opts = parse_options(NonceProofOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    facts = ctx.challenge or {}
    if not all(k in facts for k in ("nonce", "payload", "proof", "url")):
        return _no_challenge(kind)
    path, bad_path = render_path(kind, opts.path, variables(ctx))
    if bad_path:
        return bad_path
    want = {"NONCE": str(facts["nonce"]), "PAYLOAD": str(facts["payload"]), "PROOF": str(facts["proof"]).lower()}
    shown_expected = "\n".join(f"{k}={v}" for k, v in want.items()) + f"\n(and a GET of {facts['url']})"
    read = read_workspace_file(ctx, path)
    if read.text is None:
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=read.observed,
                               message=f"{path}: {read.problem}")
    got = _parse_key_values(read.text)
    if "PROOF" in got:
        got["PROOF"] = got["PROOF"].lower()
    problems = [f"{k} missing" if k not in got else f"{k} wrong" for k, v in want.items() if got.get(k) != v]
    if find_request(ctx.challenge_requests or [], str(facts["url"])) is None:
        problems.append(f"the challenge URL was never fetched (no successful GET {facts['url']})")
    passed = not problems
    message = "nonce proof matches and the challenge was fetched" if passed else f"{path}: " + "; ".join(problems)
    return ValidatorResult(kind=kind, passed=passed, expected=shown_expected, observed=clip(read.text),
                           message=message, source=find_source(ctx.events, path))


@with_options(SearchResultOptions)
def web_search_result(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """``path`` parses as JSON containing the expected object; optionally the challenge URL was fetched."""
    kind = "web_search_result"
    opts = parse_options(SearchResultOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    facts = ctx.challenge or {}
    if opts.expected_from_challenge:
        fact = "answer" if opts.expected_from_challenge is True else str(opts.expected_from_challenge)
        if not facts:
            return _no_challenge(kind)
        expected = facts.get(fact)
        if isinstance(expected, str):  # a served body, e.g. raw_data: compare as parsed JSON
            try:
                expected = json.loads(expected)
            except ValueError:
                return invalid_options(kind, f"challenge fact {fact!r} is not JSON")
        if expected is None:
            return invalid_options(kind, f"challenge fact {fact!r} is missing")
    elif opts.expected is not None:
        expected = opts.expected
    else:
        return invalid_options(kind, "give expected or expected_from_challenge")
    request_url = None
    if opts.require_request:
        if not facts:
            return _no_challenge(kind)
        if opts.require_request is True:
            request_url = facts.get("query_url") or facts.get("url")
        else:
            request_url = facts.get(str(opts.require_request))
        if not isinstance(request_url, str) or not request_url:
            return invalid_options(kind, f"challenge has no URL fact {opts.require_request!r}")

    path, bad_path = render_path(kind, opts.path, variables(ctx))
    if bad_path:
        return bad_path
    shown_expected = json.dumps(expected, sort_keys=True, ensure_ascii=False)
    if request_url:
        shown_expected += f"\n(and a GET of {request_url})"
    read = read_workspace_file(ctx, path)
    if read.text is None:
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=read.observed,
                               message=f"{path}: {read.problem}")
    source = find_source(ctx.events, path)
    try:
        observed = json.loads(read.text.lstrip("\ufeff"))
    except (ValueError, RecursionError):
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=clip(read.text),
                               message=f"{path} is not valid JSON", source=source)
    problems = []
    if not json_subset(expected, observed):
        problems.append("JSON does not contain the expected answer")
    if request_url and find_request(ctx.challenge_requests or [], request_url) is None:
        problems.append(f"the challenge was never queried (no successful GET {request_url})")
    passed = not problems
    message = "expected answer found" if passed else f"{path}: " + "; ".join(problems)
    return ValidatorResult(kind=kind, passed=passed, expected=shown_expected, observed=clip(read.text),
                           message=message, source=source)
