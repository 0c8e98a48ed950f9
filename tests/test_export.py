"""`gripprobe export`: JUnit XML validated against the Jenkins xUnit plugin's junit-10.xsd (tests/schemas/) and
read back with junitparser, xunitparser and junit2html, OTLP spans received by a real OTLP/HTTP receiver and
decoded with the collector's protobuf, ATIF trajectories validated against models of the ATIF spec.

One real run is made once (reference agent × oracle profiles that pass, do nothing, fail then recover and
have tools rejected, plus codex); every export goes through the real `gripprobe` command in a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from atif_schema import AtifTrajectory
from conftest import gripprobe

pytestmark = pytest.mark.e2e

SELECTION = ["-a", "reference", "-m", "oracle-perfect", "-m", "oracle-lazy", "-m", "oracle-error-then-recover",
             "-m", "oracle-tools-unsupported", "-t", "shell_file", "-t", "save_file"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("export") / "results"
    res = gripprobe("run", *SELECTION, "--results", str(results))
    assert res.returncode == 0, res.stderr[-3000:]
    res = gripprobe("run", "-a", "codex", "-m", "oracle-perfect", "-t", "patch_file", "--results", str(results))
    assert res.returncode == 0, res.stderr[-3000:]
    runs = sorted((results / "runs").iterdir())
    # one run directory holding both: codex's case moved into the reference run
    for case in (runs[1] / "cases").iterdir():
        shutil.move(str(case), runs[0] / "cases" / case.name)
    return runs[0]


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "runs" / run.name
    shutil.copytree(run, dst, symlinks=True)
    return dst


def _events(case: Path) -> list[dict]:
    lines = (case / "artifacts" / "events.measured.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _set_status(case: Path, status: str, **fields: Any) -> None:
    data = json.loads((case / "case.json").read_text())
    data["verdict"]["status"] = status
    data["verdict"].update(fields)
    (case / "case.json").write_text(json.dumps(data))


# ------------------------------------------------------------------------------------------------ JUnit

SCHEMA = Path(__file__).parent / "schemas" / "junit-10.xsd"
SUITES = {"gripprobe.reference.oracle-perfect.tool", "gripprobe.reference.oracle-lazy.tool",
          "gripprobe.reference.oracle-error-then-recover.tool", "gripprobe.reference.oracle-tools-unsupported.tool",
          "gripprobe.codex.oracle-perfect.tool"}
#: What the JUnit document of `junit_run` holds: 10 cases in 5 suites.
OUTCOMES = {"failures": 2, "errors": 2, "skipped": 3}


@pytest.fixture(scope="module")
def junit_run(run_dir, tmp_path_factory):
    """The run with every JUnit outcome: PASS, NO_TOOL_CALL (failure), TIMEOUT (failure), HARNESS_ERROR (error,
    with text XML cannot hold), SKIPPED and TOOL_UNSUPPORTED (skipped), a corrupt case.json (error); exported
    once through the real command. Returns (run folder, the export's result, the XML file)."""
    run = _copy(run_dir, tmp_path_factory.mktemp("junit"))
    cases = {c.name: c for c in (run / "cases").iterdir()}
    _set_status(cases["reference__oracle-perfect__oracle__tool__shell_file"], "HARNESS_ERROR",
                evaluator_reason_text="proxy died \x00\x1b[31m <&> \uffff \U0001f600")
    _set_status(cases["reference__oracle-error-then-recover__oracle__tool__save_file"], "SKIPPED")
    _set_status(cases["reference__oracle-error-then-recover__oracle__tool__shell_file"], "TIMEOUT",
                failure_reason="timeout")
    (cases["reference__oracle-lazy__oracle__tool__save_file"] / "case.json").write_text("{not json")
    res = gripprobe("export", str(run), "--format", "junit")
    assert res.returncode == 0, res.stderr
    return run, res, run / "reports" / "junit.xml"


def _facts(system_out: str | None) -> dict[str, str]:
    """A test case's `key: value` lines (its <system-out>)."""
    return dict(line.split(": ", 1) for line in (system_out or "").splitlines() if ": " in line)


def test_junit_is_read_back_by_a_junit_parser(junit_run):
    from junitparser import Error, Failure, JUnitXml, Skipped

    run, res, out = junit_run
    cases = {c.name: c for c in (run / "cases").iterdir()}
    perfect = "reference__oracle-perfect__oracle__tool__save_file"
    assert str(out) in res.stdout
    assert "reference__oracle-lazy__oracle__tool__save_file" in res.stderr  # the corrupt case, named

    xml = JUnitXml.fromfile(str(out))
    suites = {s.name: s for s in xml}
    assert set(suites) == SUITES
    by_case = {}
    for suite in xml:
        props = {p.name: p.value for p in suite.properties()}
        assert props[f"{suite.name}.run_id"] == run.name and props[f"{suite.name}.format"] == "tool"
        assert suite.tests == len(list(suite))
        for tc in suite:
            assert tc.classname == suite.name
            case_props = _facts(tc.system_out)
            by_case[case_props["case_id"]] = (tc, case_props)
    assert len(by_case) == len(cases)
    codex = suites["gripprobe.codex.oracle-perfect.tool"]
    codex_props = {p.name.rsplit(".", 1)[1]: p.value for p in codex.properties()}
    (codex_case,) = codex
    assert codex_props["agent_version"] == _facts(codex_case.system_out)["agent_version"] != ""

    tc, props = by_case[perfect]
    assert tc.is_passed and tc.name == "save_file" and tc.time > 0
    assert props["status"] == "PASS" and props["tool_event_verdict"] == "confirmed_tool_use"
    assert props["telemetry_source_tier"] == "A" and props["sandbox"] in ("bwrap", "none")

    tc, props = by_case["reference__oracle-lazy__oracle__tool__shell_file"]
    (fail,) = tc.result
    assert isinstance(fail, Failure) and fail.type == "NO_TOOL_CALL"
    assert fail.message.startswith("no_tool_call_observed: ")
    assert "validator" in fail.text and "expected" in fail.text

    tc, _ = by_case["reference__oracle-error-then-recover__oracle__tool__shell_file"]
    assert isinstance(tc.result[0], Failure) and tc.result[0].type == "TIMEOUT"

    tc, _ = by_case["reference__oracle-perfect__oracle__tool__shell_file"]
    (err,) = tc.result
    assert isinstance(err, Error) and err.type == "HARNESS_ERROR"
    assert "proxy died \\x00\\x1b[31m <&> \\uffff \U0001f600" in err.message  # escaped, never raw

    for skipped in ("reference__oracle-error-then-recover__oracle__tool__save_file",
                    "reference__oracle-tools-unsupported__oracle__tool__save_file"):
        tc, _ = by_case[skipped]
        assert isinstance(tc.result[0], Skipped), skipped

    tc, _ = by_case["reference__oracle-lazy__oracle__tool__save_file"]
    assert isinstance(tc.result[0], Error) and tc.result[0].type == "UNREADABLE"

    assert xml.tests == len(cases)
    total = {k: sum(getattr(s, k) for s in xml) for k in ("failures", "errors", "skipped")}
    assert total == OUTCOMES


def test_junit_is_valid_against_the_junit_10_schema(junit_run):
    import xmlschema

    _, _, out = junit_run
    schema = xmlschema.XMLSchema(str(SCHEMA))
    errors = [f"{e.path}: {e.reason}" for e in schema.iter_errors(str(out))]
    assert errors == []
    root = ET.parse(out).getroot()
    assert len(root.findall("testsuite")) == len(SUITES)
    kinds = {child.tag for tc in root.iter("testcase") for child in tc}
    assert kinds == {"failure", "error", "skipped", "system-out"}
    names = [p.get("name") for p in root.iter("property")]
    assert len(names) == len(set(names)) > len(SUITES)  # no two suites share a property name
    # the schema is not lenient: what the export wrote before issue 20 is refused
    bad = ET.parse(out).getroot()
    bad.set("skipped", "3")
    ET.SubElement(next(bad.iter("testcase")), "properties")
    reasons = " ".join(str(e.reason) for e in schema.iter_errors(ET.tostring(bad, encoding="unicode")))
    assert "'skipped' attribute not allowed" in reasons and "Unexpected child with tag 'properties'" in reasons


def test_junit_is_read_by_xunitparser(junit_run):
    import xunitparser

    run, _, out = junit_run
    with out.open() as f:
        suite, result = xunitparser.parse(f)  # it checks the document's totals against its cases itself
    cases = list(suite)
    assert len(cases) == len(list((run / "cases").iterdir()))
    assert {c.classname for c in cases} == SUITES
    assert (len(result.failures), len(result.errors), len(result.skipped)) == tuple(OUTCOMES.values())
    facts = {_facts(c.stdout)["case_id"]: c for c in cases}
    assert facts["reference__oracle-perfect__oracle__tool__save_file"].success
    assert facts["reference__oracle-lazy__oracle__tool__shell_file"].typename == "NO_TOOL_CALL"
    assert facts["reference__oracle-lazy__oracle__tool__save_file"].typename == "UNREADABLE"
    assert facts["reference__oracle-tools-unsupported__oracle__tool__save_file"].skipped
    # every suite's properties, kept apart by their names
    assert {suite.properties[f"{name}.run_id"] for name in SUITES} == {run.name}


def test_junit_is_rendered_by_junit2html(junit_run, tmp_path):
    run, _, out = junit_run
    html = tmp_path / "junit.html"
    tool = Path(sys.executable).with_name("junit2html")
    res = subprocess.run([str(tool), str(out), str(html)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    page = html.read_text()
    for name in SUITES:
        assert name in page, name
    for case in (run / "cases").iterdir():
        assert f"case_id: {case.name}" in page, case.name  # each case's facts, shown with it


def test_junit_suite_and_property_names_stay_unique_and_valid(run_dir, tmp_path):
    import xmlschema
    import xunitparser

    run = _copy(run_dir, tmp_path)
    for case in (run / "cases").iterdir():  # two models whose suite names read alike
        data = json.loads((case / "case.json").read_text())
        model = {"oracle-perfect": "m.x", "oracle-lazy": "m_x"}.get(data["key"]["model"])
        if model:
            data["key"].update(model=model)
            (case / "case.json").write_text(json.dumps(data))
    # an unreadable case is labelled from its folder's name: here with an ESC in its agent part
    bad = run / "cases" / "reference__oracle-tools-unsupported__oracle__tool__save_file"
    (bad / "case.json").write_text("{not json")
    bad.rename(bad.with_name("ref\x1bagent__oracle-tools-unsupported__oracle__tool__save_file"))
    res = gripprobe("export", str(run), "--format", "junit")
    assert res.returncode == 0, res.stderr
    out = run / "reports" / "junit.xml"
    assert [str(e.reason) for e in xmlschema.XMLSchema(str(SCHEMA)).iter_errors(str(out))] == []
    names = [s.get("name") for s in ET.parse(out).getroot().iter("testsuite")]
    assert "gripprobe.reference.m_x.tool" in names and "gripprobe.reference.m_x.tool~2" in names, names
    assert "gripprobe.ref\\x1bagent.oracle-tools-unsupported.tool" in names, names
    props = [p.get("name") for p in ET.parse(out).getroot().iter("property")]
    assert len(props) == len(set(props))
    assert "gripprobe.ref\\x1bagent.oracle-tools-unsupported.tool.agent" in props
    with out.open() as f:
        suite, _ = xunitparser.parse(f)
    assert len(list(suite)) == len(list((run / "cases").iterdir()))


def test_junit_out_file_and_bad_input(run_dir, tmp_path):
    out = tmp_path / "ci" / "gripprobe.xml"
    res = gripprobe("export", str(run_dir), "--format", "junit", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_text().startswith("<?xml")
    res = gripprobe("export", str(tmp_path / "nothing"), "--format", "junit")
    assert res.returncode == 2 and res.stderr.startswith("error: ") and len(res.stderr.splitlines()) == 1
    res = gripprobe("export", str(run_dir), "--format", "yaml")
    assert res.returncode == 2
    res = gripprobe("export", str(run_dir), "--format", "junit", "--otlp-endpoint", "http://127.0.0.1:1/v1/traces")
    assert res.returncode == 2 and "otlp only" in res.stderr


def test_junit_refuses_a_symlinked_reports_folder(run_dir, tmp_path):
    run = _copy(run_dir, tmp_path)
    shutil.rmtree(run / "reports")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "reports").symlink_to(elsewhere)
    res = gripprobe("export", str(run), "--format", "junit")
    assert res.returncode == 2 and res.stderr.startswith("error: cannot write"), res.stderr
    assert not list(elsewhere.iterdir())


# ------------------------------------------------------------------------------------------------- OTLP


class Receiver:
    """A real OTLP/HTTP receiver on 127.0.0.1 (aiohttp in its own thread): POST /v1/traces, protobuf; and, as
    Phoenix has on the same port, a web page at GET / (so aiohttp itself answers a POST there with 405)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _serve(self) -> None:
        from aiohttp import web

        async def traces(request: web.Request) -> web.Response:
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            self.requests.append((dict(request.headers), await request.read()))
            if self.status != 200:
                return web.Response(status=self.status, text="no")
            return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                                content_type="application/x-protobuf")

        async def page(request: web.Request) -> web.Response:
            return web.Response(text="<html>a trace viewer</html>", content_type="text/html")

        async def start() -> None:
            app = web.Application()
            app.router.add_post("/v1/traces", traces)
            app.router.add_get("/", page)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]
            self.ready.set()

        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(start())
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def spans(self) -> list[dict]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for headers, body in self.requests:
            assert headers["Content-Type"] == "application/x-protobuf"
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            for rs in req.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        attrs = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in s.attributes}
                        out.append({"name": s.name, "id": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                                    "trace": s.trace_id.hex(), "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano, "kind": s.kind, "attrs": attrs,
                                    "status": s.status.code, "resource": resource})
        return out

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_otlp_spans_arrive_with_every_tier_a_tool_call_under_its_chat_span(run_dir, receiver):
    res = gripprobe("export", str(run_dir), "--format", "otlp", "--otlp-endpoint", receiver.url,
                    "--otlp-header", "Authorization=Bearer t0ken-for-test")
    assert res.returncode == 0, res.stderr
    assert "t0ken-for-test" not in res.stdout + res.stderr
    assert all(h.get("Authorization") == "Bearer t0ken-for-test" for h, _ in receiver.requests)
    spans = receiver.spans()
    by_id = {s["id"]: s for s in spans}
    agents = {s["attrs"]["gripprobe.case_id"]: s for s in spans if s["attrs"]["gen_ai.operation.name"] == "invoke_agent"}
    cases = sorted((run_dir / "cases").iterdir())
    assert set(agents) == {c.name for c in cases}
    assert f"{len(spans)} span(s) of {len(cases)} case(s)" in res.stdout
    assert all(s["resource"]["service.name"] == "gripprobe" for s in spans)

    tier_a_calls = 0
    for case in cases:
        result = json.loads((case / "case.json").read_text())
        agent = agents[case.name]
        assert agent["parent"] == "" and agent["name"] == f"invoke_agent {result['key']['agent']}"
        assert agent["attrs"]["gripprobe.status"] == result["verdict"]["status"]
        assert agent["attrs"]["gen_ai.agent.name"] == result["key"]["agent"]
        assert agent["attrs"]["gripprobe.phase"] == "measured"
        mine = [s for s in spans if s["trace"] == agent["trace"]]
        chats = {s["attrs"]["gripprobe.event_id"]: s for s in mine if s["attrs"]["gen_ai.operation.name"] == "chat"}
        tools = {s["attrs"].get("gen_ai.tool.call.id"): s for s in mine
                 if s["attrs"]["gen_ai.operation.name"] == "execute_tool"}
        events = _events(case)
        for e in events:
            if e["event_type"] == "model_response":
                chat = chats[e["event_id"]]
                assert chat["parent"] == agent["id"] and chat["kind"] == 3  # CLIENT
                usage = e["payload"].get("usage") or {}
                if "prompt_tokens" in usage:
                    assert chat["attrs"]["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
                    assert chat["attrs"]["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
                if e.get("response_id"):
                    assert chat["attrs"]["gen_ai.response.id"] == e["response_id"]
                assert chat["attrs"]["gripprobe.source_tier"] == e["source_tier"]
                assert chat["start"] <= chat["end"]
            if e["event_type"] == "tool_call_start" and e["source_tier"] == "A":
                tier_a_calls += 1
                tool = tools[e["tool_call_id"]]
                assert tool["name"] == f"execute_tool {e['payload']['raw_name']}"
                assert tool["attrs"]["gen_ai.tool.name"] == e["payload"]["raw_name"]
                assert tool["attrs"]["gripprobe.source_tier"] == "A"
                parent = by_id[tool["parent"]]
                assert parent["attrs"]["gripprobe.event_id"] == e["parent_id"]  # under the chat that asked
                assert parent["attrs"]["gen_ai.operation.name"] == "chat"
                assert tool["start"] >= parent["end"] - 1_000_000 and tool["end"] >= tool["start"]
        if result["verdict"]["status"] == "PASS":
            assert any("gen_ai.usage.input_tokens" in c["attrs"] for c in chats.values())
    assert tier_a_calls >= 8  # the run really had tier-A calls (perfect, recover × 2 tests, codex)


def test_otlp_content_is_opt_in(run_dir, receiver):
    res = gripprobe("export", str(run_dir), "--format", "otlp", "--otlp-endpoint", receiver.url, "--include-content")
    assert res.returncode == 0, res.stderr
    spans = receiver.spans()
    tools = [s for s in spans if s["attrs"]["gen_ai.operation.name"] == "execute_tool"]
    assert tools and all("gen_ai.tool.call.arguments" in s["attrs"] for s in tools)
    assert any("gen_ai.tool.call.result" in s["attrs"] for s in tools)
    receiver.requests.clear()
    assert gripprobe("export", str(run_dir), "--format", "otlp", "--otlp-endpoint", receiver.url).returncode == 0
    assert not any("gen_ai.tool.call.arguments" in s["attrs"] or "gen_ai.input.messages" in s["attrs"]
                   for s in receiver.spans())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_otlp_refused_endpoint_is_one_line_and_exit_2(run_dir):
    url = f"http://127.0.0.1:{_free_port()}/v1/traces"
    res = gripprobe("export", str(run_dir), "--format", "otlp", "--otlp-endpoint", url, "--otlp-timeout", "1")
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"error: OTLP export to {url} failed: connection refused (is an OTLP/HTTP "
                                       f"collector listening there?); 0 span(s) were delivered before it"]


def test_otlp_unauthorized_names_the_header_option(run_dir):
    r = Receiver(status=401)
    try:
        res = gripprobe("export", str(run_dir), "--format", "otlp", "--otlp-endpoint", r.url, "--otlp-timeout", "2")
    finally:
        r.close()
    assert res.returncode == 2 and "HTTP 401" in res.stderr and "--otlp-header" in res.stderr, res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_otlp_wrong_path_names_the_usual_one(run_dir, receiver):
    base = receiver.url.removesuffix("/v1/traces")
    for path, code in (("/", "405"), ("/v1/trace", "404")):  # the UI's page; a typo
        url = base + path
        res = gripprobe("export", str(run_dir), "--format", "otlp", "--otlp-endpoint", url, "--otlp-timeout", "5")
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        (line,) = res.stderr.splitlines()
        assert line.startswith(f"error: OTLP export to {url} failed: HTTP {code}: the server refused the path "
                               f"{path} "), line
        assert "/v1/traces" in line and "http://HOST:6006/v1/traces" in line, line  # the usual path, Phoenix's
        assert f"here probably --otlp-endpoint {receiver.url};" in line, line
    assert receiver.requests == []  # nothing reached the real receiver


def test_otlp_without_the_sdk_says_which_extra(run_dir, tmp_path):
    shim = tmp_path / "shim" / "opentelemetry"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('simulated: not installed', name='opentelemetry')\n")
    res = gripprobe("export", str(run_dir), "--format", "otlp", pythonpath=[shim.parent])
    assert res.returncode == 2
    assert "pip install 'gripprobe-core[otlp]'" in res.stderr and len(res.stderr.splitlines()) == 1


def test_otlp_bad_options(run_dir):
    for args, words in ((["--otlp-endpoint", "ftp://x"], "not an http(s) URL"),
                        (["--otlp-header", "no-equals"], "KEY=VALUE"),
                        (["--otlp-header", "bad name=x"], "KEY=VALUE"),
                        (["--out", "x.xml"], "does not apply")):
        res = gripprobe("export", str(run_dir), "--format", "otlp", *args)
        assert res.returncode == 2 and words in res.stderr, (args, res.stderr)


# ------------------------------------------------------------------------------------------------- ATIF
# (the spec's models: tests/atif_schema.py)
def test_atif_trajectories_validate_against_the_spec(run_dir, tmp_path):
    run = _copy(run_dir, tmp_path)
    res = gripprobe("export", str(run), "--format", "atif")
    assert res.returncode == 0, res.stderr
    folder = run / "exports" / "atif"
    assert f"-> {folder}" in res.stdout
    cases = sorted((run / "cases").iterdir())
    files = sorted(folder.iterdir())
    assert [f.name for f in files] == [f"{c.name}.json" for c in cases]
    for case in cases:
        traj = AtifTrajectory.model_validate_json((folder / f"{case.name}.json").read_text())
        result = json.loads((case / "case.json").read_text())
        assert traj.schema_version == "ATIF-v1.4" and traj.session_id == f"{run.name}/{case.name}"
        assert traj.agent.name == result["key"]["agent"] and traj.agent.model_name == result["key"]["model"]
        assert traj.steps[0].source == "user" and traj.steps[0].message == (case / "prompt.txt").read_text()
        events = _events(case)
        starts = [e for e in events if e["event_type"] == "tool_call_start" and e["source_tier"] != "D"]
        results = {e["tool_call_id"]: e for e in events if e["event_type"] == "tool_call_result"}
        calls = {c.tool_call_id: (s, c) for s in traj.steps for c in s.tool_calls or []}
        assert len(calls) == len(starts)
        for e in starts:
            step, call = calls[e["tool_call_id"]]
            assert step.extra["event_id"] == e["parent_id"] and call.function_name == e["payload"]["raw_name"]
            if e["tool_call_id"] in results:
                obs = {r.source_call_id: r.content for r in step.observation.results}
                assert obs[e["tool_call_id"]] == results[e["tool_call_id"]]["payload"]["output"]
        responses = [e for e in events if e["event_type"] == "model_response"]
        assert len(traj.steps) == 1 + len(responses)
        prompt_tokens = sum((e["payload"].get("usage") or {}).get("prompt_tokens", 0) for e in responses)
        if prompt_tokens:
            assert traj.final_metrics.total_prompt_tokens == prompt_tokens
        assert traj.final_metrics.total_steps == len(traj.steps)
        assert traj.extra["gripprobe"]["status"] == result["verdict"]["status"]
    # artifacts are evidence: nothing was added there, and a recompute still finds every digest intact (but in
    # codex's case, which the fixture moved in from another run: its signatures name that run)
    res = gripprobe("rebuild-reports", str(run), "--recompute", "--dry-run")
    changed = [line for line in res.stdout.splitlines() if "; changed:" in line]
    assert res.returncode == 0 and "1 changed" in res.stdout, res.stdout + res.stderr
    assert len(changed) == 1 and changed[0].startswith("codex__") and "signs case" in changed[0], changed
    # the exports the harness wrote into the run are sealed with it: verify names only that moved case
    verified = gripprobe("verify", str(run))
    assert verified.returncode == 1 and "CHANGED" in verified.stdout and "run:" not in verified.stdout, \
        verified.stdout
    assert {line.split(":")[0].strip() for line in verified.stdout.splitlines()[1:] if line.startswith("  case")} \
        == {f"case {changed[0].split(':')[0]}"}


def test_atif_freeform_and_malformed_arguments_are_objects(run_dir, tmp_path):
    run = _copy(run_dir, tmp_path)
    case = run / "cases" / "reference__oracle-perfect__oracle__tool__shell_file"
    events = _events(case)
    start = next(e for e in events if e["event_type"] == "tool_call_start")
    start["payload"].update(arguments="*** Begin Patch\n", call_kind="custom")
    extra = dict(start, event_id="measured-A-99", tool_call_id="call_x", sequence=99)
    extra["payload"] = dict(start["payload"], arguments="{not json", call_kind="function")
    lines = [json.dumps(e) for e in events] + [json.dumps(extra), "garbage", "[1, 2]", json.dumps({"event_type": 5})]
    (case / "artifacts" / "events.measured.jsonl").write_text("\n".join(lines) + "\n")
    res = gripprobe("export", str(run), "--format", "atif", "--out", str(tmp_path / "atif"))
    assert res.returncode == 0, res.stderr
    assert f"{case.name}: events.measured.jsonl is partial (3 unreadable line(s))" in res.stderr
    traj = AtifTrajectory.model_validate_json((tmp_path / "atif" / f"{case.name}.json").read_text())
    args = {c.tool_call_id: c.arguments for s in traj.steps for c in s.tool_calls or []}
    assert args[start["tool_call_id"]] == {"input": "*** Begin Patch\n"}
    assert args["call_x"] == {"raw_arguments": "{not json"}


def test_every_format_survives_a_corrupt_case(run_dir, tmp_path, receiver):
    run = _copy(run_dir, tmp_path)
    cases = sorted((run / "cases").iterdir())
    (cases[0] / "case.json").write_bytes(b"\x00\xff garbage")
    (cases[1] / "case.json").unlink()
    (cases[1] / "case.json").symlink_to("/etc/passwd")
    (cases[2] / "artifacts" / "events.measured.jsonl").write_bytes(b"\xff\xfe\n{\"event_type\": \"model_response\","
                                                                   b" \"payload\": [], \"sequence\": \"x\"}\n" * 3)
    for fmt, extra in (("junit", []), ("atif", []), ("otlp", ["--otlp-endpoint", receiver.url])):
        res = gripprobe("export", str(run), "--format", fmt, *extra)
        assert res.returncode == 0, (fmt, res.stderr)
        assert cases[0].name in res.stderr and cases[1].name in res.stderr, (fmt, res.stderr)
        assert "Traceback" not in res.stderr
    assert not (run / "exports" / "atif" / f"{cases[0].name}.json").exists()
    assert (run / "exports" / "atif" / f"{cases[2].name}.json").exists()
