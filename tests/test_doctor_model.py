"""``gripprobe doctor --model M`` (cli/model_doctor.py, backends/doctor.py, backends/toolprobe.py) through
the real command, against real servers on 127.0.0.1: the oracle behind an ``openai-compatible`` spec, an
``ollama`` spec and an ``anthropic`` spec (``/v1/messages``), a closed port, and a small aiohttp app answering the way vLLM does without
``--enable-auto-tool-choice``."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from aiohttp import web

from backend_helpers import OracleThread, closed_port, spec_root_with_model
from conftest import ROOT, gripprobe
from gripprobe_core.backends.doctor import hashes_match
from gripprobe_core.backends.toolprobe import PROBE_PATH, PROBE_PROMPT, PROBE_TOOL_NAME
from gripprobe_core.oracle.ollama_api import profile_digest

SRC = [ROOT / "src"]


def doctor(*args: str, env: dict | None = None):
    res = gripprobe("doctor", *args, pythonpath=SRC, env=env, timeout=180)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    return res


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def lines_of(stdout: str, model: str) -> list[str]:
    """The table of one model: its header line and the lines under it."""
    out, inside = [], False
    for line in stdout.splitlines():
        if line and not line.startswith(" "):
            inside = line.startswith(model + "  ")
        if inside and line.strip():
            out.append(line)
    return out


@pytest.fixture(scope="module")
def oracle():
    with OracleThread() as o:
        yield o


@pytest.fixture()
def specs(tmp_path, oracle):
    """The repository's specs plus models pointing at the running oracle: one per profile and kind."""
    base = oracle.base_url
    for kind, suffix, url in (("openai-compatible", "oa", base + "/v1"), ("ollama", "ol", base), ("anthropic", "an", base)):
        for profile in ("perfect", "text-tools", "lazy", "malformed-args", "tools-unsupported", "http-500"):
            spec_root_with_model(tmp_path, kind=kind, base_url=url, profile=profile, model_id=f"{suffix}-{profile}")
        spec_root_with_model(tmp_path, kind=kind, base_url=url, profile="not-served", model_id=f"{suffix}-missing")
    return tmp_path / "specs"


# ----------------------------------------------------------------------------------- all checks pass


def test_the_oracles_openai_ollama_and_anthropic_endpoints_pass_every_check(specs, oracle):
    before = len(oracle.server.request_log)
    res = doctor("--model", "oa-perfect", "--model", "ol-perfect", "--model", "an-perfect", "--specs", str(specs))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stderr == ""
    for model, path in (("oa-perfect", "/v1/chat/completions"), ("ol-perfect", "/api/chat"),
                        ("an-perfect", "/v1/messages")):
        table = lines_of(res.stdout, model)
        assert table[0].startswith(f"{model}  backend local (")
        assert [line.split()[0] for line in table[1:] if line.split()[0] in "✓✗–?"] == ["✓"] * 4, table
        text = "\n".join(table)
        assert f'structured: read_file({{"path": "{PROBE_PATH}"}})' in text
        assert f"POST {oracle.base_url}{path}" in text
        assert f"sha256:{profile_digest('perfect')[:12]}" in text and "(reported by the server)" in text
    # the requests really went out, on each backend's own protocol, offering the one tool
    seen = oracle.server.request_log[before:]
    probes = [r for r in seen if r["tools"]]
    assert [(r["protocol"], r["tools"], r["reply"], r["stream"]) for r in probes] == [
        ("chat_completions", [PROBE_TOOL_NAME], "tool_call", False),
        ("ollama_chat", [PROBE_TOOL_NAME], "tool_call", False),
        ("anthropic_messages", [PROBE_TOOL_NAME], "tool_call", False)]
    assert all(r["authorized"] is False for r in probes)  # no key in these specs: none invented
    calls = [c for c in oracle.server.ground_truth
             if c["protocol"] in ("chat_completions", "ollama_chat", "anthropic_messages")][-3:]
    assert [(c["name"], c["arguments"], c["structured"]) for c in calls] == [
        (PROBE_TOOL_NAME, {"path": PROBE_PATH}, True)] * 3


def test_json_shape(specs, oracle):
    res = doctor("-m", "oa-perfect", "-m", "ol-perfect", "-m", "an-perfect", "--json", "--specs", str(specs))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [m["model"] for m in out] == ["oa-perfect", "ol-perfect", "an-perfect"]
    for m, kind, path in zip(out, ("openai-compatible", "ollama", "anthropic"),
                             ("/v1/chat/completions", "/api/chat", "/v1/messages")):
        assert set(m) == {"model", "backend_id", "kind", "model_id", "url", "embedded", "ok", "exit_code", "checks",
                          "fix"}
        assert (m["kind"], m["backend_id"], m["model_id"], m["url"], m["embedded"], m["ok"], m["exit_code"],
                m["fix"]) == (kind, "local", "perfect", oracle.base_url, False, True, 0, {})
        checks = m["checks"]
        assert list(checks) == ["reachable", "served", "tool_call", "model_hash"]
        assert all(c["ok"] is True for c in checks.values())
        assert checks["reachable"]["reachable"] and checks["reachable"]["http_status"] == 200
        assert "perfect" in checks["served"]["models"] or "perfect:latest" in checks["served"]["models"]
        tc = checks["tool_call"]
        assert (tc["outcome"], tc["tool_name"], tc["arguments"], tc["http_status"], tc["text_tool_calls"]) == (
            "structured", PROBE_TOOL_NAME, {"path": PROBE_PATH}, 200, [])
        assert tc["endpoint"] == f"POST {oracle.base_url}{path}" and tc["latency_ms"] >= 0
        assert checks["model_hash"] == {"ok": True, "value": f"sha256:{profile_digest('perfect')}", "source": "server",
                                        "server_digest": f"sha256:{profile_digest('perfect')}",
                                        "spec_model_hash": None}


def test_an_embedded_oracle_model_is_started_and_probed(tmp_path):
    res = doctor("-m", "oracle-perfect", "-m", "oracle-text-tools", "--json")
    assert res.returncode == 1
    perfect, text = json.loads(res.stdout)
    assert perfect["embedded"] and perfect["url"] is None and perfect["ok"]
    assert perfect["checks"]["tool_call"]["endpoint"] == "POST /v1/chat/completions of the embedded oracle"
    assert text["checks"]["tool_call"]["outcome"] == "text" and not text["ok"]


# ------------------------------------------------------------------------------------ failed checks


@pytest.mark.parametrize("suffix", ["oa", "ol", "an"])
def test_a_tool_call_written_as_text_is_text_only_and_exits_1(specs, suffix):
    res = doctor("-m", f"{suffix}-text-tools", "--specs", str(specs))
    assert res.returncode == 1 and res.stderr == ""
    text = "\n".join(lines_of(res.stdout, f"{suffix}-text-tools"))
    assert "✗ tool call" in text
    assert f"text only: the model wrote {PROBE_TOOL_NAME} as text, which the server did not parse" in text
    assert 'answer: "I will use these tools: <tool_call>{"name": "read_file"' in text
    assert "fix: " in text and ("tool-call parser" in text or "tools capability" in text)
    assert "✓ reachable" in text and "✓ served" in text


def test_each_oracle_profile_answers_the_probe_in_character(specs):
    models = [f"{s}-{p}" for s in ("oa", "ol", "an")
              for p in ("perfect", "text-tools", "lazy", "malformed-args", "tools-unsupported", "http-500")]
    res = doctor(*[a for m in models for a in ("-m", m)], "--json", "--specs", str(specs))
    assert res.returncode == 1, res.stderr
    got = {m["model"]: m["checks"]["tool_call"] for m in json.loads(res.stdout)}
    for suffix in ("oa", "ol", "an"):
        assert got[f"{suffix}-perfect"]["outcome"] == "structured"
        assert got[f"{suffix}-text-tools"]["outcome"] == "text"
        assert got[f"{suffix}-text-tools"]["text_tool_calls"] == [PROBE_TOOL_NAME]
        lazy = got[f"{suffix}-lazy"]
        assert lazy["outcome"] == "text" and lazy["text_tool_calls"] == [] and lazy["text"].startswith("To solve")
        assert got[f"{suffix}-malformed-args"]["outcome"] == "malformed"
        rejected = got[f"{suffix}-tools-unsupported"]
        assert rejected["outcome"] == "error" and rejected["http_status"] == 400
        assert "does not support tools" in rejected["error"]
        assert got[f"{suffix}-http-500"]["http_status"] == 500
    # Chat Completions arguments are a string (cut short); Ollama's an object (without the required path)
    assert "not valid JSON" in got["oa-malformed-args"]["error"]
    assert "required 'path'" in got["ol-malformed-args"]["error"]
    assert "not valid JSON" in got["an-malformed-args"]["error"]  # a whole message cannot hold half an object


@pytest.mark.parametrize("suffix", ["oa", "ol", "an"])
def test_a_model_the_server_does_not_serve_exits_1(specs, suffix):
    res = doctor("-m", f"{suffix}-missing", "--specs", str(specs))
    assert res.returncode == 1 and res.stderr == ""
    text = "\n".join(lines_of(res.stdout, f"{suffix}-missing"))
    assert "✓ reachable" in text
    assert "✗ served       not-served is not among the models served (" in text
    fix = "ollama pull not-served" if suffix == "ol" else "--served-model-name"
    assert fix in text and f"specs/models/{suffix}-missing.yaml:" in text


def _hash_spec(root: Path, model_id: str, base: str, model_hash: str) -> None:
    (root / "models" / f"{model_id}.yaml").write_text(
        f"id: {model_id}\nbackends:\n  - id: local\n    kind: ollama\n    model_id: perfect\n"
        f"    base_url: {base}\n    model_hash: {model_hash}\n")


def test_the_model_hash_is_checked_against_the_spec(specs, oracle):
    digest = profile_digest("perfect")
    _hash_spec(specs, "same-hash", oracle.base_url, digest[:12])
    _hash_spec(specs, "other-hash", oracle.base_url, "sha256:" + "0" * 64)
    res = doctor("-m", "same-hash", "-m", "other-hash", "--specs", str(specs))
    assert res.returncode == 1
    same, other = "\n".join(lines_of(res.stdout, "same-hash")), "\n".join(lines_of(res.stdout, "other-hash"))
    assert "✓ model hash" in same and "(matches the spec)" in same
    assert "✗ model hash" in other and "fix: the server serves sha256:" in other and "other-hash.yaml:" in other
    assert hashes_match(f"sha256:{digest}", digest[:12].upper()) and not hashes_match(digest, digest[:8])


# ------------------------------------------------------------------------------------- exit 2


def test_an_unreachable_backend_exits_2_with_one_line(tmp_path):
    port = closed_port()
    root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=f"http://127.0.0.1:{port}/v1")
    res = doctor("--model", "remote", "--specs", str(root))
    assert res.returncode == 2
    (line,) = error_lines(res.stderr)
    assert line.startswith("error: backend 'local' (openai-compatible) is unreachable: ")
    assert f"GET http://127.0.0.1:{port}/v1/models: connection refused" in line
    assert "fix: start the server, or check base_url (" in line and "specs/models/remote.yaml:" in line
    table = lines_of(res.stdout, "remote")
    assert "✗ reachable" in table[1] and "connection refused" in table[1]
    assert all("not checked" in line for line in table[2:]), table


def test_base_url_overrides_the_spec_and_the_fix_names_it(specs, oracle):
    port = closed_port()
    res = doctor("-m", "ol-perfect", "--base-url", f"http://127.0.0.1:{port}", "--specs", str(specs))
    assert res.returncode == 2
    (line,) = error_lines(res.stderr)
    assert f"GET http://127.0.0.1:{port}/api/tags: connection refused" in line and "check --base-url" in line
    # and the other way round: a spec pointing nowhere, --base-url pointing at the oracle
    root = spec_root_with_model(specs.parent, kind="ollama", base_url=f"http://127.0.0.1:{port}", model_id="moved")
    res = doctor("-m", "moved", "--base-url", oracle.base_url, "--specs", str(root))
    assert res.returncode == 0, res.stdout + res.stderr


def test_one_unreachable_backend_among_good_ones_still_shows_every_table(specs):
    port = closed_port()
    spec_root_with_model(specs.parent, kind="ollama", base_url=f"http://127.0.0.1:{port}", model_id="gone")
    res = doctor("-m", "oa-perfect", "-m", "gone", "-m", "oa-text-tools", "--specs", str(specs))
    assert res.returncode == 2
    assert len(error_lines(res.stderr)) == 1
    assert lines_of(res.stdout, "oa-perfect") and lines_of(res.stdout, "oa-text-tools")
    assert "✗ tool call" in "\n".join(lines_of(res.stdout, "oa-text-tools"))


@pytest.mark.parametrize("args,expected", [
    (["-m", "oa-perfectt"], "error: unknown model 'oa-perfectt'; did you mean 'oa-perfect'?"),
    (["-m", "oa-perfect", "--backend", "nope"], "error: model 'oa-perfect' has no backend 'nope'; it has: local"),
    (["-m", "oracle-perfect", "--base-url", "http://127.0.0.1:1"], "error: --base-url: model 'oracle-perfect' uses "
                                                                     "the embedded oracle backend"),
    (["--json"], "error: --json only works with --model"),
])
def test_bad_input_is_one_line_and_exit_2(specs, args, expected):
    res = doctor(*args, "--specs", str(specs))
    assert res.returncode == 2 and res.stdout == ""
    (line,) = error_lines(res.stderr)
    assert line.startswith(expected), line


# ------------------------------------------------------------------- a server that rejects auto tool choice


class AppThread:
    """A small aiohttp app on 127.0.0.1 in a thread: an OpenAI-compatible server that lists one model and
    refuses ``tool_choice: auto`` with vLLM's 400 (a vLLM started without ``--enable-auto-tool-choice``)."""

    MESSAGE = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.bodies: list[dict] = []

    async def _start(self) -> str:
        async def models(request):
            return web.json_response({"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model",
                                                                  "max_model_len": 32768}]})

        async def chat(request):
            self.bodies.append(await request.json())
            return web.json_response({"object": "error", "message": self.MESSAGE, "type": "BadRequestError",
                                      "param": None, "code": 400}, status=400)

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        host, port = self.runner.addresses[0][:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> str:
        self.thread.start()
        return asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_a_server_refusing_auto_tool_choice_gets_the_vllm_fix(tmp_path):
    app = AppThread()
    with app as base:
        root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=base + "/v1",
                                    profile="Qwen/Qwen3-8B", model_id="vllm-like")
        res = doctor("-m", "vllm-like", "--specs", str(root))
    assert res.returncode == 1
    text = "\n".join(lines_of(res.stdout, "vllm-like"))
    assert "✓ served       Qwen/Qwen3-8B" in text
    assert f"✗ tool call    rejected: HTTP 400: {app.MESSAGE}" in text
    assert "fix: start vLLM with --enable-auto-tool-choice --tool-call-parser <parser>" in text
    assert "? model hash   unknown" in text
    (body,) = app.bodies
    assert body["tools"][0]["function"]["name"] == PROBE_TOOL_NAME and body["tool_choice"] == "auto"
    assert body["messages"] == [{"role": "user", "content": PROBE_PROMPT}] and body["stream"] is False


class LlamaLikeThread(AppThread):
    """A server answering as llama-server does with ``--jinja``: ``GET /props`` names its chat template's
    capabilities, and the model's reply comes back as text (``content``), in the shape ``reply`` gives."""

    def __init__(self, reply: str, supports_tool_calls: bool | None) -> None:
        super().__init__()
        self.reply, self.supports = reply, supports_tool_calls

    async def _start(self) -> str:
        async def models(request):
            return web.json_response({"object": "list", "data": [{"id": "qwen-1.5b", "object": "model"}]})

        async def props(request):
            caps = {} if self.supports is None else {"supports_tools": True, "supports_tool_calls": self.supports}
            return web.json_response({"chat_template": "{{ messages }}", "chat_template_caps": caps})

        async def chat(request):
            self.bodies.append(await request.json())
            return web.json_response({"object": "chat.completion", "model": "qwen-1.5b", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": self.reply}}]})

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_get("/props", props)
        app.router.add_post("/v1/chat/completions", chat)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        host, port = self.runner.addresses[0][:2]
        return f"http://{host}:{port}"


FENCED = f'```json\n{{"name": "{PROBE_TOOL_NAME}", "arguments": {{"path": "{PROBE_PATH}"}}}}\n```'
HERMES = f'<tool_call>\n{{"name": "{PROBE_TOOL_NAME}", "arguments": {{"path": "{PROBE_PATH}"}}}}\n</tool_call>'


@pytest.mark.parametrize("reply, supports, want, not_want", [
    # the template does tool calls and the server parses them: the model wrote a JSON block instead
    (FENCED, True, "the model ignored its chat template's tool-call format and wrote the call as a JSON block "
                   "(the server's /props says its chat template does support tool calls): no server flag", "--jinja"),
    # the template's own format, not parsed, and the server says its template has no tool calls: the parser is off
    (HERMES, False, "the server did not parse the model's tool calls: enable its tool-call parser", "ignored"),
    # the template's own format, and the server says its template does tool calls: a template mismatch
    (HERMES, True, "llama-server's chat template supports tool calls (/props), yet the model's call in the "
                   "template's own format was not parsed: check that the template matches the model", "ignored"),
    # a server that says nothing (no caps): a JSON block is still the model's doing
    (FENCED, None, "the model ignored its chat template's tool-call format and wrote the call as a JSON block: "
                   "no server flag", "/props"),
])
def test_doctor_tells_a_parser_that_is_off_from_a_model_that_ignores_its_template(tmp_path, reply, supports,
                                                                                  want, not_want):
    app = LlamaLikeThread(reply, supports)
    with app as base:
        root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=base + "/v1",
                                    profile="qwen-1.5b", model_id="llama-like")
        res = doctor("-m", "llama-like", "--specs", str(root))
        as_json = doctor("-m", "llama-like", "--specs", str(root), "--json")
    assert res.returncode == 1
    text = " ".join(" ".join(lines_of(res.stdout, "llama-like")).split())
    assert f"fix: {want}" in text, text
    assert not_want not in text.split("fix:", 1)[1], text
    probe = json.loads(as_json.stdout)
    found = json.dumps(probe)
    assert '"text_tool_syntaxes"' in found and ('"json_fence"' in found) == (reply == FENCED), found
