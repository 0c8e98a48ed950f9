"""The real model's recorded sessions, replayed in CI (issue 22): Qwen2.5-Coder-1.5B-Instruct on llama-server,
recorded by ``scripts/real_model.py record`` into tests/fixtures/real_model/ (docs/conformance.md, "A real
model"). Every recorded case runs again with its real agent against the replay backend and must get the verdict
the real run gave, with no request the recording does not hold; doctor, TTFT and the case page must say what
they said of the real server.

The agents are the real binaries at their pinned versions (installed by ./dev); one missing fails the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import real_model  # noqa: E402  (scripts/real_model.py)

RECORDING = real_model.RECORDING
META = json.loads((RECORDING / "recording.json").read_bytes())  # a missing recording fails collection, loudly
AGENTS = sorted({c["agent"] for c in META["cases"]})

pytestmark = pytest.mark.e2e


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gripprobe_core.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_the_recording_holds_the_reference_agent_and_three_real_agents_on_every_sanity_test():
    assert "reference" in AGENTS and len(AGENTS) >= 4, AGENTS
    from gripprobe_core.specs.loader import load_specs, spec_layers

    sanity = {t.id for t in load_specs(spec_layers()).tests_tagged("sanity")}
    for agent in AGENTS:
        assert {c["test"] for c in META["cases"] if c["agent"] == agent} == sanity, agent
    assert META["provenance"]["file_sha256"] == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert META["wall_s"] and META["wall_s"] > 60, "the recording says how long it took"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """Every recorded case run again on the replay backend: one run per agent, as recorded (--no-warmup)."""
    base = tmp_path_factory.mktemp("replayed")
    out: dict[tuple[str, str], dict] = {}
    for agent in AGENTS:
        rows = [c for c in META["cases"] if c["agent"] == agent]
        tests = [x for c in rows for x in ("-t", c["test"])]
        run = _cli("run", "--specs", str(real_model.SPECS), "-a", agent, "-m", real_model.REPLAY_MODEL, *tests,
                   "-f", rows[0]["format"], "--no-warmup", "--jobs", "2", "--results", str(base / agent))
        assert "Traceback" not in run.stderr, run.stderr[-3000:]
        run_dir = next((base / agent / "runs").iterdir())
        for case in (run_dir / "cases").iterdir():
            result = json.loads((case / "case.json").read_bytes())
            out[(agent, result["key"]["test"])] = {"result": result, "dir": case}
    return out


@pytest.mark.parametrize("row", META["cases"], ids=lambda r: f"{r['agent']}-{r['test']}")
def test_each_replayed_case_gets_the_verdict_of_the_real_run(replayed, row):
    got = replayed.get((row["agent"], row["test"]))
    assert got is not None, f"{row['agent']} × {row['test']} was not replayed"
    result = got["result"]
    mismatches = [w for w in result.get("warnings") or [] if w.startswith("replay_mismatch")]
    assert not mismatches, mismatches
    verdict = result["verdict"]
    assert (verdict["status"], verdict.get("failure_reason")) == (row["status"], row["reason"]), (
        f"real run: {row['status']}/{row['reason']}; replay: {verdict['status']}/{verdict.get('failure_reason')}")
    log = got["dir"] / "artifacts" / "replay.measured.jsonl"
    served = log.read_text().splitlines() if log.is_file() else []  # a case that ran no agent asked nothing
    assert len(served) == row["model_calls"], "every recorded exchange, and only those, was served"


def test_a_call_the_model_wrote_as_text_is_said_so_on_the_case_page(replayed):
    """Where the real run's reason was protocol_malformed the model wrote its call as text: the replayed case's page
    says so in its header."""
    text_cases = [(k, v) for k, v in replayed.items() if v["result"]["verdict"].get("failure_reason") == "protocol_malformed"]
    assert text_cases, "the recording has no case where the model wrote its call as text"
    for (agent, test), v in text_cases:
        page = v["dir"].parent.parent / "reports" / "cases" / f"{v['dir'].name}.html"
        html = page.read_text()
        assert 'id="text-calls"' in html and "the model wrote" in html and "call(s) as text" in html, (agent, test)


def test_ttft_is_the_first_token_not_the_servers_keepalive():
    """llama-server's own timings (prompt_ms: the prefill) against the recorded TTFT: the first token comes after
    the prefill, never before (an SSE ping or the first byte would be earlier)."""
    checked = 0
    for path in sorted(RECORDING.glob("*__*__*.json")):
        for ex in json.loads(path.read_bytes())["exchanges"]:
            timings, ttft = ex.get("server_timings"), ex.get("ttft_ms")
            if not timings or ttft is None or not timings.get("prompt_ms"):
                continue
            assert ttft >= 0.9 * timings["prompt_ms"], (path.name, ttft, timings)
            checked += 1
    assert checked >= 10, checked


def test_doctor_says_what_it_said_of_the_real_server():
    out = _cli("doctor", "--specs", str(real_model.SPECS), "--model", real_model.REPLAY_MODEL, "--json", timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    check = json.loads(out.stdout)[0]
    tool = check["checks"]["tool_call"]
    recorded = json.loads((RECORDING / "doctor__toolprobe__chat.json").read_bytes())["exchanges"][0]
    assert recorded["status"] == 200
    assert tool["endpoint"].startswith("POST /v1/chat/completions of the recording"), tool
    assert tool["outcome"] in ("structured", "text", "malformed"), tool
    if tool["outcome"] == "text" and set(tool["text_tool_syntaxes"]) & {"json_fence", "json"}:
        fix = (check.get("fix") or {}).get("tool_call") or ""
        assert "ignored its chat template" in fix, fix
    assert tool["server_tool_template"] is True, "llama-server's /props, recorded, says its template supports tools"
    shown = _cli("doctor", "--specs", str(real_model.SPECS), "--model", real_model.REPLAY_MODEL, timeout=120).stdout
    assert "embedded (started by GripProbe), 1 recorded model" in shown and "of the recording" in shown, shown


def test_the_docs_table_is_the_recordings():
    table = real_model.render_table(RECORDING).rstrip("\n")
    assert table in (ROOT / "docs" / "conformance.md").read_text(), "run scripts/conformance.py (or real_model.py table)"
    assert os.path.isfile(ROOT / "scripts" / "real_model.py")
