"""``gripprobe agents list|install`` and ``gripprobe doctor``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from ..agents import AgentCache
from ..errors import UserError
from ..pluginmanager import describe_failures, make_plugin_manager

_CTX = {"help_option_names": ["-h", "--help"]}


def _load(specs_root: Path | None):
    from ..specs import find_specs_root, load_specs
    plugins = make_plugin_manager()
    for w in describe_failures(plugins):
        click.echo(w, err=True)
    specs = load_specs(specs_root or find_specs_root(), registry=plugins.registry)
    return plugins, specs


def install_recipe(registry, agent):
    """The agent's install recipe from its driver (None: built in, or its plugin is not installed)."""
    driver = registry.agents.get(agent.plugin)
    return driver.install_recipe(agent) if driver is not None else None


def agent_status(registry, cache: AgentCache, agent) -> dict:
    recipe = install_recipe(registry, agent)
    if recipe is None:
        return {"agent": agent.id, "plugin": agent.plugin, "needs_install": False, "installed": True,
                "version": agent.version or "built-in", "path": None}
    inst = cache.installed(agent.id, recipe)
    return {"agent": agent.id, "plugin": agent.plugin, "needs_install": True, "installed": inst is not None,
            "package": f"{recipe.kind}:{recipe.package}", "version": recipe.version,
            "path": str(inst.path) if inst else str(cache.directory(agent.id, recipe))}


def ensure_agents_installed(registry, agents, cache: AgentCache, *, log, progress=None) -> dict:
    """Install every agent that needs it (cached: near-instant when already there). Returns id -> InstalledAgent.

    ``progress`` (``cli.progress.make_install_progress()``) reports a real install as it goes; without it
    ``log`` gets one line per install."""
    out = {}
    for agent in agents:
        recipe = install_recipe(registry, agent)
        if recipe is not None:
            out[agent.id] = cache.install(agent.id, recipe, log=log, progress=progress)
    return out


def find_installed_agents(registry, agents, cache: AgentCache) -> dict:
    """Agents already in the cache (installs nothing). Returns id -> InstalledAgent."""
    out = {}
    for agent in agents:
        recipe = install_recipe(registry, agent)
        inst = cache.installed(agent.id, recipe) if recipe is not None else None
        if inst is not None:
            out[agent.id] = inst
    return out


@click.group("agents", context_settings=_CTX)
def agents_group() -> None:
    """Install and list the real CLI agents at their pinned versions."""


@agents_group.command("list", context_settings=_CTX)
@click.option("--specs", "--root", "specs_root", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def list_command(specs_root: Path | None, as_json: bool) -> None:
    """Agents in the specs, whether they are installed, and where."""
    plugins, specs = _load(specs_root)
    cache = AgentCache.default()
    rows = [agent_status(plugins.registry, cache, a) for _, a in sorted(specs.agents.items())]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        state = "installed" if r["installed"] else "not installed"
        click.echo(f"{r['agent']:12} {r['version']:12} {state:14} {r.get('path') or ''}")


@agents_group.command("install", context_settings=_CTX)
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Install every agent in the specs that needs installing.")
@click.option("--specs", "--root", "specs_root", type=click.Path(file_okay=False, path_type=Path))
def install_command(names: tuple[str, ...], all_: bool, specs_root: Path | None) -> None:
    """Install agents at their pinned versions into the cache (idempotent; instant when cached).

    Cache: ~/.cache/gripprobe/agents/<agent>-<version>, or $GRIPPROBE_AGENT_CACHE.
    """
    plugins, specs = _load(specs_root)
    if not names and not all_:
        raise UserError("name the agents to install, or pass --all")
    unknown = [n for n in names if n not in specs.agents]
    if unknown:
        raise UserError(f"unknown agent(s): {', '.join(unknown)}; known: {', '.join(sorted(specs.agents))}")
    chosen = [specs.agents[n] for n in (names or sorted(specs.agents))]
    from .progress import make_install_progress

    done = ensure_agents_installed(plugins.registry, chosen, AgentCache.default(),
                                   log=lambda m: click.echo(m, err=True), progress=make_install_progress())
    for a in chosen:
        inst = done.get(a.id)
        click.echo(f"{a.id}: {'built-in, nothing to install' if inst is None else f'{inst.version} at {inst.path}'}")


@click.command("doctor", context_settings=_CTX)
@click.option("--specs", "--root", "specs_root", type=click.Path(file_okay=False, path_type=Path))
@click.option("--no-check", is_flag=True, help="Skip the self-check run against the oracle.")
@click.option("--test", "test_id", default="shell_pwd", show_default=True, help="Test for the self-check.")
def doctor_command(specs_root: Path | None, no_check: bool, test_id: str) -> None:
    """The sandbox (does bubblewrap work here?), then per agent: installed or not, version, and a
    self-check against the oracle (one real case, sandboxed when bubblewrap works)."""
    from ..runner import RunSettings, execute_run, plan_cases
    from ..runner.sandbox import probe_report
    plugins, specs = _load(specs_root)
    cache = AgentCache.default()
    sandbox_ok, said = probe_report()
    click.echo(f"{'sandbox':12} {'bwrap' if sandbox_ok else 'NONE':12} {said}")
    failed = 0
    for agent_id, agent in sorted(specs.agents.items()):
        st = agent_status(plugins.registry, cache, agent)
        line = f"{agent_id:12} {st['version']:12} {'installed' if st['installed'] else 'NOT INSTALLED':14}"
        if not st["installed"]:
            click.echo(line + f" run `gripprobe agents install {agent_id}`")
            continue
        if no_check:
            click.echo(line)
            continue
        cases = plan_cases(specs, agents=[agent_id], models=["oracle-perfect"], tests=[test_id])
        with tempfile.TemporaryDirectory() as out:
            installed = ensure_agents_installed(plugins.registry, [agent], cache, log=lambda m: None)
            res = execute_run(cases, plugins, RunSettings(results_root=Path(out), installed=installed)).results[0]
        ok = res.verdict.status == "PASS"
        failed += not ok
        click.echo(line + f" self-check {test_id}: {res.verdict.status} ({res.duration_s:.1f}s)")
    if failed:
        raise SystemExit(1)
