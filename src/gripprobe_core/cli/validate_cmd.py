"""``gripprobe validate`` (check every spec, print every problem) and ``gripprobe schema`` (write the
JSON Schemas editors use for completion).

Failures exit through ``SystemExit`` rather than ``ctx.exit``: the console entry point runs click with
``standalone_mode=False``, where an exit code returned by ``ctx.exit`` would be lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..errors import SpecError, UserError
from ..textsafe import safe_name, safe_text
from .params import PathArg


def _registry(ctx: click.Context) -> tuple[Any, list[str]]:
    """The plugin registry (for validator / challenge / agent plugin names) and notes to print.

    Uses a plugin manager placed on the context by the caller if there is one. If the plugin
    machinery cannot even be imported, validation still runs without the registry checks.
    """
    from ..pluginmanager import GripProbePluginManager, describe_failures

    plugins = ctx.find_object(GripProbePluginManager)
    if plugins is None:
        try:
            from ..pluginmanager import make_plugin_manager

            plugins = make_plugin_manager()
        except ImportError as exc:
            return None, [f"note: plugins unavailable ({exc}); validator, challenge and agent plugin "
                          f"names were not checked"]
    return plugins.registry, describe_failures(plugins)


# Same help names as the group: click caches a command's help option the first time it is built, so a
# command invoked on its own (tests) must not differ from the command under `gripprobe`.
_CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.command("validate", context_settings=_CONTEXT)
@click.option("--specs", "--root", "root", type=PathArg(file_okay=False, path_type=Path),
              help="Specs directory (default: $GRIPPROBE_SPECS, else ./specs or the nearest parent's).")
@click.pass_context
def validate_command(ctx: click.Context, root: Path | None) -> None:
    """Check every spec: keys, types, ids, cross references and installed plugin kinds.

    Prints each problem as file:line: key: message and exits 2, or prints what was loaded.
    """
    from ..specs import find_specs_root, load_specs

    try:
        root = root if root is not None else find_specs_root()
        registry, notes = _registry(ctx)
        for note in notes:
            click.echo(safe_text(note), err=True)
        specs = load_specs(root, registry=registry)
    except SpecError as exc:
        for line in exc.errors:
            click.echo(safe_text(line), err=True)
        click.echo(f"{len(exc.errors)} spec error(s)", err=True)
        raise SystemExit(2) from None
    except UserError as exc:
        click.echo(f"error: {safe_text(exc)}", err=True)
        raise SystemExit(exc.exit_code) from None
    for note in specs.notes:
        click.echo(safe_text(f"note: {note.format()}"), err=True)
    click.echo(f"ok: {specs.summary()}")


@click.command("schema", context_settings=_CONTEXT)
@click.option("--out", "out_dir", type=PathArg(file_okay=False, path_type=Path), default=Path("schemas"),
              show_default=True, help="Directory to write <kind>.schema.json files into.")
def schema_command(out_dir: Path) -> None:
    """Write JSON Schemas of every spec kind, for editor completion and checking.

    Add `# yaml-language-server: $schema=<path>/<kind>.schema.json` as the first line of a spec file.
    """
    from ..specs import write_schemas

    try:
        paths = write_schemas(out_dir)
    except OSError as exc:
        click.echo(f"error: cannot write schemas to {safe_name(out_dir)}: {exc.strerror or exc}", err=True)
        raise SystemExit(2) from None
    for path in paths:
        click.echo(safe_name(path))
