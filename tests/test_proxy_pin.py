"""The recording proxy serves only the case's model: a model call naming another (or none, or naming
`model` twice) is answered 403 ``model_not_under_test``, recorded, and never forwarded; everything else is
relayed. A real aiohttp upstream on 127.0.0.1 that counts what reaches it, and the real proxy."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gripprobe_core.proxy import read_records
from gripprobe_core.proxy.events import proxy_counts, records_to_events
from gripprobe_core.proxy.pin import ModelPin
from gripprobe_core.proxy.protocols import MODEL_PROTOCOLS
from proxy_helpers import proxied, run, serving

MODEL = "qwen3:8b"


class Upstream:
    """Answers any path; a model named ``no-tools`` gets the 400 a server sends for a model without tools."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes]] = []

    async def any(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append((request.method, request.path, body))
        try:
            model = json.loads(body).get("model") if body else None
        except (ValueError, AttributeError):
            model = None
        if model == "no-tools":
            return web.json_response({"error": {"message": "registry.ollama.ai/library/x does not support tools"}},
                                     status=400)
        return web.json_response({"id": "c1", "object": "chat.completion", "model": model,
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                               "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.any)
        return app


def chat(model: object = MODEL) -> bytes:
    body: dict = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    if model is not None:
        body["model"] = model
    return json.dumps(body).encode()


async def _send(proxy, requests: list[tuple[str, str, bytes]]) -> list[tuple[int, dict | None]]:
    out = []
    async with aiohttp.ClientSession() as s:
        for method, path, body in requests:
            async with s.request(method, proxy.base_url + path, data=body,
                                 headers={"Content-Type": "application/json"}) as r:
                text = await r.read()
                try:
                    out.append((r.status, json.loads(text)))
                except ValueError:
                    out.append((r.status, None))
    return out


def _through(tmp_path: Path, requests: list[tuple[str, str, bytes]], models=(MODEL, "openai/" + MODEL)):
    up = Upstream()
    record = tmp_path / "proxy.jsonl"

    async def main():
        async with serving(up.app()) as url, proxied(url, record, models=models) as proxy:
            answers = await _send(proxy, requests)
        return answers, proxy

    answers, proxy = run(main())
    return answers, proxy, up, read_records(record)


REFUSED = [
    ("another model", "POST", "/v1/chat/completions", chat("perfect")),
    ("the upstream's tool-less model", "POST", "/v1/chat/completions", chat("no-tools")),
    ("no model", "POST", "/v1/chat/completions", chat(None)),
    ("a model that is not a string", "POST", "/v1/chat/completions", chat(["qwen3:8b"])),
    ("an empty model", "POST", "/v1/chat/completions", chat("")),
    ("a body that is not JSON", "POST", "/v1/chat/completions", b"model=qwen3:8b"),
    ("model twice, ours last", "POST", "/v1/chat/completions",
     b'{"model": "perfect", "model": "qwen3:8b", "messages": []}'),
    ("model twice, ours first", "POST", "/v1/chat/completions",
     b'{"model": "qwen3:8b", "model": "perfect", "messages": []}'),
    ("model twice, the second spelled with an escape", "POST", "/v1/chat/completions",
     b'{"model": "qwen3:8b", "mod\\u0065l": "perfect", "messages": []}'),
    ("the Responses API", "POST", "/v1/responses", json.dumps({"model": "perfect", "input": "hi"}).encode()),
    ("Ollama chat", "POST", "/api/chat", json.dumps({"model": "perfect", "messages": []}).encode()),
    ("Ollama generate", "POST", "/api/generate", json.dumps({"model": "perfect", "prompt": "hi"}).encode()),
    ("a prefix before the path", "POST", "/openai/v1/chat/completions", chat("perfect")),
    ("a legacy completions body", "POST", "/v1/completions",
     json.dumps({"model": "perfect", "prompt": "hi"}).encode()),
    ("a chat body on an unknown path", "POST", "/v1/whatever", chat("perfect")),
    ("a model in the path", "POST", "/openai/deployments/perfect/chat/completions", chat()),
    ("a model in a generateContent path", "POST", "/v1beta/models/perfect:generateContent", b"{}"),
    ("a provider prefix the agent was not given", "POST", "/v1/chat/completions", chat("local/" + MODEL)),
]


@pytest.mark.parametrize("why,method,path,body", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_model_call_not_naming_the_case_model_is_refused_recorded_and_never_forwarded(
        tmp_path: Path, why: str, method: str, path: str, body: bytes) -> None:
    answers, proxy, up, records = _through(tmp_path, [(method, path, body)])
    assert up.seen == [], f"{why}: forwarded to the upstream"
    status, answer = answers[0]
    assert status == 403 and answer is not None and answer["error"]["code"] == "model_not_under_test", answers
    assert "does not support tools" not in json.dumps(answer)
    assert proxy.status()["model_not_under_test"] == 1 and proxy.model_refusal_count == 1
    assert proxy.status()["error"] is None  # the upstream did nothing wrong
    [rec] = records
    assert rec["x_gripprobe_proxy_error"] == "model_not_under_test" and rec["x_gripprobe_status"] == 403
    assert rec["x_gripprobe_backend_tool_unsupported"] is False
    events = records_to_events(records, phase="measured", artifact_name="p")
    if rec["x_gripprobe_protocol"] in MODEL_PROTOCOLS:  # a Gemini-style path is not a protocol tier A reads
        assert [e.error_type for e in events] == ["model_not_under_test"]


ALLOWED = [
    ("the model", "POST", "/v1/chat/completions", chat()),
    ("the name the agent was given", "POST", "/v1/chat/completions", chat("openai/" + MODEL)),
    ("without /v1", "POST", "/chat/completions", chat()),
    ("Ollama chat", "POST", "/api/chat", json.dumps({"model": MODEL, "messages": []}).encode()),
    ("model listing", "GET", "/v1/models", b""),
    ("Ollama tags", "GET", "/api/tags", b""),
    ("Ollama show of another model (not a call)", "POST", "/api/show", json.dumps({"model": "perfect"}).encode()),
    ("a non-model POST", "POST", "/v1/files", b"raw bytes"),
    ("model text inside a message", "POST", "/v1/chat/completions",
     json.dumps({"model": MODEL, "messages": [{"role": "user", "content": '{"model": "perfect"}'}]}).encode()),
    ("a duplicate key in a nested object", "POST", "/v1/chat/completions",
     b'{"model": "qwen3:8b", "messages": [], "metadata": {"model": "a", "model": "b"}}'),
    ("non-ASCII text escaped", "POST", "/v1/chat/completions",
     json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "héllo"}]}).encode()),
]


@pytest.mark.parametrize("why,method,path,body", ALLOWED, ids=[r[0] for r in ALLOWED])
def test_calls_naming_the_case_model_and_other_requests_are_relayed(
        tmp_path: Path, why: str, method: str, path: str, body: bytes) -> None:
    answers, proxy, up, records = _through(tmp_path, [(method, path, body)])
    assert answers[0][0] == 200 and len(up.seen) == 1, (why, answers)
    assert up.seen[0][2] == body  # byte for byte
    assert proxy.model_refusal_count == 0 and records[0]["x_gripprobe_proxy_error"] is None


def test_without_a_pin_every_model_is_relayed(tmp_path: Path) -> None:
    answers, proxy, up, _ = _through(tmp_path, [("POST", "/v1/chat/completions", chat("perfect"))], models=None)
    assert answers[0][0] == 200 and len(up.seen) == 1 and proxy.pin is None


def test_tools_unsupported_comes_only_from_the_backend_about_the_case_model(tmp_path: Path) -> None:
    """The backend's own 400 "does not support tools" for the case's model is TOOL_UNSUPPORTED evidence; a
    request naming the backend's tool-less model is refused by the proxy and is not."""
    asked = [("POST", "/v1/chat/completions", chat("no-tools"))]
    _, _, up, records = _through(tmp_path, asked, models=(MODEL,))
    assert up.seen == [] and proxy_counts(records)["backend_tool_unsupported"] is False
    _, _, up, records = _through(tmp_path, asked, models=("no-tools",))  # the case's own model
    assert len(up.seen) == 1 and proxy_counts(records)["backend_tool_unsupported"] is True


def test_a_refusal_keeps_the_connection_and_the_next_call_goes_through(tmp_path: Path) -> None:
    answers, proxy, up, records = _through(tmp_path, [
        ("POST", "/v1/chat/completions", chat("perfect")), ("POST", "/v1/chat/completions", chat()),
        ("POST", "/v1/chat/completions", chat("gpt-5"))])
    assert [a[0] for a in answers] == [403, 200, 403] and len(up.seen) == 1
    assert proxy.status()["model_not_under_test"] == 2 and len(proxy.model_refusals) == 2
    assert "'gpt-5'" in proxy.model_refusals[1]


@pytest.mark.parametrize("bad", [[], [""], [None]])
def test_a_pin_needs_a_name(bad) -> None:
    with pytest.raises(ValueError, match="at least one model name"):
        ModelPin(bad)
