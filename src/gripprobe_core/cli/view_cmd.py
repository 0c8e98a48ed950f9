"""``gripprobe view``: the runs under a results folder in the browser, live (docs/view.md)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UserError
from ..textsafe import safe_name
from .params import FiniteFloat, PathArg

CTX = {"help_option_names": ["-h", "--help"]}


@click.command("view", context_settings=CTX)
@click.argument("results", required=False, type=PathArg(path_type=Path), default=Path("results"))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback needs --allow-remote.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port to listen on (0: any free one; the URL is printed).")
@click.option("--allow-remote", is_flag=True,
              help="Allow a --host that is not loopback: whoever reaches it reads every stored prompt, output and "
                   "workspace, with no login.")
@click.option("--open/--no-open", "open_browser", default=False, show_default=True,
              help="Open the index in the default browser.")
@click.option("--interval", type=FiniteFloat(0.2, 60.0), default=1.0, show_default=True, metavar="SECONDS",
              help="How often the pages ask for news.")
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="The public key compared runs must be signed with (as for `gripprobe compare`; repeatable).")
def view_command(results: Path, host: str, port: int, allow_remote: bool, open_browser: bool, interval: float,
                 keys: tuple[str, ...]) -> None:
    """Serve a live view of the runs under RESULTS (default: results) on http://127.0.0.1.

    The index lists every run, its state (running, complete, interrupted …), progress and counts; a run's page
    is its summary with cases appearing as they finish; case and compare pages are the static reports'. Prints
    the URL on one line; Ctrl-C stops it.
    """
    from ..store import check_readable_root
    from ..view import ViewConfig, is_loopback, serve
    from .verify_cmd import resolve_anchors

    if not is_loopback(host) and not allow_remote:
        raise UserError(f"--host {safe_name(host)} is not a loopback address: stored runs hold prompts, agent output "
                        f"and workspaces, and the view has no login; keep --host 127.0.0.1 (reach it over ssh -L), "
                        f"or pass --allow-remote")
    check_readable_root(results, "RESULTS")
    anchors, label = resolve_anchors(keys)
    cfg = ViewConfig(results, interval_s=interval, keys=anchors, key_label=label)

    def ready(url: str) -> None:
        click.echo(url)
        click.echo(f"gripprobe view: serving {safe_name(results)} (Ctrl-C stops)", err=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    stopped_by = serve(cfg, host, port, on_ready=ready, check_host=not allow_remote)
    click.echo(f"gripprobe view: stopped ({stopped_by or 'done'})", err=True)
