"""``gripprobe agents list|install`` and ``gripprobe doctor`` (with ``--model``: cli/model_doctor.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ..agents import AgentCache, ensure_agents_installed, find_installed_agents, install_recipe
from ..errors import UserError
from ..jsonl import dumps
from ..models.bounds import TIMEOUT_MAX_S
from ..pluginmanager import describe_failures, make_plugin_manager
from ..textsafe import safe_text
from .params import FiniteFloat, PathArg

_CTX = {"help_option_names": ["-h", "--help"]}


def _load(specs_root: tuple[Path, ...]):
    from ..specs import load_specs, spec_layers
    plugins = make_plugin_manager()
    for w in describe_failures(plugins):
        click.echo(w, err=True)
    specs = load_specs(spec_layers(specs_root), registry=plugins.registry)
    return plugins, specs


def agent_status(registry, cache: AgentCache, agent) -> dict:
    recipe = install_recipe(registry, agent)
    if recipe is None:
        return {"agent": agent.id, "plugin": agent.plugin, "needs_install": False, "installed": True,
                "version": agent.version or "built-in", "path": None}
    inst = cache.installed(agent.id, recipe)
    return {"agent": agent.id, "plugin": agent.plugin, "needs_install": True, "installed": inst is not None,
            "package": f"{recipe.kind}:{recipe.package}", "version": recipe.version,
            "path": str(inst.path) if inst else str(cache.directory(agent.id, recipe))}


@click.group("agents", context_settings=_CTX)
def agents_group() -> None:
    """Install and list the real CLI agents at their pinned versions."""


@agents_group.command("list", context_settings=_CTX)
@click.option("--specs", "--root", "specs_root", type=PathArg(file_okay=False, path_type=Path), multiple=True,
              help="A specs folder layered on the shipped specs (repeatable; later folders win by id).")
@click.option("--json", "as_json", is_flag=True)
def list_command(specs_root: tuple[Path, ...], as_json: bool) -> None:
    """Agents in the specs, whether they are installed, and where."""
    plugins, specs = _load(specs_root)
    cache = AgentCache.default()
    rows = [agent_status(plugins.registry, cache, a) for _, a in sorted(specs.agents.items())]
    if as_json:
        click.echo(dumps(rows, indent=2))
        return
    for r in rows:
        state = "installed" if r["installed"] else "not installed"
        click.echo(safe_text(f"{r['agent']:12} {r['version']:12} {state:14} {r.get('path') or ''}"))


@agents_group.command("install", context_settings=_CTX)
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Install every agent in the specs that needs installing.")
@click.option("--specs", "--root", "specs_root", type=PathArg(file_okay=False, path_type=Path), multiple=True,
              help="A specs folder layered on the shipped specs (repeatable; later folders win by id).")
def install_command(names: tuple[str, ...], all_: bool, specs_root: tuple[Path, ...]) -> None:
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
        what = "built-in, nothing to install" if inst is None else f"{inst.version} at {inst.path}"
        click.echo(safe_text(f"{a.id}: {what}"))


@click.command("doctor", context_settings=_CTX)
@click.option("--specs", "--root", "specs_root", type=PathArg(file_okay=False, path_type=Path), multiple=True,
              help="A specs folder layered on the shipped specs (repeatable; later folders win by id).")
@click.option("--no-check", is_flag=True, help="Skip the self-check run against the oracle.")
@click.option("--test", "test_id", default=None,
              help="Test for the self-check (default: the first of shell_pwd, save_file and the sanity tests "
                   "that the agent can attempt).")
@click.option("-m", "--model", "models", multiple=True,
              help="Probe this model's backend instead (repeatable): reachable, model served, a structured tool "
                   "call back from one real request offering a tool, model hash.")
@click.option("--backend", "backend_id", default=None, help="With --model: the backend id to probe (default: each "
                                                             "model's first).")
@click.option("--base-url", default=None, help="With --model: probe this URL instead of the spec's base_url.")
@click.option("--timeout", "timeout_s", type=FiniteFloat(min=0.1, max=TIMEOUT_MAX_S), default=None,
              help="With --model: seconds to wait for the tool-call answer (default 120; a cold model loads first).")
@click.option("--json", "as_json", is_flag=True, help="With --model: print the findings as JSON.")
def doctor_command(specs_root: tuple[Path, ...], no_check: bool, test_id: str, models: tuple[str, ...],
                   backend_id: str | None, base_url: str | None, timeout_s: float | None, as_json: bool) -> None:
    """The sandbox (does bubblewrap work here?), then per agent: installed or not, version, and a
    self-check against the oracle (one real case, sandboxed when bubblewrap works).

    With --model M: M's backend instead, as a table of checks (docs/backends.md). Exit 0 when every model is
    reachable, served and answers a tool request with a structured tool call; 1 when a check failed; 2 for
    bad input or an unreachable backend (one line: the URL, the error, the fix)."""
    if not models:
        given = [o for o, v in (("--backend", backend_id), ("--base-url", base_url), ("--timeout", timeout_s),
                                ("--json", as_json)) if v]
        if given:
            raise UserError(f"{', '.join(given)} only work{'s' if len(given) == 1 else ''} with --model: "
                            f"name the model to probe (-m MODEL)")
    else:
        from .model_doctor import run_model_doctor

        plugins, specs = _load(specs_root)
        code = run_model_doctor(specs, plugins.registry, models, backend_id=backend_id, base_url=base_url,
                                as_json=as_json, timeout_s=timeout_s)
        if code:
            raise SystemExit(code)
        return
    from ..runner import RunSettings, execute_run, plan_cases
    from ..runner.sandbox import probe_report
    plugins, specs = _load(specs_root)
    cache = AgentCache.default()
    sandbox_ok, said = probe_report()
    click.echo(f"{'sandbox':12} {'bwrap' if sandbox_ok else 'NONE':12} {said}")
    failed = 0
    for agent_id, agent in sorted(specs.agents.items()):
        st = agent_status(plugins.registry, cache, agent)
        line = safe_text(f"{agent_id:12} {st['version']:12} {'installed' if st['installed'] else 'NOT INSTALLED':14}")
        if not st["installed"]:
            click.echo(line + f" run `gripprobe agents install {agent_id}`")
            continue
        if no_check:
            click.echo(line)
            continue
        test, why = self_check_test(specs, agent, test_id)
        if test is None:
            click.echo(line + f" self-check: {why}")
            continue
        cases = plan_cases(specs, agents=[agent_id], models=["oracle-perfect"], tests=[test])
        with tempfile.TemporaryDirectory() as out:
            installed = ensure_agents_installed(plugins.registry, [agent], cache, log=lambda m: None)
            res = execute_run(cases, plugins, RunSettings(results_root=Path(out), installed=installed)).results[0]
        ok = res.verdict.status == "PASS"
        failed += not ok
        click.echo(line + f" self-check {test}: {res.verdict.status} ({self_check_times(res)})")
    if failed:
        raise SystemExit(1)


def self_check_times(res) -> str:
    """The times of a self-check case, labelled: the agent's run in each phase it had (``warmup``, then
    ``measured``: a case runs both) and the whole case (both phases, the harness's setup and the judge)."""
    phases = [f"{p.phase} {p.process.duration_s:.1f}s" for p in res.phases]
    return ", ".join([*phases, f"total {res.duration_s:.1f}s"])


SELF_CHECK_TESTS = ("shell_pwd", "save_file")


def self_check_test(specs, agent, wanted: str | None) -> tuple[str | None, str]:
    """The test doctor runs for ``agent``: ``wanted`` when given (None and why, when the agent cannot do it),
    else the first of ``SELF_CHECK_TESTS`` and the sanity tests (no challenge server) it can attempt."""
    from ..runner.matrix import missing_tool_kinds

    if wanted is not None:
        if wanted not in specs.tests:
            raise UserError(f"--test {wanted}: no such test; known: {', '.join(sorted(specs.tests))}")
        missing = missing_tool_kinds(agent, specs.tests[wanted])
        return (wanted, "") if not missing else (None, f"{wanted} needs {', '.join(missing)}, which "
                                                       f"{agent.id} cannot do (TOOL_UNSUPPORTED): pick another --test")
    sanity = sorted(t for t, spec in specs.tests.items() if "sanity" in spec.tags and spec.challenge is None)
    for tid in (*SELF_CHECK_TESTS, *sanity):
        test = specs.tests.get(tid)
        if test is not None and test.challenge is None and not missing_tool_kinds(agent, test):
            return tid, ""
    return None, f"no sanity test that {agent.id} can attempt (its tool kinds: {', '.join(agent.tool_kinds)})"
