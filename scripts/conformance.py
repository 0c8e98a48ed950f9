"""The conformance matrix: every agent × every oracle profile, and its interaction column, rendered into
docs/conformance.md.

    .venv/bin/python scripts/conformance.py                       # run both suites, write docs/conformance.md
    .venv/bin/python scripts/conformance.py RUN_DIR INTERACTION_RUN_DIR   # only render from existing runs
    .venv/bin/python scripts/conformance.py --help

RUN_DIR / INTERACTION_RUN_DIR: a run folder (holding cases/), or a results folder holding exactly one run of
the suite (runs/<id>/, as `gripprobe run --results DIR` leaves it).

The interaction column comes from a run of the `interaction` suite (every agent × the `interaction` tests on
oracle-deny-then-recover): how the agent's driver met the policy, and each test's status.

Below the matrix, the tool-call fidelity of every cell: tier B's and tier C's calls against tier A's, tier A's
and tier B's against the oracle's ground truth (recall and precision, gripprobe_core.telemetry.fidelity;
docs/telemetry.md "Fidelity"), computed from what each case stored.

The page is generated from a real run, never typed by hand; tests/test_conformance.py runs the suite in CI,
asserts every cell against tests/conformance_expected.yaml, and checks the page equals what that run renders
(tests/test_conformance_interaction.py does the same for the interaction column: two files, so the two runs
take two test workers side by side).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from functools import lru_cache
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
    # deny-then-recover is for interaction policies: its column is the interaction run's, not a profile's;
    # repeat-loop runs until the timeout and is not in the conformance suite (tests/test_repeat_loop.py runs it)
    profiles = {k: v for k, v in EXPECTED_REFERENCE_STATUS.items() if k not in ("deny-then-recover", "repeat-loop")}
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
            **fidelity(path.parent, case),
        })
    return out


#: The fidelity tables of the page: (key of phase_fidelity, title, column label).
FIDELITY_TABLES = (("B_vs_A", "tier B against tier A", "B vs A"), ("C_vs_A", "tier C against tier A", "C vs A"),
                   ("A_vs_truth", "tier A against the oracle's ground truth", "A vs truth"),
                   ("B_vs_truth", "tier B against the oracle's ground truth", "B vs truth"))


def fidelity(case_dir: Path, case: dict) -> dict:
    """``fidelity``: {comparison: counts, recall, precision} of the case's measured phase, and ``fidelity_notes``:
    which calls tier B (and tier C, where it has any) misses or invents against tier A, and why where the
    evidence tells (gripprobe_core.telemetry.fidelity: the calls are read from the stored events, the proxy
    records only for calls written as text, the oracle's record)."""
    from gripprobe_core.telemetry.fidelity import phase_fidelity, wire_text_count

    art = case_dir / "artifacts"
    events = _jsonl(art / "events.measured.jsonl")
    truth = _jsonl(art / "oracle.measured.jsonl") if (art / "oracle.measured.jsonl").exists() else None
    text = _jsonl(art / "proxy.measured.http.jsonl") if wire_text_count(events) else []
    got = phase_fidelity(events, truth, text)
    notes = []
    for key, tier in (("B_vs_A", "B"), ("C_vs_A", "C")):
        comp = got[key]
        if tier == "C" and not comp.n_tested:
            continue  # no text markers for this agent: its misses are every call, said by the table
        off_wire = _off_wire_reason(case["key"]["agent"], case["key"]["format"])
        if comp.missed:
            notes.append(f"tier {tier} misses {len(comp.missed)} of {comp.n_reference} call(s) on the wire: "
                         + _calls_text(comp.missed, _missed_reason))
        if comp.invented:
            notes.append(f"tier {tier} shows {len(comp.invented)} call(s) the wire does not carry: "
                         + _calls_text(comp.invented, lambda c, w=off_wire: _invented_reason(c, w)))
    return {"fidelity": {k: c.tally().as_dict() for k, c in got.items()}, "fidelity_notes": notes}


def _missed_reason(call) -> str:
    why = []
    if call.error_type == "malformed_arguments":
        why.append("its arguments were not valid JSON")
    why.append("no result for it went back to the model" if call.answered is False
               else "a result went back to the model, yet the agent's output does not show the call")
    return ", ".join(why)


def _invented_reason(call, off_wire: str | None) -> str:
    if off_wire:
        return f"off the wire by the driver's calls_off_wire: {off_wire.rstrip('.')}"
    if call.arguments is None:
        return "seen only by a result whose call the wire does not carry"
    return "not requested on the wire"


def _calls_text(calls, reason) -> str:
    groups = Counter((c.raw_name or c.name or "?", reason(c)) for c in calls)
    return "; ".join(f"`{name}` ×{n} ({why})" for (name, why), n in groups.items())


@lru_cache(maxsize=None)
def _drivers() -> tuple[dict, dict]:
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.specs import load_specs

    registry = make_plugin_manager().registry
    specs = load_specs(ROOT / "specs", registry=registry)
    return registry.agents, {a: s.plugin for a, s in specs.agents.items()}


def _off_wire_reason(agent: str, fmt: str) -> str | None:
    from gripprobe_core.drivers import off_wire_reason

    drivers, plugins = _drivers()
    driver = drivers.get(plugins.get(agent, ""))
    return off_wire_reason(driver, fmt) if driver is not None else None


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


def _is_interaction_note(line: str) -> bool:
    return line.startswith("- **") and any(f" × {t}** (" in line for t in INTERACTION_TESTS)


def _cells(row: str) -> list[str]:
    """A table row's cells, stripped (no cell of the page holds a ``|``)."""
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _main_table(lines: list[str]) -> range:
    """The indexes of the matrix table's rows (below its header and rule), up to the blank line after it."""
    start = next(i for i, line in enumerate(lines) if line.startswith("| agent | version | format |")) + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return range(start, end)


def matrix_part(page: str) -> list[str]:
    """The page without what the interaction run renders (the table's last column, the rows of agents only the
    interaction suite runs, the notes on interaction tests): what a conformance run alone decides."""
    lines = page.split("\n")
    rows = _main_table(lines)
    out = []
    for i, line in enumerate(lines):
        if i in rows:
            cells = _cells(line)
            if cells[1:3] == ["", ""]:  # an agent only the interaction suite runs
                continue
            line = " | ".join(cells[:-1])
        elif _is_interaction_note(line):
            continue
        out.append(line)
    return out


def interaction_part(page: str) -> dict[str, list[str]]:
    """Per agent, what the interaction run renders of the page: the table's last cell, then its notes on the
    interaction tests (matrix_part is the rest)."""
    lines = page.split("\n")
    out: dict[str, list[str]] = {}
    for i in _main_table(lines):
        cells = _cells(lines[i])
        out.setdefault(cells[0], []).append(cells[-1])
    for line in lines:
        if _is_interaction_note(line):
            out.setdefault(line[4:line.index(" × ")], []).append(line)
    return out


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
    lines += render_fidelity(agents, profiles)
    if "mini-swe-agent" in agents:
        lines += [TEXT_PATH]
    lines += real_model_section()
    return "\n".join(lines)


def real_model_section() -> list[str]:
    """The real model's table, from its recording (tests/fixtures/real_model; scripts/real_model.py)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import real_model

    return ["", "## A real model: recorded, and replayed in CI", "",
            "The oracle above plays scripted behaviours; this is what a real model did. Each agent ran the sanity",
            "tests once (`--no-warmup`, one case at a time) against the model below; `scripts/real_model.py record`",
            "stored every exchange (scrubbed of this machine's paths) in `tests/fixtures/real_model/`, and",
            "`tests/test_real_model_replay.py` replays them with the real agents on the replay backend",
            "(`kind: replay`, docs/backends.md) and checks each verdict against this table. Rerun it with the model",
            "and its server: `scripts/real_model.py record` (then `scripts/conformance.py` to render this page).",
            "",
            *real_model.render_table(real_model.RECORDING).rstrip("\n").split("\n")]


def _ratio(matched: int, n: int) -> str:
    return f"{matched}/{n}" if n else "—"


def _decimal(value: float | None, n: int) -> str:
    return f"{value:.2f} ({n})" if value is not None else f"— ({n})"


def render_fidelity(agents: dict[str, dict], profiles: list[str]) -> list[str]:
    """The page's fidelity section: per agent over its profiles, per cell, and the notes on what tier B (or C)
    misses or invents."""
    from gripprobe_core.telemetry.fidelity import Tally

    lines = [
        "## Tool-call fidelity", "",
        "How many of the tool calls one source saw another saw too, in the measured phase of every cell above,",
        "computed by `gripprobe_core.telemetry.fidelity` from what each case stored (its merged events, whose",
        "`seen_by` names every tier that saw a call; the proxy records for calls written as text; the oracle's",
        "record). A tested call is *matched* with a reference call by the `tool_call_id` both carry, else by",
        "normalized tool name and arguments in order (docs/telemetry.md \"Fidelity\" has the rule); recall is",
        "matched / the reference's calls, precision matched / the tested source's calls. Tier B and tier C are",
        "compared with the structured calls (a call the model wrote as text is no call an agent was asked to run);",
        "tier A with the whole ground truth, calls written as text included. Tier B is the agent's structured",
        "output, tier C its plain text (markers); an agent whose driver reads no markers has no tier C.", "",
        "Per agent, over its profiles: recall and precision (n = reference calls, tested calls).", "",
        "| agent | " + " | ".join(f"{label} {m}" for _, _, label in FIDELITY_TABLES
                                  for m in ("recall", "precision")) + " |",
        "|---|" + "---|" * (2 * len(FIDELITY_TABLES)),
    ]
    for agent in sorted(agents):
        row = []
        for key, _, _ in FIDELITY_TABLES:
            total = Tally()
            for c in agents[agent]["cells"].values():
                f = c["fidelity"].get(key)
                if f:
                    total.add(Tally(f["matched"], f["missed"], f["invented"], f["cases"]))
            row += [_decimal(total.recall, total.matched + total.missed),
                    _decimal(total.precision, total.matched + total.invented)]
        lines.append(f"| {agent} | " + " | ".join(row) + " |")
    lines += ["", "Per cell: `matched/reference calls · matched/tested calls` (— where that side has no call; a lone",
              "— where neither has).", ""]
    for key, title, _ in FIDELITY_TABLES:
        lines += [f"### {title[0].upper()}{title[1:]}", "", "| agent | " + " | ".join(profiles) + " |",
                  "|---|" + "---|" * len(profiles)]
        for agent in sorted(agents):
            row = []
            for p in profiles:
                f = (agents[agent]["cells"].get(p) or {}).get("fidelity", {}).get(key)
                if f is None:
                    row.append("")
                elif not f["n_reference"] and not f["n_tested"]:
                    row.append("—")
                else:
                    row.append(f"{_ratio(f['matched'], f['n_reference'])} · {_ratio(f['matched'], f['n_tested'])}")
            lines.append(f"| {agent} | " + " | ".join(row) + " |")
        lines.append("")
    lines += ["### Where tier B (or tier C) misses or invents calls, and why", ""]
    notes = []
    for agent in sorted(agents):
        same: dict[str, list[str]] = {}
        for p in profiles:
            for note in (agents[agent]["cells"].get(p) or {}).get("fidelity_notes", []):
                same.setdefault(note, []).append(p)
        notes += [f"- **{agent} × {', '.join(ps)}**: {note}" for note, ps in same.items()]
    lines += (notes or ["- none"]) + [""]
    return lines


def _run_suite(suite: str) -> Path | None:
    res = subprocess.run([str(Path(sys.executable).parent / "gripprobe"), "run", "--suite", suite],
                         cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return Path(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else None


def _run_folder(value: str, what: str) -> Path:
    """A run folder (holding cases/), or a results folder holding exactly one run; exit 2 with one line else."""
    path = Path(value)
    if (path / "cases").is_dir():
        return path
    runs = sorted(p for p in (path / "runs").glob("*") if (p / "cases").is_dir()) if (path / "runs").is_dir() else []
    if len(runs) == 1:
        return runs[0]
    found = f"it holds {len(runs)} runs" if runs else "it holds no cases/ folder and no runs/<id>/cases/"
    raise SystemExit(_usage_error(f"{what} {value}: not a run folder ({found}); pass a run folder "
                                  f"(results/runs/<id>, holding cases/) or a results folder holding one run"))


def _usage_error(message: str) -> int:
    print(f"conformance.py: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="conformance.py", description="Run the conformance and interaction suites (or take existing runs) "
        "and write docs/conformance.md: the agent × oracle-profile matrix, its interaction column and the "
        "tool-call fidelity of every cell.")
    parser.add_argument("run_dir", nargs="?", metavar="RUN_DIR",
                        help="an existing run of the conformance suite (a run folder or a results folder holding "
                             "one run): render from it instead of running the suite")
    parser.add_argument("interaction_dir", nargs="?", metavar="INTERACTION_RUN_DIR",
                        help="an existing run of the interaction suite (without it, given RUN_DIR, the "
                             "interaction column is left empty)")
    parser.add_argument("--output", type=Path, default=PAGE, help=f"the page to write (default: {PAGE})")
    args = parser.parse_args(argv)
    run_dir = _run_folder(args.run_dir, "RUN_DIR") if args.run_dir else _run_suite(SUITE)
    interaction_dir = (_run_folder(args.interaction_dir, "INTERACTION_RUN_DIR") if args.interaction_dir
                       else (_run_suite(INTERACTION_SUITE) if not args.run_dir else None))
    if run_dir is None or (not args.run_dir and interaction_dir is None):
        return 1
    args.output.write_text(render(cells(run_dir), expectations(), interaction_cells(interaction_dir)),
                           encoding="utf-8")
    print(f"wrote {args.output} from {run_dir}" + (f" and {interaction_dir}" if interaction_dir else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
