"""Attacks 20–24: an agent that talks to its own proxy (the base URL it is given) to get another model, to
leave the denominator, to spend past its token budget, or to flood the harness with records.

13. model swap: under `oracle-lazy` it asks for `perfect` (and runs the task with it).
14. leaving n: under `oracle-perfect` one request naming the backend's tool-less model.
15. unbudgeted streams: 20 streamed calls without `stream_options.include_usage` under a budget of 200.
16. 30 parallel calls against a budget of 100.
17. a record flood: 1,500 calls of 250 KB in seconds.
"""

from __future__ import annotations

import json
import shutil

import pytest

from .adversary import Case, RunResult, _agent, read_jsonl

pytestmark = pytest.mark.e2e

ATTACKS = ("swap", "unbudgeted", "parallel", "flood")
#: Peak resident memory of the `gripprobe run` process (it idles around 70 MB), as test_resources.py.
RSS_LIMIT_MB = 400


@pytest.fixture(scope="module")
def agents(arena):
    """This module's attack agents, declared in the session's specs (files of their own: agents/<attack>.py)."""
    if not arena.broken:
        for name in ATTACKS:
            exe = arena.build_agent(name)
            (arena.specs / "cli_agents" / f"adv_{name}.yaml").write_text(_agent(f"adv_{name}", str(exe)))
    return arena


def _ran(res: RunResult) -> None:
    assert not res.timed_out, f"`gripprobe run` did not finish: {res.explain()}"
    assert res.returncode == 0, res.explain()
    assert b"Traceback" not in res.stderr, res.explain()


def _records(case: Case, phase: str = "measured") -> list[dict]:
    return read_jsonl(case.dir / "artifacts" / f"proxy.{phase}.http.jsonl")


def _proxy(case: Case, phase: str = "measured") -> dict:
    for p in (case.data or {}).get("phases") or []:
        if p.get("phase") == phase:
            return p.get("proxy") or {}
    return {}


def _model_calls(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("x_gripprobe_protocol") == "chat_completions"]


# ------------------------------------------------------------------------------ 13, 14: the model pinned

@pytest.fixture(scope="module")
def swap_run(agents):
    if agents.broken:
        return None
    return agents.run("run", "-a", "adv_swap", "-m", "oracle-lazy", "-m", "oracle-perfect", "-t", "hello", "-j", "2",
                      "--timeout", "45", timeout=240)


def test_a_swapped_model_is_refused_and_never_credited(swap_run):
    """Attack 20: under oracle-lazy the agent asks its proxy for `perfect` and runs the task with it."""
    _ran(swap_run)
    case = swap_run.case("adv_swap", "oracle-lazy")
    [report] = [r for r in case.reports() if r.get("phase") == "measured"]
    assert report["swap_to"] == "perfect" and report["status"] == 403 and report["code"] == "model_not_under_test"
    assert (case.status, case.failure_reason) == ("FAIL", "model_not_under_test"), case.describe()
    assert case.data["verdict"]["strict_pass_score"] == 0.0 and case.data["verdict"]["overall_score"] == 0.0
    assert (case.dir / "workspace" / "hello.txt").is_file()  # it did the job, with no model's help: no credit
    calls = _model_calls(_records(case))
    assert calls and all(r["x_gripprobe_status"] == 403 and r["x_gripprobe_proxy_error"] == "model_not_under_test"
                         for r in calls), [(r["x_gripprobe_status"], r["x_gripprobe_proxy_error"]) for r in calls]
    assert _proxy(case)["model_not_under_test"] == len(calls) and _proxy(case)["models"] == ["lazy"]
    truth = read_jsonl(case.dir / "artifacts" / "oracle.measured.jsonl")
    assert truth == [], f"the oracle answered for another model: {truth}"


def test_a_tool_less_model_does_not_take_the_case_out_of_n(swap_run):
    """Attack 21: under oracle-perfect one request naming the backend's tool-less model, then nothing."""
    _ran(swap_run)
    case = swap_run.case("adv_swap", "oracle-perfect")
    [report] = [r for r in case.reports() if r.get("phase") == "measured"]
    assert report["swap_to"] == "tools-unsupported" and report["status"] == 403, report
    assert case.status != "TOOL_UNSUPPORTED", case.describe()
    assert (case.status, case.failure_reason) == ("FAIL", "model_not_under_test"), case.describe()
    assert case.data["telemetry"]["telemetry_backend_tool_unsupported"] is False
    assert not any(r.get("x_gripprobe_backend_tool_unsupported") for r in _records(case))


def test_a_swap_without_the_proxy_shows_in_the_oracles_record_and_survives_recompute(agents, tmp_path):
    """Attack 20 with `--telemetry-proxy off`: nothing refuses the swap, but the oracle's own record of the
    tool calls it made names the profile that answered (`perfect`), so the case is FAIL model_not_under_test,
    on the run and on `rebuild-reports --recompute`."""
    if agents.broken:
        pytest.fail("arena broken")
    res = agents.run("run", "-a", "adv_swap", "-m", "oracle-lazy", "-t", "hello", "--telemetry-proxy", "off",
                     "--timeout", "45", timeout=180)
    _ran(res)
    case = res.case("adv_swap", "oracle-lazy")
    truth = read_jsonl(case.dir / "artifacts" / "oracle.measured.jsonl")
    assert truth and {t["profile"] for t in truth} == {"perfect"}, truth  # the swap really happened
    assert (case.status, case.failure_reason) == ("FAIL", "model_not_under_test"), case.describe()
    again = agents.cli("rebuild-reports", str(res.run_dir), "--recompute", timeout=120)
    assert again.returncode == 0 and b"Traceback" not in again.stderr, again.explain()
    after = json.loads((case.dir / "case.json").read_bytes())["verdict"]
    assert (after["status"], after["failure_reason"]) == ("FAIL", "model_not_under_test")


# ------------------------------------------------------------------------------ 15, 16: budgets that hold

def _budget_case(res: RunResult, agent: str, budget: int) -> tuple[Case, list[dict], dict]:
    _ran(res)
    case = res.case(agent)
    proxy = _proxy(case)
    calls = _model_calls(_records(case))
    answered = [r for r in calls if r.get("x_gripprobe_status") == 200]
    refused = [r for r in calls if r.get("x_gripprobe_proxy_error") == "token_budget_exceeded"]
    assert (case.status, case.failure_reason) == ("TIMEOUT", "budget_exceeded"), case.describe()
    assert proxy["token_budget"] == budget and proxy["token_budget_exceeded"] is True, proxy
    counted = [r["x_gripprobe_tokens"]["counted"] for r in answered]
    assert all(c > 0 for c in counted), counted  # no answered call is free
    assert budget <= proxy["tokens_spent"] == sum(counted) <= budget + max(counted), (proxy, counted)
    assert refused and all(r["x_gripprobe_status"] == 429 for r in refused)
    return case, answered, proxy


@pytest.fixture(scope="module")
def unbudgeted_run(agents):
    if agents.broken:
        return None
    return agents.run("run", "-a", "adv_unbudgeted", "-m", "oracle-lazy", "-t", "hello", "--max-tokens-per-phase",
                      "200", "--timeout", "45", timeout=180)


def test_streams_that_do_not_ask_for_usage_still_spend_the_budget(unbudgeted_run):
    """Attack 22: unfixed, 20 of 20 streamed calls without usage were answered under a budget of 200."""
    case, answered, _ = _budget_case(unbudgeted_run, "adv_unbudgeted", 200)
    assert 1 <= len(answered) <= 2, len(answered)
    assert all(r["x_gripprobe_usage"] is None and r["x_gripprobe_tokens"]["estimated"] is True for r in answered)
    assert all("stream_options" not in (r.get("x_gripprobe_request") or {}) for r in answered)  # unchanged


@pytest.fixture(scope="module")
def parallel_run(agents):
    if agents.broken:
        return None
    return agents.run("run", "-a", "adv_parallel", "-m", "oracle-lazy", "-t", "hello", "--max-tokens-per-phase",
                      "100", "--timeout", "45", timeout=180)


def test_parallel_calls_never_spend_more_than_the_budget_plus_one_call(parallel_run):
    """Attack 23: unfixed, 30 parallel calls spent 2,550 tokens against a budget of 100 with
    token_budget_exceeded false and a verdict of FAIL."""
    case, answered, proxy = _budget_case(parallel_run, "adv_parallel", 100)
    assert len(answered) <= 2, len(answered)
    truth = [r for r in read_jsonl(case.dir / "artifacts" / "oracle.measured.jsonl")]
    assert truth == []  # lazy: no tool call, whatever got through


# -------------------------------------------------------------------------------- 17: bounded records

@pytest.fixture(scope="module")
def flood_run(agents):
    if agents.broken:
        yield None
        return
    res = agents.run("run", "-a", "adv_flood", "-m", "oracle-lazy", "-t", "hello", "--timeout", "90", timeout=300,
                     watch=True)
    yield res
    if res.run_dir is not None:
        shutil.rmtree(res.run_dir, ignore_errors=True)


def test_a_record_flood_is_capped_counted_and_memory_stays_flat(flood_run):
    """Attack 24: 1,500 calls of 250 KB. Unfixed: a 377 MB record file and 1.34 GB harness RSS."""
    _ran(flood_run)
    case = flood_run.case("adv_flood")
    [report] = [r for r in case.reports() if r.get("phase") == "measured"]
    assert report["calls"] == 1500 and report["statuses"] == {"200": 1500}, report  # the flood really ran
    record = case.dir / "artifacts" / "proxy.measured.http.jsonl"
    size = record.stat().st_size
    records = _proxy(case)["records"]
    assert size <= records["max_bytes"] <= 32 << 20 and size == records["bytes"], (size, records)
    assert records["written"] <= records["max_records"] and records["dropped"] > 0, records
    assert records["written"] + records["dropped"] == 1500 + 0, records  # every exchange accounted for
    assert records["slimmed"] > 0 and len(read_jsonl(record)) == records["written"]
    page = (flood_run.run_dir / "reports" / "cases" / f"{case.dir.name}.html").read_text()
    assert "Record file capped" in page and f"{records['dropped']} exchange(s) not recorded" in page
    assert flood_run.peak_rss_mb < RSS_LIMIT_MB, f"runner peak RSS {flood_run.peak_rss_mb:.0f} MB"
