"""Issue 3's acceptance: the reference agent × every oracle profile through the recording proxy (auto mode).

Each profile's expected status is documented in docs/oracle.md; here it is asserted, and in every case the
tool calls seen at tier A equal the oracle's ground truth.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import SPECS, gripprobe, read_json

pytestmark = pytest.mark.e2e

#: profile -> (status, failure_reason or None to skip the check, trajectory or None)
EXPECTED = {
    "perfect": ("PASS", None, "clean"),
    "lazy": ("NO_TOOL_CALL", "no_tool_call_observed", None),
    "text-tools": ("NO_TOOL_CALL", "protocol_malformed", None),
    "malformed-args": ("FAIL", "protocol_malformed", "violated"),
    "error-then-recover": ("PASS", None, "recovered"),
    "retry-loop": ("FAIL", "tool_retry_loop", "violated"),
    "http-500": ("SHELL_ERROR", "nonzero_exit", None),
    "tools-unsupported": ("TOOL_UNSUPPORTED", "backend_tool_unsupported", None),
    "stall": ("TIMEOUT", "timeout", None),
    "slow-stream": ("PASS", None, "clean"),
    "flaky": ("PASS", None, "clean"),  # trial 1: perfect (tests/test_trials_usage.py runs its later trials)
}


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def profiles_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("profiles")
    res = gripprobe("run", "--suite", "oracle-profiles", "--results", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def _cases(run_dir: Path) -> list[dict]:
    return [read_json(p) for p in sorted((run_dir / "cases").glob("*/case.json"))]


def test_every_profile_gives_its_documented_status(profiles_run):
    cases = _cases(profiles_run)
    assert {c["key"]["model"].removeprefix("oracle-") for c in cases} == set(EXPECTED)
    wrong = []
    for c in cases:
        profile = c["key"]["model"].removeprefix("oracle-")
        status, reason, trajectory = EXPECTED[profile]
        v = c["verdict"]
        got = (v["status"], v["failure_reason"] if reason else None, v["trajectory"] if trajectory else None)
        if got != (status, reason, trajectory):
            wrong.append((c["case_id"], got, (status, reason, trajectory), v["evaluator_reason_text"]))
    assert not wrong, "\n".join(map(str, wrong))


def test_tier_a_counts_equal_oracle_ground_truth(profiles_run):
    for c in _cases(profiles_run):
        art = profiles_run / "cases" / c["case_id"] / "artifacts"
        for phase in ("warmup", "measured"):
            truth = _jsonl(art / f"oracle.{phase}.jsonl")
            records = _jsonl(art / f"proxy.{phase}.http.jsonl")
            assert records, (c["case_id"], phase, "proxy recorded nothing")
            seen = sum(r["x_gripprobe_tool_call_count"] for r in records)
            seen_text = sum(r["x_gripprobe_tool_call_nonstructured_count"] for r in records)
            assert seen == sum(1 for t in truth if t["structured"]), (c["case_id"], phase)
            assert seen_text == sum(1 for t in truth if not t["structured"]), (c["case_id"], phase)
            ids = [i for r in records for i in r["x_gripprobe_tool_call_ids"]]
            assert ids == [t["tool_call_id"] for t in truth if t["structured"]], (c["case_id"], phase)


def test_proxy_collected_and_tier_a_confirms_perfect(profiles_run):
    for c in _cases(profiles_run):
        assert c["telemetry"]["telemetry_proxy_status"] in ("collected", "error"), c["case_id"]
        if c["key"]["model"] == "oracle-perfect":
            assert c["telemetry"]["telemetry_proxy_status"] == "collected"
            assert c["telemetry"]["telemetry_source_tier"] == "A"
            assert c["verdict"]["protocol_match"] == 1.0
            # tier B saw the same calls: merged into the tier A events by call id, none left over
            events = _jsonl(profiles_run / "cases" / c["case_id"] / "artifacts" / "events.measured.jsonl")
            starts = [e for e in events if e["event_type"] == "tool_call_start"]
            assert starts and len({e["tool_call_id"] for e in starts}) == len(starts)
        if c["key"]["model"] == "oracle-text-tools":
            assert c["verdict"]["protocol_match"] == 0.0
            assert c["telemetry"]["telemetry_proxy_tool_call_nonstructured_count"] >= 1
        if c["key"]["model"] == "oracle-retry-loop":
            assert c["telemetry"]["telemetry_retry_loop_detected"] is True


def test_off_mode_records_skipped_disabled(tmp_path):
    res = gripprobe("run", "-m", "oracle-perfect", "-t", "shell_pwd", "--telemetry-proxy", "off",
                    "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    case = _cases(Path(res.stdout.strip().splitlines()[-1]))[0]
    assert case["telemetry"]["telemetry_proxy_status"] == "skipped"
    assert case["telemetry"]["telemetry_proxy_skip_reason"] == "disabled"
    assert case["verdict"]["status"] == "PASS" and case["verdict"]["protocol_match"] is None


CANARY = "sk-canary-0123456789abcdef0123456789abcdef"


def test_api_key_canary_never_reaches_results(tmp_path):
    """The key is handed to the agent (it sends it to the proxy), yet no file under results/ holds it."""
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    (root / "models" / "oracle-keyed.yaml").write_text(
        "id: oracle-keyed\nbackends:\n  - {id: oracle, kind: oracle, model_id: perfect, api_key_env: OPENAI_API_KEY}\n")
    res = gripprobe("run", "--specs", str(root), "-m", "oracle-keyed", "-t", "shell_pwd", "-t", "save_file",
                    "--telemetry-proxy", "force", "--results", str(tmp_path / "results"),
                    env={"OPENAI_API_KEY": CANARY})
    assert res.returncode == 0, res.stderr[-2000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    cases = _cases(run_dir)
    assert all(c["verdict"]["status"] == "PASS" for c in cases)
    records = [r for c in cases for r in _jsonl(run_dir / "cases" / c["case_id"] / "artifacts" /
                                                 "proxy.measured.http.jsonl")]
    assert records
    files = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    assert files
    leaks = [str(p) for p in files if CANARY.encode() in p.read_bytes() or CANARY[3:20].encode() in p.read_bytes()]
    assert not leaks
