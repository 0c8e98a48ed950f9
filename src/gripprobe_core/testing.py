"""Helpers for plugin authors' end-to-end tests: run the real ``gripprobe`` against the oracle.

A plugin's e2e test copies the spec files it needs (its agent, a few oracle models and tests) into a
temporary specs folder, runs the real ``gripprobe run`` in a subprocess, and reads what the run wrote.
These helpers do exactly that and nothing more; they stand in for no component. Used by the five
agent plugins' own tests (see docs/plugin-guide.md)::

    from gripprobe_core.testing import copy_specs, installed_agent, read_cases, run_gripprobe

    specs = copy_specs(tmp / "specs", ["cli_agents/myagent.yaml", "models/oracle-perfect.yaml",
                                       "tests/save_file.yaml"], source=repo_specs(Path(__file__)))
    run_dir = run_gripprobe("run", "--specs", specs, "--results", tmp / "results", "-a", "myagent")
    cases = read_cases(run_dir)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

__all__ = ["copy_specs", "installed_agent", "phase_context", "read_cases", "read_jsonl", "repo_specs",
           "run_gripprobe", "start_gripprobe", "finish_gripprobe"]

SHELL_PWD = {"id": "shell_pwd", "title": "pwd", "validators": [{"kind": "file_exists", "path": "pwd.txt"}],
             "reference": [{"shell": "pwd > pwd.txt"}]}


def repo_specs(start: Path) -> Path | None:
    """The ``specs/`` folder of the GripProbe checkout ``start`` lies in (None outside one)."""
    for d in [Path(start).resolve(), *Path(start).resolve().parents]:
        cand = d / "specs"
        if (cand / "cli_agents").is_dir() and (cand / "models").is_dir():
            return cand
    return None


def copy_specs(dest: Path, files: Iterable[str], *, source: Path, suite: dict[str, Any] | None = None) -> Path:
    """Copy ``files`` (paths relative to ``source``, e.g. ``models/oracle-perfect.yaml``) into ``dest``,
    plus ``suites/default.yaml`` from ``suite`` when given (written as JSON, which is YAML). Only what
    is named is copied: other agents' specs would name plugins that need not be installed."""
    dest = Path(dest)
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(source) / rel, dest / rel)
    if suite is not None:
        (dest / "suites").mkdir(parents=True, exist_ok=True)
        (dest / "suites" / "default.yaml").write_text(json.dumps({"id": "default", **suite}, indent=1) + "\n")
    return dest


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    env.update(extra or {})
    return env


def _argv(args: Iterable[Any]) -> list[str]:
    return [sys.executable, "-m", "gripprobe_core.cli", *map(str, args)]


def run_gripprobe(*args: Any, env: dict[str, str] | None = None, timeout: float = 600) -> Path:
    """Run the real ``gripprobe`` (``args`` as on the command line) in a subprocess with no stdin and no
    ``GRIPPROBE_*`` settings of this process; assert it succeeded; return the run directory it printed last."""
    res = subprocess.run(_argv(args), capture_output=True, text=True, env=_env(env), timeout=timeout,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"gripprobe {' '.join(map(str, args))} exited {res.returncode}:\n{res.stderr[-3000:]}"
    return Path(res.stdout.strip().splitlines()[-1])


def start_gripprobe(*args: Any, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Like :func:`run_gripprobe`, but started in the background (several runs at once); end it with
    :func:`finish_gripprobe`."""
    return subprocess.Popen(_argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(env),
                            stdin=subprocess.DEVNULL)


def finish_gripprobe(proc: subprocess.Popen, timeout: float = 900) -> Path:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"gripprobe exited {proc.returncode}:\n{err[-3000:]}"
    return Path(out.strip().splitlines()[-1])


def read_cases(run_dir: Path) -> dict[str, dict]:
    """Every case.json of a run, by case id."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((Path(run_dir) / "cases").glob("*/case.json"))}


def read_jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file ([] when it does not exist)."""
    path = Path(path)
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()] if path.exists() else []


def installed_agent(agent: Any, gpm: Any = None) -> Any:
    """The agent's install in the agent cache (``InstalledAgent``: executable, version), or None when it
    is not installed. ``agent`` is its :class:`~gripprobe_core.CliAgentSpec`."""
    from .agents import AgentCache
    from .pluginmanager import make_plugin_manager

    gpm = gpm or make_plugin_manager()
    recipe = gpm.hook.agent_install_recipe(agent=agent)
    return AgentCache.default().installed(agent.id, recipe) if recipe is not None else None


def phase_context(tmp_path: Path, agent: Any, *, prompt: str = "Run `pwd` and save it to pwd.txt.", test: Any = None,
                  model_name: str = "perfect", fmt: str = "tool", phase: str = "measured", api_key: str | None = None,
                  base_url: str = "http://127.0.0.1:43210", backend_env: dict[str, str] | None = None,
                  executable: Path | None = None) -> Any:
    """A :class:`~gripprobe_core.PhaseContext` laid out like the runner's under ``tmp_path`` (workspace,
    fresh HOME with its XDG folders, TMPDIR, artifacts), against the oracle backend's ``model_name``
    profile, for unit-testing a plugin's hooks. ``test`` defaults to a shell_pwd-like test with
    ``prompt``; its fixtures are written into the workspace."""
    from .phase import PhaseContext
    from .models.specs import BackendSpec, ModelSpec, TestSpec

    test = test if test is not None else TestSpec(**SHELL_PWD, prompt=prompt)
    backend = BackendSpec(id="oracle", kind="oracle", model_id=model_name, env=backend_env or {})
    ctx = PhaseContext(run_id="r1", case_id="c1", phase=phase, agent=agent,
                       model=ModelSpec(id=f"oracle-{model_name}", backends=[backend]), backend=backend, test=test,
                       format=fmt, prompt=test.prompt, workspace=tmp_path / "ws", home=tmp_path / "home",
                       tmpdir=tmp_path / "tmp", artifacts_dir=tmp_path / "artifacts", base_url=base_url,
                       model_name=model_name, api_key=api_key,
                       agent_executable=executable if executable is not None else tmp_path / "bin" / agent.executable)
    for d in (ctx.workspace, ctx.home, ctx.tmpdir, ctx.artifacts_dir, *map(Path, ctx.xdg.values())):
        d.mkdir(parents=True, exist_ok=True)
    for fx in test.fixtures:
        (ctx.workspace / fx.path).parent.mkdir(parents=True, exist_ok=True)
        (ctx.workspace / fx.path).write_text(fx.content)
    return ctx
