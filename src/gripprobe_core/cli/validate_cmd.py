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
@click.option("--specs", "--root", "roots", type=PathArg(file_okay=False, path_type=Path), multiple=True,
              help="A specs folder layered on the shipped specs (repeatable; later folders win by id). "
                   "Default: $GRIPPROBE_SPECS, else the nearest specs/ folder, if any.")
@click.option("--no-shipped", is_flag=True, help="Load only the --specs folders, not the shipped specs under them.")
@click.option("--ids", "list_ids", is_flag=True, help="List every id with the file it came from.")
@click.pass_context
def validate_command(ctx: click.Context, roots: tuple[Path, ...], no_shipped: bool, list_ids: bool) -> None:
    """Check every spec: keys, types, ids, cross references and installed plugin kinds.

    Prints each problem as file:line: key: message and exits 2, or prints what was loaded and which
    layer (the shipped specs, each --specs folder) each id came from.
    """
    from ..specs import load_specs, spec_layers

    try:
        layers = spec_layers(roots, shipped=not no_shipped)
        registry, notes = _registry(ctx)
        for note in notes:
            click.echo(safe_text(note), err=True)
        specs = load_specs(layers, registry=registry)
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
    for line in origin_lines(specs, every=list_ids):
        click.echo(safe_text(line))


_KIND_WORDS = {"model": "models", "cli_agent": "cli_agents", "test": "tests", "suite": "suites",
               "hardware_profiles": "hardware profiles"}


def _layer_name(specs: Any, layer: Path) -> str:
    from ..specs import shipped_specs_dir
    from ..specs.issues import display_path

    shipped = shipped_specs_dir()
    if shipped is not None and layer == shipped:
        return f"shipped ({display_path(layer)})"
    return display_path(layer)


def origin_lines(specs: Any, *, every: bool = False) -> list[str]:
    """Where each id came from: one line per layer with its counts, then every id of the layers above the
    shipped specs (all ids with ``every``), saying which ones replace a lower layer's spec."""
    from ..specs.issues import display_path

    by_layer: dict[Path, list[tuple[str, str]]] = {layer: [] for layer in specs.layers}
    for kind, spec_id in sorted(specs.files):
        layer = specs.origin(kind, spec_id)
        if layer is not None:
            by_layer[layer].append((kind, spec_id))
    if len(specs.layers) < 2 and not every:
        return []
    out = ["layers (bottom first; a higher one wins by id):"]
    for n, layer in enumerate(specs.layers, 1):
        keys = by_layer[layer]
        counts = {k: sum(1 for kind, _ in keys if kind == k) for k in _KIND_WORDS}
        what = ", ".join(f"{c} {_KIND_WORDS[k]}" for k, c in counts.items() if c) or "nothing"
        out.append(f"  {n}. {_layer_name(specs, layer)}: {what}")
    shown = specs.layers if every else specs.layers[1:]
    for layer in shown:
        for kind, spec_id in by_layer[layer]:
            below = specs.replaced.get((kind, spec_id))
            how = f"replaces {display_path(below)}" if below is not None else "new"
            out.append(f"  {kind:17} {spec_id:28} {display_path(specs.files[(kind, spec_id)])}  ({how})")
    return out


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
