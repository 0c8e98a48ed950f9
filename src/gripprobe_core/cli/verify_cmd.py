"""``gripprobe verify``: prove that nothing in a stored run changed after the harness wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..textsafe import safe_name

_CONTEXT = {"help_option_names": ["-h", "--help"]}


def resolve_anchors(keys: tuple[str, ...]) -> tuple[set[str] | None, str]:
    """The fingerprints runs must be signed with, and how to say so: ``--key`` values; else this machine's
    harness key when it has one; else None (each run's own recorded key)."""
    from ..integrity.keys import local_public_key, parse_key

    if keys:
        return {parse_key(k) for k in keys}, "--key"
    mine = local_public_key()
    if mine is not None:
        return {mine.fingerprint}, "this machine's key"
    return None, "the key the run records (no harness key on this machine; pass --key to require one)"


def _describe(rc) -> list[str]:
    where = safe_name(rc.path)
    total = len(rc.cases)
    if rc.status == "unsigned":
        return [f"{where}: NOT SIGNED: {rc.notes[0]}"]
    key = f"signed by {rc.key} (public key {rc.public_key}), checked against {rc.checked_against}"
    if rc.status == "verified":
        lines = [f"{where}: verified: {key}; {total} case(s) hold"]
    elif rc.status == "other_key":
        lines = [f"{where}: SIGNED BY ANOTHER KEY: {key}; pass --key {rc.key} to check it against its own key"]
    else:
        lines = [f"{where}: CHANGED: {key}; {len(rc.changed_cases)} of {total} case(s) changed"
                 + ("; the run's own files changed" if rc.problems else "")]
    lines += [f"  run: {p.text()}" for p in rc.problems]
    for case_id in rc.changed_cases:
        lines += [f"  case {safe_name(case_id)}: {p.text()}" for p in rc.cases[case_id].problems]
    lines += [f"  note: {safe_name(n)}" for n in rc.notes]
    return lines


@click.command("verify", context_settings=_CONTEXT)
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN...")
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="Require this public key (its fingerprint sha256:…, its base64 form, or a file holding either; "
                   "repeatable). Default: this machine's harness key, else the key each run records.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: every run's status, key and changes.")
def verify_command(runs: tuple[Path, ...], keys: tuple[str, ...], as_json: bool) -> None:
    """Check stored runs against their signatures: every file of every case, the manifest and the reports.

    Names each case that changed and how (changed, missing, added, digest dropped, signature invalid,
    signed by another key). Exit 0 when every run holds, 1 when anything changed or a run is not signed
    (or signed by a key not asked for), 2 for bad input. See docs/sandbox.md ("Signed runs").
    """
    from ..integrity.check import verify_run
    from ..store import check_run_dir

    dirs = [check_run_dir(p, f"verify {p}") for p in runs]
    anchors, label = resolve_anchors(keys)
    checks = [verify_run(d, anchors, anchor_label=label) for d in dirs]
    ok = all(rc.ok for rc in checks)
    if as_json:
        click.echo(json.dumps({"verified": ok, "runs": [rc.as_json() for rc in checks]}, indent=2))
    else:
        for rc in checks:
            for line in _describe(rc):
                click.echo(line)
    if not ok:
        raise SystemExit(1)

