"""A backend that dies mid-run is HARNESS_ERROR / backend_unreachable, never SHELL_ERROR: the harness's own
probe after the phase and the recording proxy's records say so, not the agent. Real runs of the `gripprobe`
command with the reference agent against the oracle served as an OpenAI-compatible backend, stopped while
it holds a request; then `rebuild-reports --recompute` re-derives the same verdict from what was stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from backend_helpers import OracleThread, spec_root_with_model
from conftest import ROOT, gripprobe, read_json, strip_signatures
from gripprobe_core.models.results import BackendProbe, PhaseRecord, ProcessResult
from gripprobe_core.runner.judge import backend_was_unreachable
from gripprobe_core.telemetry.summary import summarize_phase

pytestmark = pytest.mark.e2e
SRC = [ROOT / "src"]


def _run_stopped_at(tmp_path: Path, stall: int, proxy: str) -> tuple[Path, dict]:
    """Run shell_pwd against an oracle with the ``stall`` profile, stopped at its ``stall``-th held request
    (1: in the warmup phase; 2: in the measured phase, after warmup timed out)."""
    with OracleThread() as oracle:
        root = spec_root_with_model(tmp_path, kind="openai-compatible", base_url=oracle.base_url + "/v1",
                                    profile="stall")
        oracle.stop_at_stall(stall)
        res = gripprobe("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-m", "remote",
                        "-t", "shell_pwd", "--telemetry-proxy", proxy, "--timeout", "5", pythonpath=SRC, timeout=180)
        assert oracle.stopped.is_set() and oracle.stalls() == stall
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    [case_path] = run_dir.glob("cases/*/case.json")
    return run_dir, read_json(case_path)


def _recompute(run_dir: Path) -> str:
    res = gripprobe("rebuild-reports", str(run_dir), "--recompute", pythonpath=SRC, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


@pytest.mark.parametrize("proxy", ["off", "auto"])
def test_backend_dying_in_the_measured_phase_is_harness_error(tmp_path, proxy):
    run_dir, case = _run_stopped_at(tmp_path, 2, proxy)
    warmup, measured = case["phases"]
    assert warmup["process"]["status"] == "timeout" and warmup["backend_probe"]["reachable"] is True
    assert measured["process"]["status"] == "nonzero_exit"  # what used to make it SHELL_ERROR
    assert measured["backend_probe"]["reachable"] is False and measured["backend_probe"]["problem"] == "connect"
    v = case["verdict"]
    assert (v["status"], v["failure_reason"], v["evaluator_reason_code"]) == \
        ("HARNESS_ERROR", "backend_unreachable", "backend_unreachable")
    assert "backend" in v["evaluator_reason_text"]
    if proxy == "auto":
        assert measured["proxy"]["status"] == "error"

    case_path = next(run_dir.glob("cases/*/case.json"))
    before = case_path.read_bytes()
    out = _recompute(run_dir)
    assert "1 unchanged, 0 changed" in out, out
    assert case_path.read_bytes() == before

    # The stored probe is the fact recompute reads: say it found the backend up, and the agent's exit
    # status decides again (the proxy saw a reset, not a refused connection, so it does not say otherwise).
    strip_signatures(run_dir)  # signed, any edit is artifact_tampered
    data = json.loads(before)
    data["phases"][1]["backend_probe"]["reachable"] = True
    case_path.write_text(json.dumps(data))
    _recompute(run_dir)
    assert read_json(case_path)["verdict"]["status"] == "SHELL_ERROR"


def test_backend_gone_before_the_measured_phase_shows_in_the_proxy_records(tmp_path):
    run_dir, case = _run_stopped_at(tmp_path, 1, "auto")
    assert case["verdict"]["status"] == "HARNESS_ERROR" and case["verdict"]["failure_reason"] == "backend_unreachable"
    case_dir = next(run_dir.glob("cases/*"))
    records = [json.loads(l) for l in (case_dir / "artifacts" / "proxy.measured.http.jsonl").read_text().splitlines()]
    assert records and records[-1]["x_gripprobe_proxy_error"] == "proxy_connect_error"
    # Without the probe's word, the proxy's last attempt to reach the upstream still says it was gone.
    strip_signatures(run_dir)  # signed, any edit is artifact_tampered
    data = read_json(case_dir / "case.json")
    data["phases"][1]["backend_probe"] = None
    (case_dir / "case.json").write_text(json.dumps(data))
    assert "1 unchanged, 0 changed" in _recompute(run_dir)


# ------------------------------------------------------------------------- the derivation rule


def _record(phase: str, *, started: bool, probe: bool | None) -> PhaseRecord:
    p = None if probe is None else BackendProbe(backend_id="b", kind="ollama", url="http://x/api/tags", reachable=probe,
                                                latency_ms=1.0, checked_at="2026-01-01T00:00:00Z")
    return PhaseRecord(phase=phase, process=ProcessResult(status="nonzero_exit", exit_code=1),
                       summary=summarize_phase([], observability="none", capture_missing=False, parse_error=False),
                       proxy={"started": started}, backend_probe=p)


ERRORS = [None, "proxy_connect_error", "upstream_reset", "upstream_timeout", "upstream_malformed",
          "client_disconnect", "proxy_stopped"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ERRORS), max_size=8), st.sampled_from([None, True, False]), st.booleans(),
       st.sampled_from(["warmup", "measured"]))
def test_unreachable_when_the_probe_failed_or_the_last_upstream_attempt_could_not_connect(
        tmp_path_factory, errors, probe, started, phase):
    artifacts = tmp_path_factory.mktemp("a")
    (artifacts / f"proxy.{phase}.http.jsonl").write_text(
        "".join(json.dumps({"x_gripprobe_path": "/v1/chat/completions", "x_gripprobe_proxy_error": e}) + "\n"
                for e in errors) + "{torn")
    upstream = [e for e in errors if e not in ("client_disconnect", "proxy_stopped")]
    from_records = started and bool(upstream) and upstream[-1] == "proxy_connect_error"
    got = backend_was_unreachable(_record(phase, started=started, probe=probe), artifacts)
    assert got == (probe is False or from_records)


def test_records_of_the_other_phase_or_a_missing_file_say_nothing(tmp_path):
    (tmp_path / "proxy.warmup.http.jsonl").write_text(json.dumps({"x_gripprobe_proxy_error": "proxy_connect_error"}))
    assert not backend_was_unreachable(_record("measured", started=True, probe=None), tmp_path)
    assert not backend_was_unreachable(_record("measured", started=True, probe=True), tmp_path / "nowhere")
    assert backend_was_unreachable(_record("warmup", started=True, probe=True), tmp_path)
