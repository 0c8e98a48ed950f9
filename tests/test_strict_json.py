"""Every JSON file the harness writes is strict JSON (no NaN, no Infinity) and holds no raw control
character, whatever an agent reported: a real run of a script agent whose own JSON events carry NaN and
infinite latencies and usage, 1e30 tokens and terminal escapes; and ``jsonl.dumps`` property-tested."""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from conftest import SPECS, gripprobe, read_json
from gripprobe_core.jsonl import dumps

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

AGENT = r'''#!{python}
import json, os, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
ws = args.get("--workspace", os.getcwd())
with open(os.path.join(ws, "greeting.txt"), "w") as fh:
    fh.write("Hello, GripProbe!\nThis file was saved with the write tool.\n")
def emit(kind, **fields):
    sys.stdout.write(json.dumps({"type": kind, "ts": "2026-01-01T00:00:00.000Z", **fields}) + "\n")
nan, inf = float("nan"), float("inf")
emit("model.response", response_id="r1", turn=1, text="done \x1b]0;pwned\x07\x9b31m", finish_reason="tool_calls",
     usage={"prompt_tokens": 10**30, "completion_tokens": nan, "total_tokens": inf, "cached_tokens": -4},
     latency_ms=nan, tool_calls=[{"id": "c1", "name": "write", "arguments": "{\"n\": NaN}"}])
emit("tool.start", call_id="c1", name="write", arguments={"path": "greeting.txt", "n": inf, "m": [nan, -inf]})
emit("tool.result", call_id="c1", name="write", status="success", output="ok\x1b[2J\x85", duration_ms=inf)
emit("final", text="done \x1b[31m")
'''


def strict(text: str):
    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("strict")
    specs = base / "specs"
    shutil.copytree(SPECS, specs)
    agent = base / "nanagent"
    agent.write_text(AGENT.replace("{python}", sys.executable))
    agent.chmod(0o755)
    (specs / "cli_agents" / "nanagent.yaml").write_text(
        f"id: nanagent\nplugin: reference\nexecutable: {json.dumps(str(agent))}\nformats: [tool]\n"
        f"tool_kinds: [execute, read, write]\ntimeout_s: 60\n")
    res = gripprobe("run", "-a", "nanagent", "-m", "oracle-lazy", "-t", "save_file", "--telemetry-proxy", "off",
                    "--specs", str(specs), "--results", str(base / "results"), timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def test_every_json_file_of_the_run_is_strict_and_inert(nan_run):
    files = [p for p in nan_run.rglob("*") if p.suffix in (".json", ".jsonl") and "workspace" not in p.parts]
    assert any(p.name == "events.measured.jsonl" for p in files) and any(p.name == "case.json" for p in files)
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not CONTROL.search(text.replace("\n", "").replace("\t", "")), path
        for line in (text.splitlines() if path.suffix == ".jsonl" else [text]):
            if line.strip():
                strict(line)


def test_numbers_an_agent_reported_past_belief_are_unknown(nan_run):
    (case_dir,) = (nan_run / "cases").iterdir()
    case = read_json(case_dir / "case.json")
    assert case["verdict"]["status"] != "HARNESS_ERROR"  # its events were read, the run judged
    usage = case["usage"]
    assert usage["source"] == "B" and usage["model_calls"] == 2  # one per phase
    assert usage["prompt_tokens"] is None and usage["completion_tokens"] is None  # 1e30 and NaN: unknown
    assert usage["cached_tokens"] is None and usage["total_tokens"] is None
    events = [strict(line) for line in (case_dir / "artifacts" / "events.measured.jsonl").read_text().splitlines()]
    assert events and all(e["latency_ms"] is None for e in events)
    start = next(e for e in events if e["event_type"] == "tool_call_start")
    assert start["payload"]["arguments"] == {"path": "greeting.txt", "n": None, "m": [None, None]}


def test_export_and_aggregate_of_that_run_are_strict(nan_run, tmp_path):
    res = gripprobe("export", str(nan_run), "--format", "atif", "--out", str(tmp_path / "atif"), timeout=60)
    assert res.returncode == 0, res.stderr
    for path in (tmp_path / "atif").rglob("*.json"):
        text = path.read_text()
        strict(text)
        assert not CONTROL.search(text.replace("\n", ""))
    res = gripprobe("aggregate-reports", "--runs-root", str(nan_run), "--output", str(tmp_path / "agg"), timeout=60)
    assert res.returncode == 0, res.stderr
    strict((tmp_path / "agg" / "aggregate.json").read_text())


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
              st.text(alphabet=st.characters(codec="utf-8"), max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=20)


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@given(value=JSONISH, indent=st.sampled_from([None, 2]))
def test_dumps_writes_strict_inert_json_of_the_same_value(value, indent):
    text = dumps(value, indent=indent, ensure_ascii=False)
    assert not CONTROL.search(text.replace("\n", "")), text
    assert "\u2028" not in text and "\u2029" not in text
    assert strict(text) == _finite(value)
