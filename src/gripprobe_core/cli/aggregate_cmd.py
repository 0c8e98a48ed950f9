"""``gripprobe aggregate-reports``: one sanitized publication report across many runs (docs/aggregate.md)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UserError
from ..textsafe import safe_name
from .params import PathArg

_CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.command("aggregate-reports", context_settings=_CONTEXT)
@click.option("--runs-root", "runs_roots", multiple=True, required=True,
              type=PathArg(file_okay=False, path_type=Path),
              help="A results root (holding runs/), a runs/ folder or one run directory (repeatable).")
@click.option("--output", "-o", required=True, type=PathArg(file_okay=False, path_type=Path),
              help="Folder for index.html, aggregate.json and aggregate.md (created if missing; nothing else "
                   "in it is touched).")
@click.option("--agent", "-a", "agents", multiple=True, help="Only these agents (glob, repeatable).")
@click.option("--model", "-m", "models", multiple=True, help="Only these models (glob, repeatable).")
@click.option("--format", "-f", "formats", multiple=True, help="Only these formats (glob, repeatable).")
@click.option("--test", "-t", "tests", multiple=True, help="Only these tests (glob or tag:<tag>, repeatable).")
@click.option("--hardware", "hardware", multiple=True,
              help="Only these hardware profiles (glob, repeatable; 'none' matches cases without one).")
@click.option("--run", "runs", multiple=True, help="Only these run ids (glob, repeatable).")
@click.option("--sort", type=click.Choice(["strict", "overall", "n", "name"]), default="strict", show_default=True,
              help="Row order: best strict (or overall) score first, most cases first, or by name.")
@click.option("--title", default="GripProbe aggregate report", show_default=True, help="Report title.")
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="The public key runs must be signed with (fingerprint sha256:…, base64, or a file; repeatable). "
                   "Default: this machine's harness key, else each run's own.")
@click.option("--verified-only", is_flag=True,
              help="Leave out runs that are not signed, are signed by another key or whose own files changed "
                   "(cases that changed after their run are always left out).")
@click.option("--jobs", "-j", type=click.IntRange(min=1, max=64), default=None,
              help="Worker processes reading runs side by side (and writing the page's rows). Default: one per idle "
                   "CPU (CPUs less the tasks running now) when there are two runs or more and at least 1,000 cases "
                   "(64 rows for the page); 1 works in this process.")
def aggregate_command(runs_roots, output, agents, models, formats, tests, hardware, runs, sort, title, keys,
                      verified_only, jobs) -> None:
    """Aggregate many runs into one sanitized report for publication.

    Rows group cases by agent + version, model + hash, format and hardware profile; each test column
    counts every run of it. Home paths, user and host names, addresses and tokens are replaced; only
    verdict fields are read, so prompts, proxy bodies and workspaces never reach the report. Every run
    is checked against its signatures: a case that changed after its run is left out, and each run's
    signature (verified, changed, another key, not signed) and public key are in the report. Writes
    only its three files inside --output; prints the output folder last. See docs/aggregate.md.
    """
    from ..reports.aggregate import (
        Filters, aggregate_runs, check_output, find_run_dirs, signatures_text, write_aggregate)
    from .verify_cmd import resolve_anchors

    roots = list(runs_roots)
    run_dirs = find_run_dirs(roots)
    out = check_output(output, roots, run_dirs)
    filters = Filters(agents=agents, models=models, formats=formats, tests=tests, hardware=hardware, runs=runs)
    anchors, label = resolve_anchors(keys)
    data = aggregate_runs(run_dirs, filters=filters, sort=sort, title=title, keys=anchors, key_label=label,
                          verified_only=verified_only, jobs=jobs)
    if not data["runs"]:
        raise UserError(f"no run id matches --run {' '.join(runs)}; run `gripprobe list-runs` or drop --run")
    try:
        paths = write_aggregate(data, out, jobs)
    except OSError as exc:
        import os

        from ..store.roots import explain_os_error

        target = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, (str, bytes)) else out
        raise UserError(explain_os_error(f"--output {output}", target, exc, creating=True)) from None
    cases = sum(r["cases"] for r in data["runs"])
    click.echo(f"aggregated {cases} case(s) from {len(data['runs'])} run(s) into {len(data['rows'])} row(s); "
               f"unreadable case files skipped: {data['unreadable']}", err=True)
    click.echo(signatures_text(data["signatures"]), err=True)
    for p in paths:
        click.echo(safe_name(p), err=True)
    click.echo(safe_name(out))
