"""Report test data: a real default-suite run, plus cases derived from its real cases.

The derived cases are copies of a real case directory with chosen changes (another agent, a status,
hostile agent output, 10,000 events, missing artifacts), so the reports render exactly what a run
writes, only with contents no oracle profile produces.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from conftest import SPECS, gripprobe
from gripprobe_core.models import CaseResult
from gripprobe_core.store import RunFolder

PERFECT = "reference__oracle-perfect__oracle__tool__save_file"
LAZY = "reference__oracle-lazy__oracle__tool__save_file"
HOSTILE = "<script>window.__pwned=1</script><b>x</b>"


def real_run(results_root: Path) -> RunFolder:
    """The default suite, for real: reference agent processes against the oracle backend."""
    res: subprocess.CompletedProcess = gripprobe("run", "--jobs", "4", "--results", str(results_root),
                                                 env={"GRIPPROBE_SPECS": str(SPECS)})
    assert res.returncode == 0, res.stderr[-3000:]
    return RunFolder(Path(res.stdout.strip().splitlines()[-1]))


def derive_case(run: RunFolder, template: str, case_id: str, *, agent: str | None = None, status: str | None = None,
                tags: list[str] | None = None, text: str | None = None,
                events: list[dict] | None = None, values: tuple[str, str] | None = None) -> Path:
    """Copy case ``template`` to ``case_id``. ``text`` replaces the prompt, both phases' stdout and
    stderr, the first validator's observed value and the measured tool call arguments; ``values``
    replaces the first validator's (expected, observed) and makes it fail."""
    src, dst = run.case(template), run.case(case_id)
    shutil.copytree(src, dst)
    r = CaseResult.model_validate_json((src / "case.json").read_bytes())
    key = r.key.model_copy(update={"agent": agent or r.key.agent})
    verdict = r.verdict
    if status:
        scores = {"PASS": (1.0, 1.0), "PASS_WITH_POLICY_VIOLATION": (0.0, 0.8)}.get(status, (0.0, 0.0))
        verdict = verdict.model_copy(update={"status": status, "strict_pass_score": scores[0],
                                             "overall_score": scores[1]})
    update = {"case_id": case_id, "key": key, "verdict": verdict, "tags": tags if tags is not None else r.tags}
    if text is not None:
        update["validators"] = [v.model_copy(update={"observed": text}) for v in r.validators]
        for name in ("prompt.txt", "warmup.stdout", "warmup.stderr", "measured.stdout", "measured.stderr"):
            (dst / name).write_text(text)
        lines = (dst / "artifacts" / "events.measured.jsonl").read_text().splitlines()
        out = []
        for line in lines:
            e = json.loads(line)
            if e["event_type"] == "tool_call_start":
                e["payload"]["arguments"] = {"content": text}
            out.append(json.dumps(e))
        (dst / "artifacts" / "events.measured.jsonl").write_text("\n".join(out) + "\n")
    if values is not None:
        first = r.validators[0].model_copy(update={"expected": values[0], "observed": values[1], "passed": False})
        update["validators"] = [first, *r.validators[1:]]
    if events is not None:
        (dst / "artifacts" / "events.measured.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (dst / "case.json").write_text(r.model_copy(update=update).model_dump_json(indent=2))
    return dst


def many_events(n: int, phase: str = "measured") -> list[dict]:
    """``n`` events, sequences 0..n-1: a model response followed by the start and result of one tool call."""
    out, parent = [], None
    for seq in range(n):
        if seq % 3 == 0:
            parent = f"{phase}-A-{seq}"
            out.append({"event_type": "model_response", "event_id": parent, "phase": phase, "source_tier": "A",
                        "source": "proxy", "sequence": seq, "status": "success", "latency_ms": 1.5,
                        "payload": {"text": f"turn {seq // 3}", "protocol": "chat_completions"}})
        else:
            start = seq % 3 == 1
            out.append({"event_type": "tool_call_start" if start else "tool_call_result",
                        "event_id": f"{phase}-A-{seq}", "parent_id": parent, "phase": phase,
                        "source_tier": "A", "source": "proxy", "sequence": seq,
                        "status": "started" if start else "success", "latency_ms": None if start else 0.3,
                        "payload": {"name": "shell", "raw_name": "shell", "kind": "execute",
                                    **({"arguments": {"command": f"echo {seq}"}} if start else
                                       {"output": str(seq)})}})
    return out


def aggregate_data() -> dict:
    """A small hand-built aggregate in the shape ``render_aggregate_html`` documents."""
    from gripprobe_core.models.results import STATUSES

    def cell(n, counts, strict, overall, flaky=False):
        return {"n": n, "trials": n, "counts": counts, "strict": strict, "overall": overall, "strict_ci95": None,
                "pass_at_k": {"1": strict}, "pass_hat_k": {"1": strict}, "flaky": flaky}
    return {
        "title": "GripProbe aggregate <test>", "generated_at": "2026-01-01T00:00:00Z", "gripprobe_version": "0.1.0",
        "runs": [{"run_id": "20260101T000000Z", "suite": "default", "started_at": "2026-01-01T00:00:00Z", "cases": 9}],
        "tests": ["save_file", "shell_pwd"],
        "statuses": list(STATUSES),
        "rows": [
            {"agent": "alpha", "agent_version": "1.0", "model": "m-one", "model_hash": "sha256:abc", "format": "tool",
             "hardware": "gpu-a", "n": 4, "counts": {"PASS": 3, "FAIL": 1}, "strict_pass_score": 0.75,
             "strict_ci95": [0.3, 0.95], "overall_score": 0.75, "overall_ci95": [0.3, 0.95],
             "pass_at_k": {"1": 0.75, "3": 1.0}, "pass_hat_k": {"1": 0.75, "3": 0.25}, "flaky": ["shell_pwd"],
             "tests_selected": 2, "tests_attempted": 2, "coverage": 1.0,
             "usage": {"cases": 4, "model_calls": 8, "prompt_tokens": 12000, "completion_tokens": 800,
                       "cached_tokens": None, "cost": 0.0123, "currency": "USD", "ttft_ms": 140.0,
                       "output_tokens_per_s": 42.0, "agent_s_mean": 3.5},
             "cells": {"save_file": cell(2, {"PASS": 2}, 1.0, 1.0),
                       "shell_pwd": cell(2, {"PASS": 1, "FAIL": 1}, 0.5, 0.5, flaky=True)}},
            {"agent": "beta", "agent_version": None, "model": "m-two", "model_hash": None, "format": "tool",
             "hardware": None, "n": 5, "counts": {"PASS_WITH_POLICY_VIOLATION": 4, "NO_TOOL_CALL": 1},
             "strict_pass_score": 0.0, "strict_ci95": None, "overall_score": 0.64, "overall_ci95": None,
             "pass_at_k": {}, "pass_hat_k": {}, "flaky": [], "tests_selected": 2, "tests_attempted": 1, "coverage": 0.5,
             "usage": None,
             "cells": {"save_file": cell(5, {"PASS_WITH_POLICY_VIOLATION": 4, "NO_TOOL_CALL": 1}, 0.0, 0.64),
                       "shell_pwd": cell(0, {"TOOL_UNSUPPORTED": 2}, None, None)}},
        ],
    }


def wide_aggregate_data() -> dict:
    """An aggregate as wide as the shipped catalog makes it: every test in specs/tests, six agents × three
    models (long names, a model hash), every status somewhere, one hardware profile, one format."""
    from gripprobe_core.models.results import STATUSES

    tests = sorted(p.stem for p in (SPECS / "tests").glob("*.yaml"))
    rows, k = [], 0
    for agent, version in [("reference", "0.3.0"), ("codex", "0.169.0"), ("opencode", "0.15.3"),
                           ("continue-cli", "1.5.2"), ("gptme", "0.28.3"), ("aider", "0.86.1")]:
        for model, digest in [("ollama-qwen3-coder-30b-a3b-instruct", "sha256:1234567890abcdef1234"),
                              ("oracle-error-then-recover", None), ("oracle-perfect", "sha256:abcdef")]:
            cells, total = {}, {}
            for t in tests:
                counts: dict[str, int] = {}
                for _ in range(3):
                    status = STATUSES[k % len(STATUSES)]
                    k += 1
                    counts[status] = counts.get(status, 0) + 1
                    total[status] = total.get(status, 0) + 1
                strict = counts.get("PASS", 0) / 3
                cells[t] = {"n": 3, "counts": counts, "strict": strict, "overall": strict,
                            "pass_at_k": {"1": strict, "3": 1.0 if strict else 0.0}}
            rows.append({"agent": agent, "agent_version": version, "model": model, "model_hash": digest,
                         "format": "tool", "hardware": "workstation-rtx4090", "n": 3 * len(tests), "counts": total,
                         "strict_pass_score": 0.5, "strict_ci95": [0.31, 0.69], "overall_score": 0.61,
                         "overall_ci95": [0.42, 0.77], "pass_at_k": {"1": 0.5, "3": 0.93}, "cells": cells})
    return {"title": "GripProbe aggregate", "generated_at": "2026-01-01T00:00:00Z", "gripprobe_version": "0.1.0",
            "runs": [{"run_id": "20260101T000000Z", "suite": "conformance", "started_at": "2026-01-01T00:00:00Z",
                      "cases": 3 * len(tests) * len(rows)}],
            "tests": tests, "statuses": list(STATUSES), "rows": rows}
