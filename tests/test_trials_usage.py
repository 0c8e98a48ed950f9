"""Trials, usage and cost, and the per-phase token budget, through real runs of the `gripprobe` command
(reference agent × the oracle; the real recording proxy in front of it)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import SPECS, gripprobe
from gripprobe_core.models import CaseResult


def cases_of(run_dir: Path) -> dict[str, CaseResult]:
    return {p.parent.name: CaseResult.model_validate_json(p.read_bytes())
            for p in sorted((run_dir / "cases").glob("*/case.json"))}


def run_dir_of(res) -> Path:
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def three_trials(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trials")
    return run_dir_of(gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-m", "oracle-flaky",
                                "-m", "oracle-tools-unsupported", "-t", "save_file", "--trials", "3", "--jobs", "2",
                                "--results", str(out)))


def test_a_three_trial_run_keys_every_case_by_its_trial(three_trials):
    cases = cases_of(three_trials)
    assert len(cases) == 9
    ids = sorted(cases)
    assert "reference__oracle-flaky__oracle__tool__save_file" in ids  # trial 1 keeps the one-trial id
    assert "reference__oracle-flaky__oracle__tool__save_file__t3" in ids
    flaky = {c.key.trial: c.verdict.status for c in cases.values() if c.key.model == "oracle-flaky"}
    assert flaky == {1: "PASS", 2: "NO_TOOL_CALL", 3: "PASS"}  # the flaky profile: right on odd trials
    assert json.loads((three_trials / "manifest.json").read_text())["trials"] == 3


def test_the_summary_shows_pass_at_k_pass_hat_k_flaky_and_coverage(three_trials):
    md = (three_trials / "reports" / "summary.md").read_text()
    assert "cases: 9 of 9 (3 trials per cell)" in md
    row = next(line for line in md.splitlines() if line.startswith("| reference | oracle-flaky |"))
    assert "| 1/1 tests | 3 | 0.667 [" in row and "@1 0.67 · @2 1.00 · @3 1.00" in row
    assert "^1 0.67 · ^2 0.33 · ^3 0.00" in row and "| save_file |" in row
    unsupported = next(line for line in md.splitlines() if line.startswith("| reference | oracle-tools-unsupported |"))
    assert "| 0/1 tests | 0 | — |" in unsupported  # never attempted: no score, and it says why
    assert "2/3 PASS, 1 NO_TOOL (flaky)" in md.split("## Cells", 1)[1]
    # the headline leaves the three TOOL_UNSUPPORTED cases out of n
    assert "strict_pass_score: 0.833; overall_score: 0.833 (over n = 6 attempted cases)" in md
    html = (three_trials / "reports" / "summary.html").read_text()
    assert 'class="mark-flaky"' in html and "pass^3 0.00" in html


def test_usage_is_read_from_the_wire_with_cached_tokens(three_trials):
    for c in cases_of(three_trials).values():
        if c.verdict.status == "TOOL_UNSUPPORTED":
            continue
        u = c.usage
        assert u is not None and u.source == "A" and u.model_calls >= 2
        assert u.prompt_tokens and u.completion_tokens and u.total_tokens == u.prompt_tokens + u.completion_tokens
        if c.verdict.status == "PASS":  # a conversation's later calls repeat its prefix: the oracle's cache
            assert u.cached_tokens and 0 < u.cached_tokens < u.prompt_tokens
        else:  # the lazy trial makes one call per phase: nothing to have cached
            assert u.cached_tokens == 0
        assert u.ttft_ms is not None and u.model_time_s is not None and u.cost is None  # no pricing: no cost
        measured = next(p for p in c.phases if p.phase == "measured")
        records = [json.loads(x) for x in (three_trials / "cases" / c.case_id / "artifacts" /
                                           "proxy.measured.http.jsonl").read_text().splitlines()]
        wire = sum(r["x_gripprobe_usage"]["prompt_tokens"] for r in records if r.get("x_gripprobe_usage"))
        assert measured.usage.prompt_tokens == wire


def test_resume_goes_trial_by_trial_and_more_trials_can_be_added(tmp_path):
    first = run_dir_of(gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file",
                                 "-t", "shell_pwd", "--trials", "2", "--results", str(tmp_path)))
    before = {n: (first / "cases" / n / "case.json").read_bytes() for n in cases_of(first)}
    assert len(before) == 4
    res = gripprobe("run-suite", "--resume", str(first), "--trials", "3")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "4 of 6 case(s) done, 2 to run" in res.stderr
    after = cases_of(first)
    assert sorted(c.key.trial for c in after.values()) == [1, 1, 2, 2, 3, 3]
    assert all((first / "cases" / n / "case.json").read_bytes() == b for n, b in before.items())  # untouched
    res = gripprobe("run-suite", "--resume", str(first))  # nothing asked: the run's own 3 trials, all done
    assert res.returncode == 0 and "6 of 6 case(s) done, 0 to run" in res.stderr
    verified = gripprobe("verify", str(first))  # every trial of both sessions signed, the seal re-signed
    assert verified.returncode == 0 and "6 case(s) hold" in verified.stdout, verified.stdout + verified.stderr


def priced_specs(tmp_path: Path, *, suite_budget: int | None = None) -> Path:
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    model = specs / "models" / "oracle-perfect.yaml"
    model.write_text(model.read_text() + "pricing:\n  input_per_million: 3.0\n  output_per_million: 15.0\n"
                                          "  cached_input_per_million: 0.3\n  currency: EUR\n")
    if suite_budget is not None:
        (specs / "suites" / "budgeted.yaml").write_text(
            "id: budgeted\ntitle: a token budget from the suite\nagents: [reference]\n"
            "models: [oracle-perfect, oracle-error-then-recover]\ntests: [save_file]\n"
            f"max_tokens_per_phase: {suite_budget}\n")
    return specs


def test_cost_comes_from_the_models_pricing(tmp_path):
    run = run_dir_of(gripprobe("run", "--specs", str(priced_specs(tmp_path)), "-a", "reference", "-m", "oracle-perfect",
                               "-t", "save_file", "--results", str(tmp_path / "results")))
    (case,) = cases_of(run).values()
    for phase in case.phases:
        u = phase.usage
        want = ((u.prompt_tokens - u.cached_tokens) * 3.0 + u.cached_tokens * 0.3 + u.completion_tokens * 15.0) / 1e6
        assert u.cost == pytest.approx(want, abs=1e-8) and u.currency == "EUR"
    assert case.usage.cost == pytest.approx(sum(p.usage.cost for p in case.phases), abs=1e-8)
    md = (run / "reports" / "summary.md").read_text()
    assert f"cost {case.usage.cost:.4f} EUR" in md
    page = (run / "reports" / "cases" / f"{case.case_id}.html").read_text()
    assert f"{case.usage.cost:.4f} EUR" in page and "tier A (the recording proxy)" in page


def test_a_spent_token_budget_stops_the_agent_and_says_budget_exceeded(tmp_path):
    """error-then-recover needs three model calls (about 190, 290 and 370 tokens); under a budget of 600 the
    third is admitted (480 spent) and crosses it: the case says budget_exceeded although that call was the
    phase's last and nothing was refused. perfect's two calls (about 465 tokens) fit and it passes."""
    results = tmp_path / "results"
    run = run_dir_of(gripprobe("run-suite", "--specs", str(priced_specs(tmp_path, suite_budget=600)),
                               "--suite", "budgeted", "--results", str(results)))
    cases = {c.key.model: c for c in cases_of(run).values()}
    spent = cases["oracle-error-then-recover"]
    assert (spent.verdict.status, spent.verdict.failure_reason) == ("TIMEOUT", "budget_exceeded")
    assert "token budget" in spent.verdict.evaluator_reason_text
    measured = next(p for p in spent.phases if p.phase == "measured")
    assert measured.proxy["token_budget"] == 600 and measured.proxy["token_budget_exceeded"] is True
    records = [json.loads(x) for x in (run / "cases" / spent.case_id / "artifacts" /
                                       "proxy.measured.http.jsonl").read_text().splitlines()]
    costs = [r["x_gripprobe_tokens"]["counted"] for r in records if r.get("x_gripprobe_status") == 200]
    assert len(costs) == 3 and measured.proxy["tokens_spent"] == sum(costs)
    assert 600 <= sum(costs) <= 600 + max(costs)  # at most the budget plus one call
    # the agent either ends by itself or is stopped by the harness, whichever comes first; a call after the
    # crossing one would have been refused with a 429 the proxy records
    assert measured.process.status in ("nonzero_exit", "ok") or "token budget" in (measured.process.error or "")
    refused = [r for r in records if r.get("x_gripprobe_proxy_error") == "token_budget_exceeded"]
    assert all(r["x_gripprobe_status"] == 429 for r in refused)
    # two model calls of perfect fit: it passes, its spend is recorded
    fits = cases["oracle-perfect"]
    assert fits.verdict.status == "PASS"
    assert all(p.proxy["token_budget_exceeded"] is False and 0 < p.proxy["tokens_spent"] < 600 for p in fits.phases)
    # --max-tokens-per-phase on the command line wins over the suite's key
    big = run_dir_of(gripprobe("run-suite", "--specs", str(tmp_path / "specs"), "--suite", "budgeted",
                               "--max-tokens-per-phase", "100000", "--results", str(results)))
    assert {c.verdict.status for c in cases_of(big).values()} == {"PASS"}
    assert json.loads((big / "manifest.json").read_text())["max_tokens_per_phase"] == 100000


def test_doctor_self_checks_a_test_the_agent_can_attempt(tmp_path):
    """aider cannot run shell commands: doctor checks it with save_file (it used to pick shell_pwd, which
    is TOOL_UNSUPPORTED for aider, so doctor never ran aider at all)."""
    from gripprobe_core.cli.agents_cmd import self_check_test
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.specs import load_specs

    specs = load_specs(SPECS, registry=make_plugin_manager().registry)
    assert self_check_test(specs, specs.agents["aider"], None) == ("save_file", "")
    assert self_check_test(specs, specs.agents["reference"], None) == ("shell_pwd", "")
    test, why = self_check_test(specs, specs.agents["aider"], "shell_pwd")
    assert test is None and "execute" in why and "TOOL_UNSUPPORTED" in why
    only = tmp_path / "specs"
    shutil.copytree(SPECS, only)
    for f in (*(only / "cli_agents").glob("*.yaml"), *(only / "suites").glob("*.yaml")):
        if f.stem not in ("aider", "reference", "default"):
            f.unlink()
    res = gripprobe("doctor", "--specs", str(only), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    assert re.search(r"^aider .* self-check save_file: PASS", res.stdout, re.M), res.stdout
    assert re.search(r"^reference .* self-check shell_pwd: PASS", res.stdout, re.M), res.stdout


def test_doctor_labels_both_phases_of_its_self_check_and_the_total(tmp_path):
    """A self-check is a whole case: a warmup and a measured phase. doctor shows each phase's agent time and the
    case's total, labelled (it used to print one bare number). An empty agent cache: only the built-in
    reference agent is checked, the others say how to install them."""
    res = gripprobe("doctor", env={"GRIPPROBE_AGENT_CACHE": str(tmp_path / "agents")}, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr[-2000:]
    line = next(x for x in res.stdout.splitlines() if x.startswith("reference "))
    m = re.search(r"self-check shell_pwd: PASS \(warmup (\d+\.\d)s, measured (\d+\.\d)s, total (\d+\.\d)s\)$", line)
    assert m, line
    warmup, measured, total = map(float, m.groups())
    assert 0 < warmup and 0 < measured and warmup + measured <= total + 0.1  # the total holds both phases
    assert re.search(r"^aider .* NOT INSTALLED +run `gripprobe agents install aider`", res.stdout, re.M), res.stdout


@pytest.mark.parametrize("usage, prompt, completion, cached", [
    ({"prompt_tokens": 2858, "completion_tokens": 17, "cached_tokens": 2787}, 2858, 17, 2787),   # Chat Completions
    ({"input_tokens": 2858, "output_tokens": 17, "cached_input_tokens": 2787}, 2858, 17, 2787),  # Responses (codex)
    ({"input_tokens": 71, "output_tokens": 17, "cache_read_tokens": 2787}, 2858, 17, 2787),      # gptme's log
    ({"input_tokens": 61, "output_tokens": 17, "cache_read_input_tokens": 2787,                  # Anthropic-style
      "cache_creation_input_tokens": 10}, 2858, 17, 2787),
    ({"input": 2858, "output": 17, "total": 2875, "cache": {"read": 2787}}, 2858, 17, 2787),     # opencode
    ({"output_tokens": 3}, None, 3, None), ("garbage", None, None, None),
])
def test_every_usage_shape_counts_the_whole_prompt(usage, prompt, completion, cached):
    """The proxy's record of a reply and an agent's log of it agree on its prompt tokens, whichever of them
    counts cache reads apart (the merge pairs them by these numbers, docs/telemetry.md)."""
    from gripprobe_core.telemetry.usage import _call, call_tokens

    call = _call(usage)
    assert (call.prompt, call.completion, call.cached) == (prompt, completion, cached)
    assert call_tokens(usage) == (prompt, completion)
