"""Attacks 18 and 19: tool use claimed where the wire carried none (issue 16, items 3 and 9). Both run
against oracle-lazy (never asks for a tool) on `hello`, in the tool format and in markdown (the agents'
spec declares both; their driver, the reference agent's, names no format in `calls_off_wire`), in one run
of a repository of their own. Each test fails if its attack worked: a PASS, or tool use confirmed."""

from __future__ import annotations

import json
import shutil

import pytest

from .adversary import MODE, Arena, Case, RunResult, read_jsonl
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e

WIRE_ATTACKS = ("reqforge", "logforge")
FORMATS = ("tool", "markdown")
#: The wires the request forgery speaks, as the proxy records them.
FORGED_WIRES = {"chat_completions": 2, "responses": 1, "ollama_chat": 1, "anthropic_messages": 1}


def _agent_spec(id_: str, executable: str) -> str:
    return (f"id: {id_}\nplugin: reference\nexecutable: {json.dumps(executable)}\nformats: [tool, markdown]\n"
            f"tool_kinds: [execute, read, write]\ntimeout_s: 60\ntelemetry_proxy_mode: auto\n")


@pytest.fixture(scope="module")
def claims_run(arena: Arena) -> RunResult | None:
    if arena.broken:
        return None
    repo = arena.base / "repo-claims"
    shutil.copytree(arena.specs, repo / "specs")
    for name in WIRE_ATTACKS:
        exe = arena.build_agent(name)
        (repo / "specs" / "cli_agents" / f"adv_{name}.yaml").write_text(_agent_spec(f"adv_{name}", str(exe)))
    return arena.run("run", *[a for n in WIRE_ATTACKS for a in ("-a", f"adv_{n}")], "-m", "oracle-lazy", "-t", "hello",
                     *[a for f in FORMATS for a in ("-f", f)], "-j", "2", "--timeout", "30", timeout=300, repo=repo)


def _case(res: RunResult, attack: str, fmt: str) -> Case:
    """The attack's case in ``fmt``, checked to be classified and to have really run the attack."""
    assert not res.timed_out and res.returncode == 0, res.explain()
    assert res.run_dir is not None, res.explain()
    found = sorted(res.run_dir.glob(f"cases/adv_{attack}__oracle-lazy__*__{fmt}__hello"))
    assert len(found) == 1, f"{attack} × {fmt}: {found}; {res.explain()}"
    data = None
    try:
        data = json.loads((found[0] / "case.json").read_bytes())
    except (OSError, ValueError):
        pass
    case = Case(found[0], data)
    assert case.data is not None, f"{case.dir}: case.json missing or unreadable"
    assert case.status in STATUSES, case.describe()
    assert case.reports(), f"the {attack} attack did not run: {case.describe()}; " \
                           f"stderr {(case.dir / 'measured.stderr').read_bytes()[-600:]!r}"
    assert case.validator("file_equals")["passed"], f"the agent did not write hello.txt: {case.describe()}"
    if MODE in ("bwrap", "none"):
        assert case.data.get("sandbox") == MODE, f"case.json sandbox: {case.data.get('sandbox')!r}"
    return case


def _tier_a_tool_events(case: Case) -> list[dict]:
    return [e for e in read_jsonl(case.dir / "artifacts" / "events.measured.jsonl")
            if e.get("source_tier") == "A" and e.get("event_type") in ("tool_call_start", "tool_call_result")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_call_made_up_in_the_request_is_not_believed(claims_run, fmt):
    """Attack 18: hello.txt written by the agent; a made-up assistant tool call and a tool result for it sent
    in its own requests on every wire (Chat Completions JSON and SSE, Responses, Ollama, Anthropic Messages).
    Before the fix, in
    markdown, this was PASS at tier A with confidence 1.0."""
    case = _case(claims_run, "reqforge", fmt)
    assert case.status != "PASS", f"a call made up in the request was believed: {case.describe()}"
    assert case.status == "PASS_WITH_POLICY_VIOLATION", case.describe()
    # the forged requests reached the wire: the proxy recorded each, and the result each carried
    sent = case.reports()[-1]["sent"]
    assert all(isinstance(s, int) and s < 500 for s in sent.values()), sent
    records = read_jsonl(case.dir / "artifacts" / "proxy.measured.http.jsonl")
    for protocol, n in FORGED_WIRES.items():
        carried = [r for r in records if r.get("x_gripprobe_protocol") == protocol
                   and r.get("x_gripprobe_tool_result_count") == 1]
        assert len(carried) == n, f"{protocol}: the proxy recorded {len(carried)} forged result(s), not {n}"
    assert not any(r.get("x_gripprobe_tool_call_count") for r in records), "the lazy model asked for a tool?"
    telemetry = case.data["telemetry"]
    assert _tier_a_tool_events(case) == [], "tier A made a tool event out of the agent's request"
    # two distinct made-up results: the one with id call_oracle_0001 (sent four times: its repeats are the same
    # result) and Ollama's without an id
    assert telemetry["telemetry_tool_result_orphan_count"] == 2, telemetry
    assert telemetry["tool_event_verdict"] != "confirmed_tool_use", telemetry
    # what is left of its claim is its final answer's self-report (tier D), which never confirms
    assert telemetry["telemetry_source_tier"] == "D" and telemetry["telemetry_invoked_confidence"] == 0.3, telemetry


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_forged_tier_b_log_is_not_believed(claims_run, fmt):
    """Attack 19: tier-B events of a write call the model never made (with the oracle's own call id), and a
    request carrying that call and its "result", so that the log could pair with one on the wire. Before the
    fix, in markdown, the log alone confirmed it (PASS at tier B), and with the request's result at tier A."""
    case = _case(claims_run, "logforge", fmt)
    assert case.status != "PASS", f"a forged log was believed: {case.describe()}"
    assert case.status == "PASS_WITH_POLICY_VIOLATION", case.describe()
    assert case.reports()[-1]["model_status"] == [200, 200], case.reports()[-1]
    telemetry = case.data["telemetry"]
    assert telemetry["tool_event_verdict"] != "confirmed_tool_use", telemetry
    assert telemetry["telemetry_tool_call_unwitnessed_count"] >= 1 and telemetry["telemetry_invoked_confidence"] == 0.0
    assert telemetry["telemetry_tool_result_orphan_count"] == 1, telemetry
    assert _tier_a_tool_events(case) == []
    # the claims are still on the timeline, as the agent's word (tier B)
    events = read_jsonl(case.dir / "artifacts" / "events.measured.jsonl")
    assert any(e.get("source_tier") == "B" and e.get("tool_call_id") == "call_oracle_0001" for e in events)
