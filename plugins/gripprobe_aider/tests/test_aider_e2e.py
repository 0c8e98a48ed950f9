"""End to end, what is particular to aider: the REAL aider through the real `gripprobe run`, against the
oracle backend speaking the plugin's text dialects (the kit installs aider at its pinned version). What
every driver must do end to end (perfect passes, lazy is NO_TOOL_CALL, the driver reports the oracle's
edits) is the contract's, in test_aider_driver.py. Each real case costs two aider runs (warmup +
measured, ~5 s each on an idle 2-core machine); the four runs below start at once and take about a
minute and a half together:

- perfect × save_file, patch_file in each edit format → PASS on tier C; shell_pwd → TOOL_UNSUPPORTED
  without running (aider has no shell);
- lazy / malformed-args / retry-loop / error-then-recover in ``diff`` → NO_TOOL_CALL / FAIL
  (protocol_malformed) / FAIL (tool_retry_loop) / PASS (recovered);
- a file whose content is a JSON tool-call object, in ``whole`` (the proxy's nonstructured detector
  counts it): the oracle's ground truth and the proxy agree, and the backend's key is in no stored file;
- proxy off: aider's own output alone confirms the edit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gripprobe_core.testing import finish_gripprobe, start_gripprobe
from gripprobe_core.testing import read_jsonl as jsonl
from gripprobe_aider import PINNED_VERSION

pytestmark = pytest.mark.e2e

FORMATS = ("whole", "diff", "udiff")
JSON_CALL = '{"name": "write", "arguments": {"path": "a.txt", "content": "x"}}'
JSON_TEST = f"""id: json_call_file
title: Save a file whose content looks like a tool call
prompt: |
  Create call.json holding exactly this line:
  {JSON_CALL}
requires: [write]
validators:
  - kind: file_equals
    path: call.json
    expected: '{JSON_CALL}'
reference:
  - write:
      path: call.json
      content: |
        {JSON_CALL}
"""


@pytest.fixture(scope="module")
def specs_root(agent_install, e2e_specs, tmp_path_factory) -> Path:
    """The kit's specs (aider, every oracle model and test) plus a test whose file looks like a tool call
    and a keyed copy of oracle-perfect (in a copy: the kit's folder is shared by the session)."""
    root = tmp_path_factory.mktemp("specs") / "specs"
    shutil.copytree(e2e_specs, root)
    (root / "tests" / "json_call_file.yaml").write_text(JSON_TEST)
    model = (root / "models" / "oracle-perfect.yaml").read_text()
    (root / "models" / "oracle-keyed.yaml").write_text(
        model.replace("id: oracle-perfect", "id: oracle-keyed").replace(
            "model_id: perfect", "model_id: perfect\n    api_key_env: GRIPPROBE_TEST_AIDER_KEY"))
    return root


def start_run(specs: Path, results: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the real `gripprobe run` of aider in a subprocess (finish it with ``finish_gripprobe``)."""
    return start_gripprobe("run", "--specs", specs, "--results", results, "-a", "aider", "--jobs", "2", *args,
                           env=extra_env)


KEY = "sk-canary-e2e-aider-5150"


@pytest.fixture(scope="module")
def runs(specs_root, tmp_path_factory) -> dict[str, Path]:
    """Four `gripprobe run`s started at once (each case is mostly aider's start-up; running them side
    by side keeps the file near a minute on two cores)."""
    res = lambda: tmp_path_factory.mktemp("results")  # noqa: E731
    procs = {
        "perfect": start_run(specs_root, res(), "-m", "oracle-perfect", "-t", "save_file", "-t", "patch_file",
                             "-t", "shell_pwd"),
        "profiles": start_run(specs_root, res(), "-f", "diff", "-t", "save_file",
                              *(a for m in ("lazy", "malformed-args", "retry-loop", "error-then-recover")
                                for a in ("-m", f"oracle-{m}"))),
        "keyed": start_run(specs_root, res(), "-m", "oracle-keyed", "-t", "json_call_file", "-f", "whole",
                           extra_env={"GRIPPROBE_TEST_AIDER_KEY": KEY}),
        "proxy_off": start_run(specs_root, res(), "-m", "oracle-perfect", "-t", "save_file", "-f", "udiff",
                               "--telemetry-proxy", "off"),
    }
    return {name: finish_gripprobe(proc) for name, proc in procs.items()}


def cases_of(run_dir: Path) -> dict[tuple[str, str, str], tuple[Path, dict]]:
    out = {}
    for p in sorted((run_dir / "cases").glob("*/case.json")):
        case = json.loads(p.read_text())
        key = (case["key"]["model"].removeprefix("oracle-"), case["key"]["format"], case["key"]["test"])
        out[key] = (p.parent, case)
    return out


def status(case: dict) -> tuple[str, str | None]:
    return case["verdict"]["status"], case["verdict"]["failure_reason"]


def assert_truth_matches_proxy(case_dir: Path) -> tuple[int, int]:
    """The oracle's ground truth and the proxy's tier A counts agree; returns (structured, nonstructured)."""
    truth = jsonl(case_dir / "artifacts" / "oracle.measured.jsonl")
    records = jsonl(case_dir / "artifacts" / "proxy.measured.http.jsonl")
    counts = (sum(r["x_gripprobe_tool_call_count"] for r in records),
              sum(r["x_gripprobe_tool_call_nonstructured_count"] for r in records))
    assert counts == (sum(t["structured"] for t in truth), sum(not t["structured"] for t in truth)), (truth, counts)
    return counts


def test_perfect_passes_every_writing_test_in_every_format_and_shell_is_unsupported(runs):
    cases = cases_of(runs["perfect"])
    assert {k: status(c) for k, (_, c) in cases.items()} == {
        **{("perfect", f, t): ("PASS", None) for f in FORMATS for t in ("save_file", "patch_file")},
        **{("perfect", f, "shell_pwd"): ("TOOL_UNSUPPORTED", "agent_tool_unsupported") for f in FORMATS}}
    for (_, fmt, test), (case_dir, case) in cases.items():
        if test == "shell_pwd":
            assert case["phases"] == [] and not (case_dir / "measured.stdout").exists()  # never ran
            continue
        assert case["agent_version"] == PINNED_VERSION
        assert [p["process"]["status"] for p in case["phases"]] == ["ok", "ok"]
        assert case["telemetry"]["telemetry_source_tier"] == "C"
        assert case["verdict"]["tool_event_verdict"] == "confirmed_tool_use"
        target = "greeting.txt" if test == "save_file" else "settings.py"
        events = jsonl(case_dir / "artifacts" / "events.measured.jsonl")
        edits = [e for e in events if e["event_type"] == "tool_call_result" and e["source_tier"] == "C"]
        assert [(e["status"], e["payload"]["arguments"], e["payload"]["edit_format"]) for e in edits] == [
            ("success", {"path": target}, fmt)]
        assert edits[0]["timestamp"] and edits[0]["raw_artifact_ref"].startswith("measured.stdout:")
        assert sorted(p.name for p in (case_dir / "workspace").iterdir()) == [target]  # no .aider* files
        assert (case_dir / "artifacts" / "measured.aider.llm.history.txt").is_file()
        assert (case_dir / "artifacts" / "measured.aider.chat.history.md").is_file()
        # which requests aider makes: one streamed Chat Completions request per phase, nothing else
        records = jsonl(case_dir / "artifacts" / "proxy.measured.http.jsonl")
        assert [(r["x_gripprobe_method"], r["x_gripprobe_path"], r["x_gripprobe_stream"]) for r in records] == [
            ("POST", "/v1/chat/completions", True)]
        assert assert_truth_matches_proxy(case_dir) == (0, 0)


def test_misbehaving_profiles_in_diff(runs):
    cases = cases_of(runs["profiles"])
    assert {k[0]: status(c) for k, (_, c) in cases.items()} == {
        "lazy": ("NO_TOOL_CALL", "no_tool_call_observed"),
        "malformed-args": ("FAIL", "protocol_malformed"),
        "retry-loop": ("FAIL", "tool_retry_loop"),
        "error-then-recover": ("PASS", None)}
    assert cases[("error-then-recover", "diff", "save_file")][1]["verdict"]["trajectory"] == "recovered"
    assert cases[("retry-loop", "diff", "save_file")][1]["telemetry"]["telemetry_retry_loop_detected"] is True
    for case_dir, _ in cases.values():
        assert assert_truth_matches_proxy(case_dir) == (0, 0)


def test_text_the_detector_counts_is_ground_truth_and_the_key_is_stored_nowhere(runs):
    key, run = KEY, runs["keyed"]
    ((case_dir, case),) = cases_of(run).values()
    assert status(case) == ("PASS", None)
    assert assert_truth_matches_proxy(case_dir) == (0, 1)
    assert case["telemetry"]["telemetry_proxy_tool_call_nonstructured_count"] == 1
    assert not [p for p in run.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    records = jsonl(case_dir / "artifacts" / "proxy.measured.http.jsonl")
    assert records and all(json.dumps(r).find(key) < 0 for r in records)


def test_proxy_off_aiders_own_output_confirms_the_edit(runs):
    ((case_dir, case),) = cases_of(runs["proxy_off"]).values()
    assert status(case) == ("PASS", None)
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    assert case["telemetry"]["telemetry_source_tier"] == "C"
    assert not (case_dir / "artifacts" / "proxy.measured.http.jsonl").exists()


AUTO_DENY_TEST = """\
id: save_file_autodeny
title: save_file with every tool call denied (auto-deny)
prompt: |
  Use your file-writing tool (not the shell) to create a file named greeting.txt in your
  current working directory with exactly these two lines:
  Hello, GripProbe!
  This file was saved with the write tool.
requires: [write]
observe:
  interaction: {policy: auto-deny}
validators:
  - {kind: file_absent, path: greeting.txt}
reference:
  - write: {path: greeting.txt, content: "Hello, GripProbe!\\nThis file was saved with the write tool.\\n"}
"""


def test_auto_deny_is_aiders_dry_run_with_every_confirmation_refused(e2e_specs, e2e_run):
    """oracle-perfect on save_file (whole) under auto-deny: aider runs with --dry-run, no --yes-always and 'n'
    on stdin; it answers "Create new file?" no, skips the edit (a native denial in tier C), nothing is
    written, and the case records the policy as applied without a violation."""
    (e2e_specs / "tests" / "save_file_autodeny.yaml").write_text(AUTO_DENY_TEST)
    run = e2e_run("save_file_autodeny", models=("oracle-perfect",), fmt="whole")
    (case_json,) = (run / "cases").glob("*/case.json")
    case = json.loads(case_json.read_text())
    record = case["interaction"]
    assert (record["policy"], record["how"], record["applied"], record["violations"]) == ("auto-deny", "native", True, [])
    assert record["requests"] == record["denied"] == 1
    assert [(v["kind"], v["passed"]) for v in case["validators"]] == [("file_absent", True)]
    stdout = (case_json.parent / "measured.stdout").read_text()
    assert "Skipping edits to greeting.txt" in stdout
    events = jsonl(case_json.parent / "artifacts" / "events.measured.jsonl")
    answer = next(e for e in events if e["event_type"] == "permission_response")
    assert answer["payload"]["rule"] == "native: every confirmation answered no (no --yes-always)"
