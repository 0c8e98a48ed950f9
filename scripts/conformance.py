"""The conformance matrix: every agent × every oracle profile, and its interaction column, rendered into
docs/conformance.md.

    .venv/bin/python scripts/conformance.py                       # run both suites, write docs/conformance.md
    .venv/bin/python scripts/conformance.py RUN_DIR INTERACTION_RUN_DIR   # only render from existing runs

The interaction column comes from a run of the `interaction` suite (every agent × the `interaction` tests on
oracle-deny-then-recover): how the agent's driver met the policy, and each test's status.

The page is generated from a real run, never typed by hand; tests/test_conformance.py runs the suite in CI,
asserts every cell against tests/conformance_expected.yaml, and checks the page equals what that run renders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ROOT / "tests" / "conformance_expected.yaml"
PAGE = ROOT / "docs" / "conformance.md"
SUITE = "conformance"
INTERACTION_SUITE = "interaction"
#: The interaction tests, in the column's order (their policies).
INTERACTION_TESTS = {"shell_denied": "scripted", "save_file_denied": "auto-deny"}


def expectations() -> dict:
    from gripprobe_core.oracle.profiles import EXPECTED_REFERENCE_STATUS
    data = YAML(typ="safe").load(EXPECTED.read_text()) or {}
    # deny-then-recover is for interaction policies: its column is the interaction run's, not a profile's
    profiles = {k: v for k, v in EXPECTED_REFERENCE_STATUS.items() if k != "deny-then-recover"}
    return {"default": profiles, "overrides": data.get("overrides") or {},
            "interaction": data.get("interaction") or {}}


def expected_interaction(exp: dict, agent: str, test: str) -> tuple[str, str | None]:
    """The expected status of an interaction cell: PASS unless the agent's entry says otherwise (with why)."""
    over = (exp["interaction"].get(agent) or {}).get(test)
    if over:
        return over["status"], over.get("why")
    return "PASS", None


def interaction_cells(run_dir: Path | None) -> dict[str, dict]:
    """agent → {how, applied, reason, cells: {test: {status, requests, denied}}} from an interaction run."""
    out: dict[str, dict] = {}
    if run_dir is None:
        return out
    for path in sorted((run_dir / "cases").glob("*/case.json")):
        case = json.loads(path.read_text())
        if case["key"].get("trial", 1) != 1 or case["key"]["test"] not in INTERACTION_TESTS:
            continue
        ia = case.get("interaction") or {}
        a = out.setdefault(case["key"]["agent"], {"how": None, "applied": {}, "reason": None, "cells": {}})
        a["applied"][case["key"]["test"]] = bool(ia.get("applied"))
        if ia.get("applied"):
            a["how"] = ia.get("how")
        elif ia.get("reason"):
            a["reason"] = ia.get("reason")
        a["cells"][case["key"]["test"]] = {"status": case["verdict"]["status"], "requests": ia.get("requests", 0),
                                           "denied": ia.get("denied", 0)}
    return out


def expected_status(exp: dict, agent: str, profile: str) -> tuple[str, str | None]:
    over = exp["overrides"].get(agent, {}).get(profile)
    if over:
        return over["status"], over.get("why")
    return exp["default"][profile][0], None


def cells(run_dir: Path) -> list[dict]:
    out = []
    for path in sorted((run_dir / "cases").glob("*/case.json")):
        case = json.loads(path.read_text())
        if case["key"].get("trial", 1) != 1:  # a run with --trials: the page shows each cell's first trial
            continue
        art = path.parent / "artifacts"
        truth = _jsonl(art / "oracle.measured.jsonl")
        records = _jsonl(art / "proxy.measured.http.jsonl")
        out.append({
            "agent": case["key"]["agent"], "format": case["key"]["format"],
            "profile": case["key"]["model"].removeprefix("oracle-"), "status": case["verdict"]["status"],
            "version": case.get("agent_version") or "built-in",
            "tier_a": sum(r.get("x_gripprobe_tool_call_count", 0) for r in records),
            "tier_a_text": sum(r.get("x_gripprobe_tool_call_nonstructured_count", 0) for r in records),
            "truth": sum(1 for t in truth if t.get("structured", True)),
            "truth_text": sum(1 for t in truth if not t.get("structured", True)),
            "tier": case["telemetry"]["telemetry_source_tier"],
        })
    return out


def _jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    except OSError:
        return []


TEXT_PATH = """## How GripProbe reads mini-swe-agent (actions as shell blocks in text)

mini-swe-agent has one tool, a shell, and two ways to ask for it. The `tool` format (its row above) uses its
tool-calling model class: each action is a structured `bash` call, the proxy sees it at tier A with its id,
the oracle's ground truth lists exactly those ids, and the trajectory (tier B) confirms each one ran, with the
same id and the command's exit code. Its verdicts read as any tool-calling agent's.

The `markdown` format is mini's text protocol (`--model-class litellm_textbased`): no tools are offered and
each reply must hold exactly one fenced `mswea_bash_command` block, which mini runs with `/bin/sh`.
GripProbe's text-embedded tool path (the proxy's scanner for calls *written as text*) counts a model-native
call syntax that a server failed to parse (`<tool_call>{…}`, `<function=…>`, JSON call objects) and calls
it malformed, because such text means the server did not recognise a call. mini's block is not that: it
is exactly what mini asked for, like aider's edit blocks or gptme's ```` ```save ```` blocks. So tier A
counts no call for it, and the driver declares the format in `calls_off_wire`: the commands in the
trajectory, with their exit codes, are tier-B tool events that confirm tool use on their own (marked tier B
in every report; the wire only shows that the reply text held the block). What the verdicts mean there:

- **PASS**: the validators passed and a command mini really ran is on record (a write is a heredoc
  through the shell: mini has no other way to write).
- **NO_TOOL_CALL**: the validators failed and no command ran. A reply without exactly one block is a format
  error; mini asks again and gives up (exit 0) after three in a row, so a model that only talks costs three
  requests. `no_tool_call_observed`: the replies held no action; `protocol_malformed`: they tried one mini
  could not read (an unclosed block, several blocks). A cut-short block (`malformed-args`) is therefore
  NO_TOOL_CALL, not FAIL, and a backend that rejects tools (`tools-unsupported`) serves the text format
  like any other (PASS), as for aider.
- **FAIL** `tool_retry_loop`: the same failing command three times in a row. **SHELL_ERROR**: only a model
  call that failed after mini's retries (it exits 1 then, and 0 otherwise).

The closing `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` with which mini submits is a tool call like any
other, not a reference action. The plugin's end-to-end tests (`plugins/gripprobe_miniswe/tests`) run the
markdown format against the oracle.
"""


def _interaction_text(a: dict | None) -> str:
    if a is None:
        return "—"
    how = a["how"] or "not applied"
    parts = [f"{INTERACTION_TESTS[t]} {a['cells'][t]['status']}" for t in INTERACTION_TESTS if t in a["cells"]]
    return f"{how}: " + ", ".join(parts)


def render(run_cells: list[dict], exp: dict, interaction: dict[str, dict] | None = None) -> str:
    interaction = interaction or {}
    profiles = list(exp["default"])
    agents: dict[str, dict] = {}
    for c in run_cells:
        agents.setdefault(c["agent"], {"format": c["format"], "version": c["version"], "cells": {}})
        agents[c["agent"]]["cells"][c["profile"]] = c
    lines = [
        "# Conformance: every agent × every oracle profile",
        "",
        "Generated by `scripts/conformance.py` from a real run of the `conformance` suite (test `save_file`,",
        "recording proxy in auto mode, the real agent binaries at their pinned versions). Do not edit by hand:",
        "`tests/test_conformance.py` runs the suite in CI, asserts every cell's expected status",
        "(`tests/conformance_expected.yaml`) and fails when this page differs from what the run renders.",
        "",
        "A cell shows the observed status; `≠` marks one that differs from its expectation. In every cell the",
        "tool calls seen at tier A (structured + written as text) equal the oracle's ground truth.",
        "The last column comes from a run of the `interaction` suite (oracle-deny-then-recover): how the",
        "agent's driver met the interaction policy (session, native, or not applied) and the status of",
        "`shell_denied` (scripted: the shell denied) and `save_file_denied` (auto-deny); docs/interaction.md.",
        "",
        "| agent | version | format | " + " | ".join(profiles) + " | interaction |",
        "|---|---|---|" + "---|" * len(profiles) + "---|",
    ]
    notes = []
    for agent in sorted(agents):
        a = agents[agent]
        row = []
        for p in profiles:
            c = a["cells"].get(p)
            want, why = expected_status(exp, agent, p)
            if c is None:
                row.append("—")
                continue
            row.append(c["status"] if c["status"] == want else f"{c['status']} ≠ {want}")
            if why:
                notes.append(f"- **{agent} × {p}**: expected {want} — {why}")
        ia = interaction.get(agent)
        shown = _interaction_text(ia)
        for test in INTERACTION_TESTS:
            want, why = expected_interaction(exp, agent, test)
            got = (ia or {}).get("cells", {}).get(test)
            if got is not None and got["status"] != want:
                shown += f" ({test} ≠ {want})"
            if why:
                notes.append(f"- **{agent} × {test}** ({INTERACTION_TESTS[test]}): expected {want} — {why}")
        lines.append(f"| {agent} | {a['version']} | {a['format']} | " + " | ".join(row) + f" | {shown} |")
    extra = sorted(set(interaction) - set(agents))  # agents only the interaction suite runs (ACP drivers)
    for agent in extra:
        shown = _interaction_text(interaction[agent])
        for test in INTERACTION_TESTS:
            want, why = expected_interaction(exp, agent, test)
            got = interaction[agent]["cells"].get(test)
            if got is not None and got["status"] != want:
                shown += f" ({test} ≠ {want})"
            if why:
                notes.append(f"- **{agent} × {test}** ({INTERACTION_TESTS[test]}): expected {want} — {why}")
        lines.append(f"| {agent} | | | " + " | ".join("" for _ in profiles) + f" | {shown} |")
    lines += ["", "## Where an agent differs from the reference expectation, and why", ""]
    lines += notes or ["- none"]
    lines += ["", "Expectations by profile (the reference agent's): see docs/oracle.md.", ""]
    if "mini-swe-agent" in agents:
        lines += [TEXT_PATH]
    return "\n".join(lines)


def _run_suite(suite: str) -> Path | None:
    res = subprocess.run([str(Path(sys.executable).parent / "gripprobe"), "run", "--suite", suite],
                         cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return Path(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else None


def main(argv: list[str]) -> int:
    run_dir = Path(argv[0]) if argv else _run_suite(SUITE)
    interaction_dir = Path(argv[1]) if len(argv) > 1 else (_run_suite(INTERACTION_SUITE) if not argv else None)
    if run_dir is None or (not argv and interaction_dir is None):
        return 1
    PAGE.write_text(render(cells(run_dir), expectations(), interaction_cells(interaction_dir)), encoding="utf-8")
    print(f"wrote {PAGE} from {run_dir}" + (f" and {interaction_dir}" if interaction_dir else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
