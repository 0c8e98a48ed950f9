"""Commands on stored runs: ``rebuild-reports``, ``list-runs``, ``backfill-model-hashes``."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import UserError
from ..jsonl import dumps
from ..textsafe import safe_name, safe_text
from .params import PathArg

CTX = {"help_option_names": ["-h", "--help"]}


def _run_dir(path: Path):
    from ..store import RunFolder, check_run_dir

    return RunFolder(check_run_dir(path))


@contextmanager
def writing_into(run_dir, what: str):
    """A run folder (or its reports/) that cannot be written: one line naming the path, exit 2."""
    from ..store.roots import explain_os_error

    try:
        yield
    except OSError as exc:
        target = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, (str, bytes)) else run_dir.path
        raise UserError(explain_os_error(f"{run_dir.path} ({what})", target, exc, creating=True)) from None


def write_reports(run_dir) -> None:
    """Re-render a run's reports (``write_run_reports``) with :func:`writing_into`'s errors, and re-sign the
    run's seal over them when the run is signed with this machine's key (else say they are not re-signed)."""
    from ..reports import write_run_reports

    with writing_into(run_dir, "writing its reports"):
        reseal_after(run_dir, write_run_reports(run_dir), "re-rendered reports")


def reseal_after(run_dir, written, what: str) -> None:
    """Re-sign the run's seal over the files the harness just ``written`` into the run (reports, exports)
    when the run is signed with this machine's key; otherwise say they are not signed."""
    from ..integrity.keys import run_signer
    from ..integrity.seal import reseal_run, run_public_key

    inside = [p for p in written if run_dir.path.resolve() in Path(p).resolve().parents]
    if not inside:
        return
    signer = run_signer(run_dir.path)
    problem = reseal_run(run_dir.path, signer, wrote=inside)
    recorded = run_public_key(run_dir.path)
    if signer is None and recorded is not None:
        problem = (f"the run is signed by {recorded.fingerprint}, not by this machine's key: its {what} are not "
                   f"signed (`gripprobe verify` names them)")
    if problem:
        click.echo(f"warning: {safe_name(run_dir.path)}: {safe_text(problem)}", err=True)


def require_own_key(run_dir, what: str) -> None:
    """A signed run can be rewritten only where its key is: anything else is one line and exit 2."""
    from ..integrity.keys import KEY_ENV, local_public_key, run_signer
    from ..integrity.seal import run_public_key

    recorded = run_public_key(run_dir.path)
    if recorded is None or run_signer(run_dir.path) is not None:
        return
    mine = local_public_key()
    held = f"this machine's key is {mine.fingerprint}" if mine else "this machine has no harness key"
    raise UserError(f"{safe_name(run_dir.path)}: signed by {recorded.fingerprint} and {held}: {what} would "
                    f"leave cases nobody can sign; run it where the run's key is (or point {KEY_ENV} at it), "
                    f"or pass --dry-run")


@click.command("rebuild-reports", context_settings=CTX)
@click.argument("run_dir", type=PathArg(path_type=Path))
@click.option("--recompute", is_flag=True,
              help="Re-derive every verdict field (events, telemetry, validators, verdict) from the stored "
                   "artifacts before rendering. A case whose artifacts are missing or corrupt becomes HARNESS_ERROR. "
                   "Validators that run code run only in the sandbox (never unconfined, whatever the run "
                   "recorded); without one they are not run (HARNESS_ERROR sandbox_unavailable).")
@click.option("--dry-run", is_flag=True, help="With --recompute: report what would change, write nothing.")
def rebuild_reports_command(run_dir: Path, recompute: bool, dry_run: bool) -> None:
    """Re-render a run's reports (summary.md, summary.html, case pages); optionally recompute verdicts.

    A recomputed case that changed keeps its previous case.json as case.before-recompute.json.
    """
    from ..pluginmanager import make_plugin_manager

    rd = _run_dir(run_dir)
    if recompute:
        from ..runner.recompute import recompute_run
        from ..runner.sandbox import INSTALL_FIX, stored_data_sandbox

        if not dry_run:
            require_own_key(rd, "--recompute")
        from ..integrity.check import run_format

        if run_format(rd.path) != "signed":
            click.echo(f"warning: {safe_name(rd.path)} is not signed (written before gripprobe signed its runs, or "
                       f"its signatures were removed): only what its digests still show can be checked", err=True)

        box = stored_data_sandbox()
        if not box.confined:  # never unconfined: code a stored run holds is not run without a sandbox
            click.echo(f"warning: no sandbox here ({safe_text(box.warning)}): validators that run code "
                       f"(command_output) are not run, their cases become HARNESS_ERROR sandbox_unavailable; "
                       f"fix: {INSTALL_FIX.split(', or pass')[0]}", err=True)
        with writing_into(rd, "writing recomputed cases"):
            rows = recompute_run(make_plugin_manager(), rd, write=not dry_run)
        changed = [r for r in rows if r.changed]
        for r in rows:
            if r.result is None:
                click.echo(f"{safe_name(r.case_id)}: skipped: {safe_text(r.problem)}", err=True)
            elif r.changed:
                click.echo(f"{safe_name(r.case_id)}: {r.result.verdict.status}; changed: {', '.join(r.changed)}"
                           + (f" ({safe_text(r.problem)})" if r.problem else ""))
        click.echo(f"recomputed {len(rows)} case(s): {len(rows) - len(changed)} unchanged, {len(changed)} changed"
                   + (" (dry run: nothing written)" if dry_run else ""))
        if dry_run:
            return
    write_reports(rd)
    click.echo(f"report: {safe_name(rd.reports / 'summary.html')} (and summary.md)")


@click.command("list-runs", context_settings=CTX)
@click.option("--results", "results_root", type=PathArg(path_type=Path), default=Path("results"),
              show_default=True, help="Results root (or its runs/ folder).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, newest last.")
def list_runs_command(results_root: Path, as_json: bool) -> None:
    """List stored runs: path, agents, suite, date, status and status counts.

    A case.json that is not a valid result (unknown status, missing field, not JSON) counts as
    `invalid`; text from disk is shown with control characters escaped.
    """
    from ..store import check_readable_root
    from ..store.runs import describe_run, iter_run_dirs

    check_readable_root(results_root)
    infos = [describe_run(r) for r in iter_run_dirs(results_root)]
    if as_json:
        for i in infos:
            click.echo(dumps(i.as_dict()))  # ensure_ascii: every control character is a \u escape
        return
    if not infos:
        click.echo(f"no runs under {safe_name(results_root)}")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, pad_edge=False)
    for col in ("path", "agents", "suite", "started", "status", "cases", "counts"):
        table.add_column(col, overflow="fold")
    for i in infos:
        suite = i.suite or ("(ad hoc)" if i.selection is not None else "-")
        cells = (safe_name(i.path), safe_text(", ".join(i.agents)), safe_text(suite),
                 safe_text((i.started_at or "-")[:19].replace("T", " ")), safe_text(i.status),
                 f"{i.done}/{i.planned or i.done}", ", ".join(f"{k} {v}" for k, v in i.counts.items()) or "-")
        table.add_row(*(Text(c) for c in cells))  # Text: a "[" from disk is not rich markup
    Console(width=max(160, shutil.get_terminal_size().columns), soft_wrap=False).print(table)


@click.command("backfill-model-hashes", context_settings=CTX)
@click.argument("runs", nargs=-1, type=PathArg(path_type=Path))
@click.option("--results", "results_root", type=PathArg(path_type=Path), default=None,
              help="Backfill every run under this results root (instead of RUN_DIR arguments).")
@click.option("--base-url", help="Ask this backend instead of the one recorded with each case.")
@click.option("--force", is_flag=True, help="Overwrite a recorded hash that differs from the backend's.")
@click.option("--dry-run", is_flag=True, help="Report what would be written, write nothing.")
def backfill_command(runs: tuple[Path, ...], results_root: Path | None, base_url: str | None, force: bool,
                     dry_run: bool) -> None:
    """Fill in model hashes of stored cases from the backend's model list (Ollama's /api/tags digest,
    or the embedded oracle's). A different recorded hash is never overwritten without --force."""
    from ..runner.backfill import backfill_runs
    from ..store.runs import iter_run_dirs

    if not runs and results_root is None:
        raise UserError("name run directories or --results ROOT; see `gripprobe list-runs`")
    from ..store import check_readable_root

    dirs = [_run_dir(p) for p in runs]
    if results_root is not None:
        dirs += list(iter_run_dirs(check_readable_root(results_root)))
    if not dry_run:
        for d in dirs:
            require_own_key(d, "backfill-model-hashes")
    try:
        from ..pluginmanager import make_plugin_manager

        rows = backfill_runs(dirs, make_plugin_manager().registry.backends, force=force, base_url=base_url,
                             dry_run=dry_run)
    except OSError as exc:
        from ..store.roots import explain_os_error

        target = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, (str, bytes)) else Path(".")
        raise UserError(explain_os_error("backfill-model-hashes (writing case.json)", target, exc,
                                         creating=True)) from None
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
        if r.outcome in ("conflict", "unreachable", "not_listed", "no_backend"):
            click.echo(safe_text(f"{safe_name(r.run_id)}/{safe_name(r.case_id)}: {r.outcome}"
                                 + (f": {r.recorded or '-'} -> {r.found}" if r.found else "")
                                 + (f" ({r.detail})" if r.detail else "")))
    filled = Counter((r.run_id, r.found) for r in rows if r.outcome in ("filled", "overwritten"))
    for (run_id, digest), n in sorted(filled.items()):
        click.echo(safe_text(f"{safe_name(run_id)}: {n} case(s) -> {digest}"))
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no cases"
    click.echo(f"backfill: {summary}" + (" (dry run: nothing written)" if dry_run else ""))
    if any(r.outcome in ("filled", "overwritten") for r in rows) and not dry_run:
        for d in dirs:
            write_reports(d)
