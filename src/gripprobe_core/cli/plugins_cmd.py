"""``gripprobe plugins``: what is installed, from which distribution, implementing which hooks."""

from __future__ import annotations

import click

from ..jsonl import dumps
from ..pluginmanager import make_plugin_manager
from ..textsafe import safe_text


@click.command("plugins", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_command(as_json: bool) -> None:
    """List plugins, their distributions, versions and hooks, and what they register (agents, backends,
    validators, challenge servers, oracle dialects, the evaluators a suite may name as its judge)."""
    plugins = make_plugin_manager()
    reg = plugins.registry
    data = {
        "plugins": [p.__dict__ for p in plugins.records()],
        "failures": [f.__dict__ for f in plugins.failures],
        "agents": sorted(reg.agents), "backends": sorted(reg.backends), "validators": sorted(reg.validators),
        "challenge_servers": sorted(reg.challenges), "oracle_dialects": sorted({*reg.dialects, "tools"}),
        "evaluators": sorted(reg.evaluators),
    }
    if as_json:
        click.echo(dumps(data, indent=2))
        return
    for p in data["plugins"]:
        origin = "built-in" if p["builtin"] else f"{p['distribution']} {p['version']}"
        click.echo(safe_text(f"{p['name']}  ({origin})"))
        click.echo(safe_text(f"    hooks: {', '.join(p['hooks'])}"))
    for f in plugins.failures:
        click.echo(safe_text(f"BROKEN {f}  (skipped; GRIPPROBE_STRICT_PLUGINS=1 makes this fatal)"))
    for label, key in (("agents", "agents"), ("backends", "backends"), ("validators", "validators"),
                       ("challenge servers", "challenge_servers"), ("oracle dialects", "oracle_dialects"),
                       ("evaluators (a suite's judge:)", "evaluators")):
        click.echo(safe_text(f"{label}: {', '.join(data[key]) or '-'}"))
