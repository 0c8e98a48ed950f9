"""End to end: each REAL agent through the real ``gripprobe run`` against the oracle, GripProbe its ACP client.

Per agent, two runs (the kit's ``e2e_run``, made once per session):

* the contract's (:class:`gripprobe_core.testing.DriverContract`): oracle-perfect and oracle-lazy on save_file, no
  policy — PASS with the oracle's call ids, NO_TOOL_CALL; here also: the agent asked, auto-approve allowed it, every
  model call named the model under test;
* the policy run: oracle-deny-then-recover (it asks for a shell command first, then recovers with the file tools
  when the shell is refused) on the shipped ``save_file_denied`` (auto-deny) and ``shell_denied`` (scripted: deny
  ``execute``, default allow).

What differs by agent is the agent's own behaviour, asserted as such: Claude Code and opencode hand a denial back
to the model and go on; Qwen Code ends its turn at the first denial; codex never asks (the policy is not applied,
and the case says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gripprobe_core.testing import DriverContract, read_cases, read_jsonl

from conftest import for_driver

POLICY_TESTS = ("save_file_denied", "shell_denied")
DENY_MODEL = ("oracle-deny-then-recover",)


def case_dir(run: Path, agent: str, model: str, test: str) -> Path:
    return run / "cases" / f"{agent}__{model}__oracle__tool__{test}"


def events(case: Path) -> list[dict[str, Any]]:
    return read_jsonl(case / "artifacts" / "events.measured.jsonl")


def kinds(case: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in events(case) if e["event_type"] == kind]


def oracle_calls(case: Path) -> list[dict[str, Any]]:
    return read_jsonl(case / "artifacts" / "oracle.measured.jsonl")


class AcpContract(DriverContract):
    """The contract for an ACP driver, and what every ACP agent shares in the contract's own run."""

    e2e_tests = ("save_file",)
    asks = True

    def test_command_starts_the_installed_agent_and_carries_the_prompt(self, agent_driver, make_phase_ctx) -> None:
        """The kit's version looks for the prompt in argv or stdin; an ACP agent gets it in ``session/prompt``
        (the session reads ``ctx.prompt`` when it runs, proved end to end below): argv starts the installed
        agent, stdin is the session's."""
        ctx = make_phase_ctx(prompt="Say the word gripprobe-contract-prompt and nothing else.")
        command = agent_driver.command(ctx)
        assert command.argv[0] == str(ctx.agent_executable)
        assert command.stdin is None and command.session is not None
        assert not any("gripprobe-contract-prompt" in a for a in command.argv)

    @pytest.mark.e2e
    def test_kept_files_of_a_real_run_never_follow_a_link(self, contract_run) -> None:
        """The kit's version replays every ``kept_from`` entry under the phase's folders and fails on the session
        transcript, whose source is ``harness`` (written outside the sandbox, never a file of the agent's). An ACP
        driver keeps no file of the agent's at all: the run kept the harness's transcript and nothing else."""
        for ctx_file in sorted((contract_run / "cases").glob("*/artifacts/measured.context.json")):
            assert json.loads(ctx_file.read_bytes())["kept_from"] == {"conversation.jsonl": "harness"}, ctx_file

    @pytest.mark.e2e
    def test_the_prompt_went_in_session_prompt_and_every_model_call_named_the_model(self, contract_run, agent_spec):
        for model in ("oracle-perfect", "oracle-lazy"):
            case = case_dir(contract_run, agent_spec.id, model, "save_file")
            sent = [r["message"] for r in read_jsonl(case / "artifacts" / "measured.conversation.jsonl")
                    if r.get("dir") == "outgoing" and r["message"].get("method") == "session/prompt"]
            assert [m["params"]["prompt"][0]["text"] for m in sent] == [(case / "prompt.txt").read_text()]
            proxy = read_jsonl(case / "artifacts" / "proxy.measured.http.jsonl")
            assert {r["x_gripprobe_request"]["model"] for r in proxy} == {model.removeprefix("oracle-")}
            assert {r["x_gripprobe_status"] for r in proxy} == {200}

    @pytest.mark.e2e
    def test_auto_approve_answered_each_request_with_allow_once(self, contract_run, agent_spec):
        case = case_dir(contract_run, agent_spec.id, "oracle-perfect", "save_file")
        calls = [c["tool_call_id"] for c in oracle_calls(case)]
        requests, responses = kinds(case, "permission_request"), kinds(case, "permission_response")
        if not self.asks:
            assert requests == responses == []
            return
        assert [e["tool_call_id"] for e in requests] == [e["tool_call_id"] for e in responses] == calls
        assert {(e["payload"]["outcome"], e["payload"]["option_kind"], e["payload"]["rule"]) for e in responses} == {
            ("allow", "allow_once", "auto-approve")}
        record = json.loads((case / "case.json").read_text())
        assert record["interaction"] is None or record["interaction"]["applied"]

    # ----------------------------------------------------------------------------------- policies

    @pytest.fixture(scope="class")
    @classmethod
    def policy_run(cls, e2e_run) -> Path:
        return Path(e2e_run(*POLICY_TESTS, models=DENY_MODEL))

    def policy_case(self, run: Path, spec: Any, test: str) -> tuple[Path, dict[str, Any]]:
        case = case_dir(run, spec.id, DENY_MODEL[0], test)
        return case, json.loads((case / "case.json").read_text())


class TestQwenContract(AcpContract):
    pytestmark = for_driver("acp-qwen")

    @pytest.mark.e2e
    def test_a_denial_ends_qwens_turn(self, policy_run, agent_spec):
        """Qwen Code treats a rejected permission as the user cancelling: the call fails ("canceled by the
        user") and the turn ends there, so the model never hears of it and cannot recover or say why."""
        for test, rule in (("save_file_denied", "auto-deny"), ("shell_denied", "rule 1 (tool_kind: execute)")):
            case, record = self.policy_case(policy_run, agent_spec, test)
            (call,) = oracle_calls(case)
            assert call["name"] == "run_shell_command"
            (response,) = kinds(case, "permission_response")
            assert (response["tool_call_id"], response["payload"]["outcome"], response["payload"]["option_id"],
                    response["payload"]["rule"]) == (call["tool_call_id"], "deny", "cancel", rule)
            (result,) = kinds(case, "tool_call_result")
            assert result["status"] == "error" and "canceled by the user" in result["payload"]["output"]
            assert not (case / "workspace" / "greeting.txt").exists()
            assert record["interaction"]["applied"] and record["interaction"]["denied"] == 1
            assert record["verdict"]["status"] == "FAIL"  # no final answer saying so (and shell_denied: no file)


class TestOpencodeContract(AcpContract):
    pytestmark = for_driver("acp-opencode")

    @pytest.mark.e2e
    def test_denied_calls_go_back_to_the_model(self, policy_run, agent_spec):
        check_recovering_agent(policy_run, agent_spec, self)


class TestClaudeContract(AcpContract):
    pytestmark = for_driver("acp-claude")

    @pytest.mark.e2e
    def test_denied_calls_go_back_to_the_model(self, policy_run, agent_spec):
        check_recovering_agent(policy_run, agent_spec, self)


def check_recovering_agent(run: Path, spec: Any, contract: AcpContract) -> None:
    """auto-deny: the shell, then the write, refused; nothing written; the answer says so (PASS). scripted: the
    shell refused, the write allowed; the file written (PASS). Each answer for the oracle's own call id."""
    case, record = contract.policy_case(run, spec, "save_file_denied")
    calls = [c["tool_call_id"] for c in oracle_calls(case)]
    responses = kinds(case, "permission_response")
    assert len(calls) == 2 and [e["tool_call_id"] for e in responses] == calls
    assert [e["payload"]["outcome"] for e in responses] == ["deny", "deny"]
    assert [e["payload"]["kind"] for e in kinds(case, "permission_request")] == ["execute", "write"]
    assert not (case / "workspace" / "greeting.txt").exists()
    assert record["verdict"]["status"] == "PASS", record["verdict"]
    assert (record["interaction"]["applied"], record["interaction"]["denied"]) == (True, 2)

    case, record = contract.policy_case(run, spec, "shell_denied")
    calls = [c["tool_call_id"] for c in oracle_calls(case)]
    responses = kinds(case, "permission_response")
    assert [e["tool_call_id"] for e in responses] == calls
    assert [(e["payload"]["outcome"], e["payload"]["rule"]) for e in responses] == [
        ("deny", "rule 1 (tool_kind: execute)"), ("allow", "default")]
    assert (case / "workspace" / "greeting.txt").read_text() == "Hello, GripProbe!\nThis file was saved with the write tool.\n"
    assert record["verdict"]["status"] == "PASS", record["verdict"]
    assert (record["interaction"]["allowed"], record["interaction"]["denied"]) == (1, 1)


class TestCodexContract(AcpContract):
    pytestmark = for_driver("acp-codex")
    asks = False

    @pytest.mark.e2e
    def test_codex_never_asks_so_the_policy_is_reported_not_applied(self, policy_run, agent_spec):
        for test in POLICY_TESTS:
            case, record = self.policy_case(policy_run, agent_spec, test)
            assert not kinds(case, "permission_request")
            assert [e["payload"]["raw_name"] for e in kinds(case, "tool_call_result")] == ["exec_command"]
            assert (record["verdict"]["status"], record["verdict"]["failure_reason"]) == (
                "TOOL_UNSUPPORTED", "interaction_not_applied")
            assert not record["interaction"]["applied"] and "agent-full-access" in record["interaction"]["reason"]


class TestGenericContract(DriverContract):
    """The generic driver configures no agent (no backend, no model): it cannot run against the oracle on its own,
    so the contract's unit part only; its session is the one the four agents above run end to end."""

    pytestmark = for_driver("acp")
    test_against_the_oracle_perfect_passes_and_lazy_is_no_tool_call = None
    test_the_driver_reports_the_calls_the_oracle_asked_for = None
    test_kept_files_of_a_real_run_never_follow_a_link = None
    test_command_starts_the_installed_agent_and_carries_the_prompt = None  # the prompt goes in session/prompt
