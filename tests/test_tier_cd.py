"""Tier C (text markers in stdout/stderr) and tier D (claims in the final answer), and the default plugin
that runs both through the ``tier_c_patterns`` and ``final_output_text`` hooks."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gripprobe_core import AgentCommand, BaseAgentDriver, MarkerPattern, Transcript
from gripprobe_core.phase import PhaseContext, PhaseCapture
from gripprobe_core.errors import WrapperParseError
from gripprobe_core.models.results import ProcessResult
from gripprobe_core.models.specs import BackendSpec, CliAgentSpec, ModelSpec, TestSpec
from gripprobe_core.pluginmanager import DEFAULT_PLUGINS, make_plugin_manager
from gripprobe_core.telemetry import merge_events, summarize_phase
from gripprobe_core.telemetry.tier_c import parse_markers, strip_ansi
from gripprobe_core.telemetry.tier_d import find_claims, parse_claims

AIDER_STDOUT = (
    "Aider v0.86.2\n"
    "\x1b[32mApplied edit to hello.txt\x1b[0m\n"
    "Running: pytest -q\n"
    "exit status 3 for `pytest -q`\n"
    "The LLM did not conform to the edit format.\n"
    "Applied edit to src/app.py\n"
)
PATTERNS = [
    MarkerPattern(name="applied-edit", regex=r"^Applied edit to (?P<path>\S+)$", tool="aider-edit", kind="write"),
    MarkerPattern(name="run-start", regex=r"^Running: (?P<args>.+)$", event_type="tool_call_start", tool="shell",
                  status="started", stream="stdout"),
    MarkerPattern(name="run-exit", regex=r"^exit status (?P<code>\d+) for `(?P<args>[^`]+)`", tool="shell"),
    MarkerPattern(name="bad-edit", regex=r"did not conform to the edit format", tool="aider-edit", kind="write",
                  status="error"),
    MarkerPattern(name="stderr-only", regex=r"Applied", stream="stderr"),
    MarkerPattern(name="broken", regex=r"(unclosed"),
]


def write_outputs(tmp: Path, stdout: bytes | str, stderr: bytes | str = b"") -> tuple[Path, Path]:
    out, err = tmp / "measured.stdout", tmp / "measured.stderr"
    out.write_bytes(stdout.encode() if isinstance(stdout, str) else stdout)
    err.write_bytes(stderr.encode() if isinstance(stderr, str) else stderr)
    return out, err


# ------------------------------------------------------------------------------------------ tier C

def test_markers_become_tier_c_events(tmp_path):
    out, err = write_outputs(tmp_path, AIDER_STDOUT, "warning: Applied nothing\n")
    events = parse_markers(PATTERNS, out, err, "measured")
    got = [(e.event_type, e.payload["marker"], e.payload["name"], e.payload["kind"], e.status, e.exit_code,
            e.payload["arguments"], e.raw_artifact_ref) for e in events]
    assert got == [
        ("tool_call_result", "applied-edit", "aider_edit", "write", "success", None, {"path": "hello.txt"},
         "measured.stdout:2"),
        ("tool_call_start", "run-start", "shell", "execute", "started", None, "pytest -q", "measured.stdout:3"),
        ("tool_call_result", "run-exit", "shell", "execute", "error", 3, "pytest -q", "measured.stdout:4"),
        ("tool_call_result", "bad-edit", "aider_edit", "write", "error", None, None, "measured.stdout:5"),
        ("tool_call_result", "applied-edit", "aider_edit", "write", "success", None, {"path": "src/app.py"},
         "measured.stdout:6"),
        ("tool_call_result", "stderr-only", "stderr_only", "other", "success", None, None, "measured.stderr:1"),
    ]
    assert all(e.source_tier == "C" and e.source == "wrapper" for e in events)
    assert [e.event_id for e in events] == [f"measured-C-{n}" for n in range(1, 7)]
    summary = summarize_phase(merge_events([events]), observability="markers", capture_missing=False,
                              parse_error=False)
    assert summary.tool_event_verdict == "confirmed_tool_use" and summary.telemetry_source_tier == "C"
    assert summary.telemetry_invoked_confidence == 0.7


def test_tool_group_names_the_tool_and_ids_are_kept(tmp_path):
    out, err = write_outputs(tmp_path, "[tool] bash id=t1 done rc=0\n[tool] WebFetch id=t2 done rc=1\n")
    pattern = MarkerPattern(name="generic", regex=r"\[tool\] (?P<tool>\w+) id=(?P<id>\w+) done rc=(?P<code>-?\d+)")
    events = parse_markers([pattern], out, err, "warmup")
    assert [(e.tool_call_id, e.payload["raw_name"], e.payload["name"], e.payload["kind"], e.status) for e in events] \
        == [("t1", "bash", "shell", "execute", "success"), ("t2", "WebFetch", "fetch", "fetch", "error")]


def test_missing_files_no_patterns_and_unreadable_files(tmp_path):
    assert parse_markers(PATTERNS, tmp_path / "nope.stdout", None, "measured") == []
    out, err = write_outputs(tmp_path, AIDER_STDOUT)
    assert parse_markers([], out, err, "measured") == []
    assert parse_markers([MarkerPattern(name="x", regex="[")], out, err, "measured") == []
    with pytest.raises(WrapperParseError):
        parse_markers(PATTERNS, tmp_path, None, "measured")  # a directory: exists, cannot be read


def test_ansi_codes_are_stripped():
    assert strip_ansi("\x1b[1;32mApplied\x1b[0m \x1b]0;title\x07edit") == "Applied edit"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.binary(max_size=200))
def test_markers_never_raise_on_garbage(stdout, stderr):
    with tempfile.TemporaryDirectory() as tmp:
        out, err = write_outputs(Path(tmp), stdout + b"\nApplied edit to x.py\n", stderr)
        events = parse_markers(PATTERNS, out, err, "measured")
    assert any(e.payload.get("path") == "x.py" for e in events)


# ------------------------------------------------------------------------------------------ tier D

CLAIMS = [
    ("I created hello.txt containing hello world.", [("write", {"path": "hello.txt"})]),
    ("I wrote 'hello world' to `hello.txt`.", [("write", {"path": "hello.txt"})]),
    ("I've updated the file config.yaml and ran `pytest -q`.",
     [("edit", {"path": "config.yaml"}), ("shell", {"command": "pytest -q"})]),
    ("I fetched https://127.0.0.1:8080/nonce.txt and saved it to answer.txt.",
     [("fetch", {"url": "https://127.0.0.1:8080/nonce.txt"}), ("write", {"path": "answer.txt"})]),
    ("The file `notes.md` has been created.", [("write", {"path": "notes.md"})]),
    ("Summary:\n- Created `src/app.py`\n- Updated README.md\n",
     [("write", {"path": "src/app.py"}), ("edit", {"path": "README.md"})]),
    ("I read the file notes.md first.", [("read", {"path": "notes.md"})]),
    ("Ich habe die Datei hallo.txt erstellt und `ls` ausgeführt.",
     [("write", {"path": "hallo.txt"}), ("shell", {"command": "ls"})]),
    ("Ich habe https://example.org/a.json abgerufen.", [("fetch", {"url": "https://example.org/a.json"})]),
    ("Я создал файл привет.txt и выполнил команду `cat привет.txt`.",
     [("write", {"path": "привет.txt"}), ("shell", {"command": "cat привет.txt"})]),
    ("Файл data.csv успешно создан.", [("write", {"path": "data.csv"})]),
    ("I created hello.txt. Then I created hello.txt again.", [("write", {"path": "hello.txt"})]),
]
NOT_CLAIMS = [
    "I could not create hello.txt because the tool failed.",
    "I have not created hello.txt yet.",
    "hello.txt was not created.",
    "I ran into a problem with the tool call.",
    "Should I create hello.txt for you?",
    "Please create hello.txt yourself.",
    "Sorry, my tool call was malformed.",
    "I created a plan.",
    "I fetched the data.",
    "",
]


@pytest.mark.parametrize("text,want", CLAIMS)
def test_claims_are_found(text, want):
    assert [(c.name, c.arguments) for c in find_claims(text)] == want


@pytest.mark.parametrize("text", NOT_CLAIMS)
def test_non_claims_are_ignored(text):
    assert find_claims(text) == []


def test_claims_become_tier_d_events_that_never_confirm(tmp_path):
    events = parse_claims("Done!\nI created hello.txt and ran `cat hello.txt`.", "measured", "measured.final.txt")
    assert [(e.event_type, e.source_tier, e.source, e.status, e.payload["name"], e.payload["kind"], e.raw_artifact_ref)
            for e in events] == [
        ("tool_call_start", "D", "wrapper", "unknown", "write", "write", "measured.final.txt:2"),
        ("tool_call_start", "D", "wrapper", "unknown", "shell", "execute", "measured.final.txt:2")]
    summary = summarize_phase(merge_events([events]), observability="structured", capture_missing=False,
                              parse_error=False, proxy_status="collected")
    assert summary.tool_event_verdict == "tool_event_inconclusive"
    assert summary.tool_event_verdict_reason == "source_parse_inconclusive"
    assert summary.telemetry_source_tier == "D" and summary.telemetry_invoked_confidence == 0.3
    assert summary.tool_kinds_observed == [] and not summary.telemetry_retry_loop_detected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400) | st.lists(st.sampled_from([
    "I ", "created ", "ran ", "`", "ls", "hello.txt", " ", "\n", "https://x.y/z", "Ich habe ", "erstellt",
    "Я ", "создал ", "файл ", "has been ", "was ", "- Created ", ".", "'", '"', "the file ",
]), max_size=40).map("".join))
def test_claims_never_raise(text):
    for event in parse_claims(text, "measured", "measured.final.txt"):
        assert event.source_tier == "D" and event.status == "unknown"


# ------------------------------------------------------------------- the default plugin, via the hooks

class MarkerDriver(BaseAgentDriver):
    """A third-party agent that only has text markers and a final answer."""

    name = "marker-agent"
    observability = "markers"

    def command(self, ctx):
        return AgentCommand(["true"])

    def markers(self, agent):
        return PATTERNS[:2]

    def parse(self, ctx, capture):
        return Transcript([], capture.stdout_path.read_text().splitlines()[-1])


def phase(tmp_path: Path, agent: CliAgentSpec) -> PhaseContext:
    backend = BackendSpec(id="oracle", kind="oracle", model_id="perfect")
    test = TestSpec.model_validate({"id": "t", "title": "t", "prompt": "p", "validators": [{"kind": "x"}],
                                    "reference": [{"shell": "true"}]})
    return PhaseContext(run_id="r", case_id="c", phase="measured", agent=agent, model=ModelSpec(id="m", backends=[backend]),
                        backend=backend, test=test, format="tool", prompt="p", workspace=tmp_path, home=tmp_path,
                        tmpdir=tmp_path, artifacts_dir=tmp_path, base_url="http://127.0.0.1:1", model_name="perfect")


def test_default_plugin_runs_tier_c_and_tier_d_through_the_hooks(tmp_path):
    assert DEFAULT_PLUGINS["telemetry"] == "gripprobe_core.defaults.telemetry"
    gpm = make_plugin_manager(load_entry_points=False)
    driver = MarkerDriver()
    agent = CliAgentSpec(id="marker-agent", plugin="marker-agent", executable="true", tool_kinds=["write"])
    out, err = write_outputs(tmp_path, AIDER_STDOUT + "I created hello.txt and src/app.py was updated.\n")
    ctx = phase(tmp_path, agent)
    capture = PhaseCapture(stdout_path=out, stderr_path=err, process=ProcessResult(status="ok"))
    # the driver's markers and its transcript's final text are the hook's inputs: nothing on the side
    groups = gpm.hook.parse_wrapper_events(driver, ctx, capture, driver.parse(ctx, capture))
    assert sorted(sorted({e.source_tier for e in g}) for g in groups) == [["C"], ["D"]]  # two groups
    merged = merge_events(groups)
    summary = summarize_phase(merged, observability="markers", capture_missing=False, parse_error=False)
    assert summary.tool_event_verdict == "confirmed_tool_use" and summary.telemetry_source_tier == "C"


def test_default_plugin_has_nothing_to_say_without_markers_or_final_text(tmp_path):
    gpm = make_plugin_manager(load_entry_points=False)
    driver = gpm.registry.agents["reference"]  # no markers
    agent = CliAgentSpec(id="other", plugin="reference", executable="true", tool_kinds=["write"])
    out, err = write_outputs(tmp_path, AIDER_STDOUT)
    ctx = phase(tmp_path, agent)
    capture = PhaseCapture(stdout_path=out, stderr_path=err, process=ProcessResult(status="ok"))
    assert list(driver.markers(agent)) == []
    for final in (None, "   "):
        assert gpm.hook.parse_wrapper_events(driver, ctx, capture, Transcript([], final)) == []


def test_pathological_final_texts_parse_quickly():
    """Long runs of path characters or claim openers must not make the claim regexes backtrack."""
    import time

    texts = ["I wrote " * 30000, "aaaa/" * 50000, "a." * 100000, "ab.cd/" * 40000, "I created " + "x" * 250000,
             "and " * 60000, "I ran `" * 30000, "".join(f"I created a{i}.txt. " for i in range(10000))]
    started = time.monotonic()
    for text in texts:
        assert len(find_claims(text)) <= 100
    assert time.monotonic() - started < 10


def test_runner_keeps_final_text_and_tier_d_claims_for_the_reference_agent(tmp_path):
    """The driver's final text → <phase>.final.txt; its claims become tier D events, which never confirm."""
    import json as _json

    from conftest import SPECS
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner import RunSettings, execute_run, plan_cases
    from gripprobe_core.specs import load_specs

    gpm = make_plugin_manager(load_entry_points=False)
    specs = load_specs(SPECS, registry=gpm.registry)
    cases = plan_cases(specs, agents=["reference"], models=["oracle-lazy"], tests=["save_file"])
    r = execute_run(cases, gpm, RunSettings(results_root=tmp_path, proxy_mode="off")).results[0]
    art = tmp_path / "runs" / r.run_id / "cases" / r.case_id / "artifacts"
    final = (art / "measured.final.txt").read_text()
    assert final.startswith("To solve this I would")
    events = [_json.loads(x) for x in (art / "events.measured.jsonl").read_text().splitlines()]
    d = [e for e in events if e["source_tier"] == "D"]
    assert all(e["raw_artifact_ref"].startswith("measured.final.txt:") for e in d)
    assert r.verdict.status in ("NO_TOOL_CALL", "FAIL") and r.verdict.invoked != "yes"
