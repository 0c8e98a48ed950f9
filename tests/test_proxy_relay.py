"""The recording proxy relays every protocol as is: real oracle and real aiohttp servers on 127.0.0.1.

What is checked: bodies (JSON, SSE, NDJSON) byte-identical to talking to the upstream directly,
status and content-type preserved, streams forwarded chunk by chunk (not buffered), headers
forwarded minus hop-by-hop ones, no decompression, one record per exchange, and the plugin handle.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from pydantic import TypeAdapter

from gripprobe_core.models.specs import ReferenceAction
from gripprobe_core.oracle import OracleServer
from gripprobe_core.proxy import RecordingProxy, read_records
from proxy_helpers import proxied, run, serving  # noqa: E402

ACTIONS = TypeAdapter(list[ReferenceAction]).validate_python([
    {"write": {"path": "hello.txt", "content": "hello world\n"}},
    {"shell": "ls -1"},
])
S = {"type": "string"}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "shell", "parameters": {
        "type": "object", "properties": {"command": S}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "write", "parameters": {
        "type": "object", "properties": {"path": S, "content": S}, "required": ["path", "content"]}}},
]
RESPONSES_TOOLS = [{"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
                   for t in CHAT_TOOLS]
USER = [{"role": "user", "content": "write hello.txt, then list the files"}]





VOLATILE = re.compile(rb'"(created|created_at|[a-z_]*duration)":\s*("[^"]*"|[0-9.]+)')


def normalized(body: bytes) -> bytes:
    """The body with wall-clock fields (``created``, ``created_at``, ``*_duration``) blanked."""
    return VOLATILE.sub(rb'"\1": 0', body)


async def fetch(session: aiohttp.ClientSession, method: str, url: str, body: Any) -> tuple[int, str, bytes]:
    kw = {"json": body} if body is not None else {}
    async with session.request(method, url, **kw) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.read()


async def direct_vs_proxied(tmp_path: Path, method: str, path: str, body: Any) -> tuple[tuple, tuple, list[dict]]:
    """The same request to a fresh oracle directly and to another fresh oracle through the proxy."""
    record = tmp_path / "proxy.http.jsonl"
    async with OracleServer(ACTIONS) as direct, OracleServer(ACTIONS) as behind, \
            proxied(behind.base_url, record) as proxy, aiohttp.ClientSession() as s:
        want = await fetch(s, method, direct.base_url + path, body)
        got = await fetch(s, method, proxy.base_url + path, body)
    return want, got, read_records(record)


# ----------------------------------------------------------------------- protocols, byte for byte

CASES = {
    "chat-json": ("POST", "/v1/chat/completions", {"model": "perfect", "messages": USER, "tools": CHAT_TOOLS}),
    "chat-sse": ("POST", "/v1/chat/completions", {"model": "perfect", "messages": USER, "tools": CHAT_TOOLS,
                                                  "stream": True, "stream_options": {"include_usage": True}}),
    "chat-no-v1": ("POST", "/chat/completions", {"model": "perfect", "messages": USER, "tools": CHAT_TOOLS}),
    "chat-400": ("POST", "/v1/chat/completions", {"model": "perfect"}),
    "models": ("GET", "/v1/models", None),
    "responses-sse": ("POST", "/v1/responses", {"model": "perfect", "input": USER, "tools": RESPONSES_TOOLS,
                                                "stream": True}),
    "responses-json": ("POST", "/v1/responses", {"model": "perfect", "input": USER, "tools": RESPONSES_TOOLS}),
    "ollama-chat-ndjson": ("POST", "/api/chat", {"model": "perfect", "messages": USER, "tools": CHAT_TOOLS}),
    "ollama-chat-json": ("POST", "/api/chat", {"model": "perfect", "messages": USER, "tools": CHAT_TOOLS,
                                               "stream": False}),
    "ollama-generate": ("POST", "/api/generate", {"model": "perfect", "prompt": "say hi"}),
    "ollama-version": ("GET", "/api/version", None),
    "ollama-tags": ("GET", "/api/tags", None),
    "ollama-show": ("POST", "/api/show", {"model": "perfect"}),
    "ollama-ps": ("GET", "/api/ps", None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_protocol_relayed_identical_to_direct(tmp_path: Path, name: str) -> None:
    method, path, body = CASES[name]
    want, got, records = run(direct_vs_proxied(tmp_path, method, path, body))
    assert want[0] != 404, f"the oracle does not serve {method} {path}"
    assert got[0] == want[0] and got[1] == want[1]  # status, content-type
    assert normalized(got[2]) == normalized(want[2])
    assert len(records) == 1
    rec = records[0]
    assert rec["x_gripprobe_method"] == method and rec["x_gripprobe_path"] == path
    assert rec["x_gripprobe_status"] == want[0] and rec["x_gripprobe_proxy_error"] is None
    assert isinstance(rec["x_gripprobe_duration_ms"], (int, float)) and rec["x_gripprobe_duration_ms"] >= 0


def test_chat_sse_record_counts_the_structured_call(tmp_path: Path) -> None:
    _, got, records = run(direct_vs_proxied(tmp_path, *CASES["chat-sse"]))
    assert got[0] == 200 and got[2].rstrip().endswith(b"data: [DONE]")
    rec = records[0]
    assert rec["x_gripprobe_protocol"] == "chat_completions" and rec["x_gripprobe_stream"] is True
    assert rec["x_gripprobe_tool_call_count"] == 1 and rec["x_gripprobe_tool_names"] == ["write"]
    assert rec["x_gripprobe_usage"]["total_tokens"] > 0


# ----------------------------------------------------------------------------------- streaming

def test_stream_is_forwarded_before_the_upstream_finishes(tmp_path: Path) -> None:
    """The upstream sends its second chunk only after the client has the first: a buffering proxy
    would deadlock here (the upstream gives up after 5 s and the client then sees the end first)."""

    async def main() -> None:
        got_first = asyncio.Event()
        upstream_saw_client = []

        async def handler(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"data: first\n\n")
            try:
                await asyncio.wait_for(got_first.wait(), 5)
                upstream_saw_client.append(True)
            except asyncio.TimeoutError:
                upstream_saw_client.append(False)
            for i in range(3):
                await resp.write(f"data: {i}\n\n".encode())
                await asyncio.sleep(0.05)
            await resp.write_eof()
            return resp

        app = web.Application()
        app.router.add_get("/stream", handler)
        chunks: list[tuple[float, bytes]] = []
        async with serving(app) as up, proxied(up, tmp_path / "r.jsonl") as proxy, aiohttp.ClientSession() as s:
            t0 = time.perf_counter()
            async with s.get(proxy.base_url + "/stream") as resp:
                async for chunk in resp.content.iter_any():
                    chunks.append((time.perf_counter() - t0, chunk))
                    got_first.set()
        assert upstream_saw_client == [True]
        assert chunks[0][1] == b"data: first\n\n"
        assert b"".join(c for _, c in chunks) == b"data: first\n\n" + b"".join(f"data: {i}\n\n".encode() for i in range(3))
        # inter-chunk pacing survives: the last chunk comes >= 2 sleeps after the first
        assert chunks[-1][0] - chunks[0][0] >= 0.09
        rec = read_records(tmp_path / "r.jsonl")[0]
        assert rec["x_gripprobe_ttfb_ms"] < rec["x_gripprobe_duration_ms"]

    run(main())


def test_oracle_slow_stream_arrives_incrementally(tmp_path: Path) -> None:
    body = {"model": "slow-stream", "messages": USER, "tools": CHAT_TOOLS, "stream": True}

    async def main() -> list[float]:
        async with OracleServer(ACTIONS) as oracle, proxied(oracle.base_url, tmp_path / "r.jsonl") as proxy, \
                aiohttp.ClientSession() as s:
            arrivals = []
            t0 = time.perf_counter()
            async with s.post(proxy.base_url + "/v1/chat/completions", json=body) as resp:
                assert resp.status == 200
                async for _ in resp.content.iter_any():
                    arrivals.append(time.perf_counter() - t0)
            return arrivals

    arrivals = run(main())
    assert len(arrivals) >= 5, "slow-stream should arrive in many separate chunks"
    assert arrivals[-1] - arrivals[0] > 0.5 * (arrivals[-1] if arrivals[-1] else 1)


# ------------------------------------------------------------------------ headers, bodies, records

def echo_app(seen: list[dict[str, Any]], routes: tuple[tuple[str, str, Any], ...] = ()) -> web.Application:
    """Echoes what it received into ``seen``; ``routes`` (method, path, handler) are matched first."""
    async def echo(request: web.Request) -> web.Response:
        seen.append({"headers": dict(request.headers), "raw_path": request.raw_path, "method": request.method,
                     "body": await request.read()})
        return web.json_response({"ok": True}, headers={"X-Upstream": "yes", "Keep-Alive": "timeout=5"})

    app = web.Application(client_max_size=16 << 20)
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    app.router.add_route("*", "/{tail:.*}", echo)
    return app


def test_request_headers_path_and_query_are_forwarded_hop_by_hop_dropped(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def main() -> tuple[str, aiohttp.ClientResponse]:
        async with serving(echo_app(seen)) as up, proxied(up + "/prefix/", tmp_path / "r.jsonl") as proxy, \
                aiohttp.ClientSession(skip_auto_headers=("Accept-Encoding",)) as s:
            headers = {"X-Custom": "kept", "Connection": "keep-alive, X-Hop", "X-Hop": "dropped",
                       "TE": "trailers", "Proxy-Authorization": "Basic c2VjcmV0", "Authorization": "Bearer sk-abc",
                       "Content-Type": "application/json", "User-Agent": "agent/1.0"}
            async with s.put(proxy.base_url + "/api/x%2Fy?a=1&b=%20c&a=2", data=b'{"k": 1}', headers=headers) as r:
                await r.read()
                return up, r

    up, resp = run(main())
    assert resp.status == 200 and resp.headers["X-Upstream"] == "yes"
    assert "Keep-Alive" not in resp.headers  # hop-by-hop on the way back too
    [req] = seen
    assert req["method"] == "PUT" and req["raw_path"] == "/prefix/api/x%2Fy?a=1&b=%20c&a=2"
    assert req["body"] == b'{"k": 1}'
    h = req["headers"]
    assert h["X-Custom"] == "kept" and h["Authorization"] == "Bearer sk-abc" and h["User-Agent"] == "agent/1.0"
    assert h["Content-Type"] == "application/json" and h["Content-Length"] == "8"
    assert h["Host"] == up.removeprefix("http://")  # rewritten to the upstream's
    for gone in ("X-Hop", "TE", "Proxy-Authorization"):
        assert gone not in h
    assert "Accept-Encoding" not in h  # the proxy adds no compression the client did not ask for


def test_compressed_body_passes_through_undecoded(tmp_path: Path) -> None:
    payload = gzip.compress(json.dumps({"message": "x" * 5000}).encode(), mtime=0)

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=payload, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})

    async def main() -> tuple[int, dict, bytes]:
        app = web.Application()
        app.router.add_get("/gz", handler)
        async with serving(app) as up, proxied(up, tmp_path / "r.jsonl") as proxy, \
                aiohttp.ClientSession(auto_decompress=False) as s:
            async with s.get(proxy.base_url + "/gz", headers={"Accept-Encoding": "gzip"}) as r:
                return r.status, dict(r.headers), await r.read()

    status, headers, body = run(main())
    assert status == 200 and headers["Content-Encoding"] == "gzip" and body == payload
    assert len(read_records(tmp_path / "r.jsonl")) == 1


def test_one_record_per_exchange_in_order(tmp_path: Path) -> None:
    record = tmp_path / "proxy.measured.http.jsonl"

    async def main() -> None:
        async with OracleServer(ACTIONS) as oracle, proxied(oracle.base_url, record) as proxy, \
                aiohttp.ClientSession() as s:
            messages = list(USER)
            for _ in range(3):  # a real tool loop: call, result, call, result, answer
                async with s.post(proxy.base_url + "/v1/chat/completions",
                                  json={"model": "perfect", "messages": messages, "tools": CHAT_TOOLS}) as r:
                    msg = (await r.json())["choices"][0]["message"]
                messages.append(msg)
                for call in msg.get("tool_calls") or []:
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
            async with s.get(proxy.base_url + "/v1/models") as r:
                assert r.status == 200
            assert proxy.exchange_count == 4

    run(main())
    records = read_records(record)
    assert [r["x_gripprobe_path"] for r in records] == ["/v1/chat/completions"] * 3 + ["/v1/models"]
    assert [r["x_gripprobe_tool_call_count"] for r in records[:3]] == [1, 1, 0]
    assert [r["x_gripprobe_tool_result_count"] for r in records[:3]] == [0, 1, 2]
    stamps = [r["x_gripprobe_timestamp"] for r in records]
    assert stamps == sorted(stamps) and all(s.endswith("Z") for s in stamps)


# ------------------------------------------------------------------------------------- plugin

def test_start_proxy_hook_returns_a_handle_and_none_for_non_http(tmp_path: Path) -> None:
    from conftest import SPECS
    from gripprobe_core.phase import PhaseContext
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.judge import proxy_evidence
    from gripprobe_core.runner import plan_cases
    from gripprobe_core.specs import load_specs

    gpm = make_plugin_manager(load_entry_points=False)
    specs = load_specs(SPECS)  # the spec objects only: which agent plugins are installed does not matter here
    pc = plan_cases(specs, agents=["reference"], models=["oracle-perfect"], tests=["shell_pwd"])[0]

    def ctx(base_url: str) -> PhaseContext:
        return PhaseContext(run_id="r", case_id=pc.case_id, phase="measured", agent=pc.agent, model=pc.model,
                            backend=pc.backend, test=pc.test, format=pc.format, prompt="p", workspace=tmp_path,
                            home=tmp_path, tmpdir=tmp_path, artifacts_dir=tmp_path, base_url=base_url,
                            model_name="perfect")

    async def main() -> None:
        record = tmp_path / "proxy.measured.http.jsonl"
        assert gpm.hook.start_proxy(ctx("unix:///x"), "unix:///x", record, None) is None
        async with OracleServer(ACTIONS) as oracle:
            handle = gpm.hook.start_proxy(ctx(oracle.base_url), oracle.base_url, record, None)
            assert handle is not None and handle.record_path == record
            await handle.start()  # the hook answers an unstarted handle: starting is the runner's, awaited
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+", handle.base_url)
            async with aiohttp.ClientSession() as s:
                async with s.post(handle.base_url + "/v1/chat/completions",
                                  json={"model": "perfect", "messages": USER, "tools": CHAT_TOOLS}) as r:
                    assert r.status == 200
            await handle.stop()
        assert handle.status()["error"] is None
        tier_a = proxy_evidence("measured", {"status": "collected", "started": True}, record, None)
        events = tier_a.events
        assert [e.event_type for e in events] == ["model_response", "tool_call_start"]
        assert all(e.source_tier == "A" and e.source == "proxy" for e in events)
        assert events[1].parent_id == events[0].event_id and events[1].payload["raw_name"] == "write"
        assert {k: tier_a.summary_kwargs[k] for k in ("proxy_structured_count", "proxy_nonstructured_count",
                                                       "backend_tool_unsupported")} == {
            "proxy_structured_count": 1, "proxy_nonstructured_count": 0, "backend_tool_unsupported": False}

    run(main())


def test_large_bodies_both_ways_and_bodiless_replies(tmp_path: Path) -> None:
    """A 3 MiB request (a long agent context) and a 3 MiB response of known length pass intact;
    HEAD and 204 keep their headers."""
    seen: list[dict[str, Any]] = []
    big_up = json.dumps({"messages": [{"role": "user", "content": "y" * (3 << 20)}]}).encode()
    big_down = bytes(range(256)) * (3 << 12)

    async def down(request: web.Request) -> web.Response:
        return web.Response(body=big_down, content_type="application/octet-stream")

    async def head(request: web.Request) -> web.Response:
        return web.Response(status=200, headers={"Content-Length": "1234", "Content-Type": "text/plain"})

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204, headers={"X-Why": "nothing"})

    async def main() -> None:
        app = echo_app(seen, (("GET", "/down", down), ("HEAD", "/head", head), ("DELETE", "/empty", empty)))
        async with serving(app) as up, proxied(up, tmp_path / "r.jsonl") as proxy, aiohttp.ClientSession() as s:
            async with s.post(proxy.base_url + "/v1/chat/completions", data=big_up,
                              headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200
            async with s.get(proxy.base_url + "/down") as r:
                assert r.status == 200 and r.headers["Content-Length"] == str(len(big_down))
                assert await r.read() == big_down
            async with s.head(proxy.base_url + "/head") as r:
                assert r.status == 200 and r.headers["Content-Length"] == "1234"
            async with s.delete(proxy.base_url + "/empty") as r:
                assert r.status == 204 and r.headers["X-Why"] == "nothing" and await r.read() == b""

    run(main())
    assert seen[0]["body"] == big_up
    records = read_records(tmp_path / "r.jsonl")
    assert [r["x_gripprobe_status"] for r in records] == [200, 200, 200, 204]
    assert all(len(json.dumps(r)) < 1 << 20 for r in records)  # the record stays within its budget
