"""``gripprobe compare``: two runs (or two sets of runs, or two agents or models of one run), case by case."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..errors import UserError
from ..jsonl import dumps
from ..textsafe import safe_cell, safe_name
from .params import FiniteFloat, PathArg

_CONTEXT = {"help_option_names": ["-h", "--help"]}


def _resolve(arg: str, results: Path, option: str) -> Path:
    """A run directory given as a path, or as a run id under ``--results``."""
    from ..store import check_run_dir

    path = Path(arg)
    if not path.exists() and os.sep not in arg and (results / "runs" / arg).exists():
        path = results / "runs" / arg
    return check_run_dir(path, f"{option} {arg}")


@click.command("compare", context_settings=_CONTEXT)
@click.argument("runs", nargs=-1, metavar="[RUN_A] [RUN_B]", type=PathArg(path_type=str))
@click.option("--a", "-A", "more_a", multiple=True, metavar="RUN", type=PathArg(path_type=str),
              help="A run of side A (repeatable: several runs pool their trials).")
@click.option("--b", "-B", "more_b", multiple=True, metavar="RUN", type=PathArg(path_type=str), help="A run of side B (repeatable).")
@click.option("--agent-a", help="Side A: only this agent's cases (with --agent-b: agent against agent; the agent "
                                "and format then leave the pairing key).")
@click.option("--agent-b", help="Side B: only this agent's cases.")
@click.option("--model-a", help="Side A: only this model's cases (with --model-b: model against model).")
@click.option("--model-b", help="Side B: only this model's cases.")
@click.option("--results", type=PathArg(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where a RUN given as a run id is looked up (<results>/runs/<id>).")
@click.option("--output", "-o", type=PathArg(file_okay=False, path_type=Path),
              help="Also write compare.html, compare.md and compare.json into this folder (created if missing).")
@click.option("--json", "as_json", is_flag=True, help="Print compare.json's content instead of the Markdown.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a cell regressed (its pass rate in B is below A's): for a CI job.")
@click.option("--significance", type=FiniteFloat(0.0, 1.0, min_open=True), metavar="P",
              help="With --fail-on-regression: count a regressed cell only when its McNemar p-value is below P "
                   "(default: every drop counts).")
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="The public key runs must be signed with (fingerprint sha256:…, base64, or a file; repeatable). "
                   "Default: this machine's harness key, else each run's own.")
def compare_command(runs, more_a, more_b, agent_a, agent_b, model_a, model_b, results, output, as_json,
                    fail_on_regression, significance, keys) -> None:
    """Compare side A with side B case by case: flips first, McNemar's exact test, paired bootstrap intervals.

    RUN_A and RUN_B are run directories (or run ids under --results). One RUN with --agent-a/--agent-b (or
    --model-a/--model-b) compares two agents (models) of the same run. Prints the Markdown report (or
    --json); --output also writes HTML, Markdown and JSON. Every run is checked against its signatures
    first: a case that changed after its run is left out and named. See docs/scores.md.
    """
    from ..reports.compare import (Side, check_output, compare_sides, regressed_cells, render_compare_md,
                                   significance_note, write_compare)

    if len(runs) > 2:
        raise UserError(f"compare takes at most two runs as arguments (got {len(runs)}); pass more with --a/--b")
    side_a = list(more_a) + ([runs[0]] if runs else [])
    side_b = list(more_b) + ([runs[1]] if len(runs) == 2 else [])
    narrowed = any((agent_a, agent_b, model_a, model_b))
    if not side_b and len(runs) == 1 and not more_a and narrowed:
        side_b = [runs[0]]  # one run, two of its agents (or models)
    if not side_a or not side_b:
        raise UserError("compare needs two sides: `gripprobe compare RUN_A RUN_B`, or --a RUN … --b RUN …, or one "
                        "RUN with --agent-a X --agent-b Y (or --model-a/--model-b)")
    dirs_a = tuple(_resolve(r, results, "side A") for r in side_a)
    dirs_b = tuple(_resolve(r, results, "side B") for r in side_b)
    if set(dirs_a) == set(dirs_b) and (agent_a, model_a) == (agent_b, model_b) and narrowed:
        raise UserError("both sides select the same cases; give --agent-a/--agent-b (or --model-a/--model-b) "
                        "different values")
    a = Side(_label(dirs_a, agent_a, model_a), dirs_a, agent_a, model_a)
    b = Side(_label(dirs_b, agent_b, model_b), dirs_b, agent_b, model_b)
    out = check_output(output, (*dirs_a, *dirs_b)) if output is not None else None
    from .verify_cmd import resolve_anchors

    anchors, label = resolve_anchors(keys)
    # case pages are linked relative to the output folder, else to the current one (where the printed Markdown
    # would be saved); stdout then says the same as compare.md
    data = compare_sides(a, b, keys=anchors, key_label=label, base=out, significance=significance)
    if out is not None:
        try:
            for p in write_compare(data, out):
                click.echo(safe_name(p), err=True)
        except OSError as exc:
            from ..store.roots import explain_os_error

            target = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, (str, bytes)) else out
            raise UserError(explain_os_error(f"--output {output}", target, exc, creating=True)) from None
    click.echo(dumps(data, indent=2) if as_json else render_compare_md(data), nl=as_json)
    regressed = regressed_cells(data, significance)
    s = data["summary"]
    click.echo(f"compare: {s['cells']} cells, regressed {s['regressed']}, improved {s['improved']}; McNemar p = "
               f"{s['mcnemar_p']}", err=True)
    if any(r["status"] != "verified" for side in ("a", "b") for r in data[side]["signatures"]):
        from ..reports.compare import signatures_line

        click.echo(f"warning: {signatures_line(data)}", err=True)
    note = significance_note(data)
    if note:
        click.echo(f"warning: {note}", err=True)
    if fail_on_regression and regressed:
        names = ", ".join(" · ".join(safe_cell(c[f]) for f in (*data["pairing"][:-2], "test")) for c in regressed[:5])
        more = f" and {len(regressed) - 5} more" if len(regressed) > 5 else ""
        click.echo(f"regression: {len(regressed)} cell(s) regressed: {names}{more}", err=True)
        raise SystemExit(1)


def _label(dirs: tuple[Path, ...], agent: str | None, model: str | None) -> str:
    base = safe_name(dirs[0].name) if len(dirs) == 1 else f"{len(dirs)} runs"
    return base + "".join(f" [{v}]" for v in (agent, model) if v)
