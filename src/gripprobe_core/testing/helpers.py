"""Helpers for plugin authors' tests: real specs, a phase context laid out like the runner's, the real
oracle, and the real ``gripprobe`` run in a subprocess. They stand in for no component.

An end-to-end test copies the spec files it needs (its agent, a few oracle models and tests) into a
temporary specs folder, runs the real ``gripprobe run``, and reads what the run wrote::

    specs = copy_specs(tmp / "specs", ["cli_agents/myagent.yaml", "models/oracle-perfect.yaml",
                                       "tests/save_file.yaml"], source=kit_specs())
    run_dir = run_gripprobe("run", "--specs", specs, "--results", tmp / "results", "-a", "myagent")
    cases = read_cases(run_dir)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
import re
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Sequence

__all__ = ["agent_spec", "copy_specs", "kit_specs", "read_sse_events", "responses_user_item", "stored_phase", "stored_transcript", "finish_gripprobe", "install_agent", "installed_agent", "oracle_server",
           "phase_context", "read_cases", "read_jsonl", "repo_specs", "run_gripprobe", "start_gripprobe"]

SHELL_PWD = {"id": "shell_pwd", "title": "pwd", "validators": [{"kind": "file_exists", "path": "pwd.txt"}],
             "reference": [{"shell": "pwd > pwd.txt"}]}


def repo_specs(start: Path) -> Path | None:
    """The ``specs/`` folder of the GripProbe checkout ``start`` lies in (None outside one)."""
    for d in [Path(start).resolve(), *Path(start).resolve().parents]:
        cand = d / "specs"
        if (cand / "cli_agents").is_dir() and (cand / "models").is_dir():
            return cand
    return None


def kit_specs() -> Path | None:
    """The specs folder the kit reads (the ``agent_spec`` and ``e2e_specs`` fixtures, :func:`agent_spec`):
    the ``specs/`` of the GripProbe checkout the tests run in (the current directory or a parent), else of
    the checkout this module lies in (an editable install), else the specs shipped inside gripprobe-core
    (``gripprobe_core/_specs``); None when there are none. The one place the kit looks for specs."""
    from ..specs import shipped_specs_dir

    return repo_specs(Path.cwd()) or repo_specs(Path(__file__)) or shipped_specs_dir()


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


#: ``GRIPPROBE_*`` settings a test's ``gripprobe`` subprocess keeps (where agents are installed); every other
#: one of the test process is dropped, so a run depends only on its arguments.
KEPT_SETTINGS = ("GRIPPROBE_AGENT_CACHE",)


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("GRIPPROBE_") or k in KEPT_SETTINGS) and k != "PYTHONPATH"}
    env.update(extra or {})
    return env


def _argv(args: Iterable[Any]) -> list[str]:
    return [sys.executable, "-m", "gripprobe_core.cli", *map(str, args)]


def run_gripprobe(*args: Any, env: dict[str, str] | None = None, timeout: float = 600) -> Path:
    """Run the real ``gripprobe`` (``args`` as on the command line) in a subprocess with no stdin and no
    ``GRIPPROBE_*`` settings of this process but the agent cache's; assert it succeeded; return the run
    directory it printed last."""
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


def agent_spec(name: str, plugins: Any = None, *, specs: Path | None = None) -> Any:
    """The cli_agents spec of the agent whose driver is ``name``: ``specs/cli_agents/<name>.yaml`` of
    ``specs`` (or of :func:`kit_specs`: the checkout the tests run in, or this file lies in — a plugin tested
    with gripprobe-core installed, not editable, still finds its repository's spec — or the specs shipped
    with gripprobe-core), validated; else a minimal spec built from the driver (every tool kind, its install
    recipe's executable)."""
    from ..models.specs import TOOL_KINDS, CliAgentSpec
    from ..specs.yaml_source import load_yaml_file

    root = specs if specs is not None else kit_specs()
    path = root / "cli_agents" / f"{name}.yaml" if root is not None else None
    if path is not None and path.is_file():
        return CliAgentSpec.model_validate(load_yaml_file(path)[0])
    from ..pluginmanager import make_plugin_manager

    driver = (plugins or make_plugin_manager()).registry.agents[name]
    probe = CliAgentSpec.model_validate({"id": name, "plugin": name, "executable": name, "tool_kinds": list(TOOL_KINDS)})
    recipe = driver.install_recipe(probe)
    return probe.model_copy(update={"executable": recipe.executable if recipe else name,
                                    "version": recipe.version if recipe else None})


def installed_agent(agent: Any, plugins: Any = None) -> Any:
    """The agent's install in the agent cache (``InstalledAgent``: executable, version), or None when it
    is not installed. ``agent`` is its :class:`~gripprobe_core.CliAgentSpec`."""
    from ..agents import AgentCache
    from ..pluginmanager import make_plugin_manager

    plugins = plugins or make_plugin_manager()
    driver = plugins.registry.agents.get(agent.plugin)
    recipe = driver.install_recipe(agent) if driver is not None else None
    return AgentCache.default().installed(agent.id, recipe) if recipe is not None else None


def install_agent(agent: Any, plugins: Any = None) -> Any:
    """Install the agent at its pinned version into the agent cache, as ``gripprobe run`` does (instant
    when cached); its ``InstalledAgent``, or None when it needs no install. Raises ``InstallError``."""
    from ..agents import AgentCache
    from ..pluginmanager import make_plugin_manager

    plugins = plugins or make_plugin_manager()
    recipe = plugins.registry.agents[agent.plugin].install_recipe(agent)
    return AgentCache.default().install(agent.id, recipe, log=lambda m: None) if recipe is not None else None


def phase_context(tmp_path: Path, agent: Any, *, prompt: str = "Run `pwd` and save it to pwd.txt.", test: Any = None,
                  model_name: str = "perfect", fmt: str = "tool", phase: str = "measured", api_key: str | None = None,
                  base_url: str = "http://127.0.0.1:43210", backend_env: dict[str, str] | None = None,
                  executable: Path | None = None, installed: bool = True, interaction: Any = None) -> Any:
    """A :class:`~gripprobe_core.PhaseContext` laid out like the runner's under ``tmp_path`` (workspace,
    fresh HOME with its XDG folders, TMPDIR, artifacts), against the oracle backend's ``model_name``
    profile, for unit-testing a driver. ``test`` defaults to a shell_pwd-like test with ``prompt``; its
    fixtures are written into the workspace. The installed executable is ``executable`` (default
    ``<tmp_path>/bin/<spec executable>``); ``installed=False``: none (an agent that needs no install).
    ``interaction``: the case's policy, an ``InteractionSpec`` or its mapping (``{"policy": "auto-deny"}``)."""
    from ..models.specs import BackendSpec, InteractionSpec, ModelSpec, TestSpec
    from ..phase import PhaseContext

    test = test if test is not None else TestSpec.model_validate({**SHELL_PWD, "prompt": prompt})
    if interaction is not None and not isinstance(interaction, InteractionSpec):
        interaction = InteractionSpec.model_validate(interaction)
    backend = BackendSpec(id="oracle", kind="oracle", model_id=model_name, env=backend_env or {})
    # a backend's model name may hold ':' or '/' (qwen3:8b); the model's id in the spec is a plain id
    model_id = re.sub(r"[^a-z0-9]+", "-", f"oracle-{model_name}".lower()).strip("-")[:64].rstrip("-")
    ctx = PhaseContext(run_id="r1", case_id="c1", phase=phase, agent=agent,  # type: ignore[arg-type]
                       model=ModelSpec(id=model_id, backends=[backend]), backend=backend, test=test,
                       format=fmt, prompt=test.prompt, workspace=tmp_path / "ws", home=tmp_path / "home",
                       tmpdir=tmp_path / "tmp", artifacts_dir=tmp_path / "artifacts", base_url=base_url,
                       model_name=model_name, api_key=api_key, interaction=interaction,
                       agent_executable=None if not installed else
                       executable if executable is not None else tmp_path / "bin" / agent.executable)
    for d in (ctx.workspace, ctx.home, ctx.tmpdir, ctx.artifacts_dir, *map(Path, ctx.xdg.values())):
        d.mkdir(parents=True, exist_ok=True)
    for fx in test.fixtures:
        (ctx.workspace / fx.path).parent.mkdir(parents=True, exist_ok=True)
        (ctx.workspace / fx.path).write_text(fx.content)
    return ctx


@asynccontextmanager
async def oracle_server(actions: Sequence[Any], *, plugins: Any = None, format: str = "tool",
                        profile: str = "perfect", record_path: Path | None = None, trial: int = 1
                        ) -> AsyncIterator[Any]:
    """The real oracle backend, started on 127.0.0.1 with ``actions`` (reference actions) and every
    installed driver's dialects: ``async with oracle_server(plan, format="whole") as oracle: oracle.base_url``.
    ``oracle.ground_truth`` lists the tool calls it asked for."""
    from ..oracle.server import OracleServer
    from ..pluginmanager import make_plugin_manager

    plugins = plugins or make_plugin_manager()
    server = OracleServer(list(actions), dialects=plugins.registry.dialects, record_path=record_path,
                          default_profile=profile, format=format, trial=trial)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def stored_phase(case_dir: Path, phase: str = "measured") -> tuple[Any, Any]:
    """``(PhaseContext, PhaseCapture)`` of a stored case's phase, rebuilt from its files (case_inputs.json,
    ``<phase>.context.json``, the captures and the kept files) as ``rebuild-reports --recompute`` does."""
    from ..models.results import CaseResult
    from ..models.specs import BackendSpec, CliAgentSpec, ModelSpec, TestSpec
    from ..phase import PhaseCapture, PhaseContext

    case_dir = Path(case_dir)
    artifacts = case_dir / "artifacts"
    inputs = json.loads((artifacts / "case_inputs.json").read_text())
    stored = json.loads((artifacts / f"{phase}.context.json").read_text())
    result = CaseResult.model_validate_json((case_dir / "case.json").read_bytes())
    record = next(p for p in result.phases if p.phase == phase)
    ctx = PhaseContext(
        run_id=result.run_id, case_id=result.case_id, phase=phase,  # type: ignore[arg-type]
        agent=CliAgentSpec.model_validate(inputs["agent"]), model=ModelSpec.model_validate(inputs["model"]),
        backend=BackendSpec.model_validate(inputs["backend"]), test=TestSpec.model_validate(inputs["test"]),
        format=str(inputs["format"]), prompt=stored["prompt"], workspace=Path(stored["workspace"]),
        home=Path(stored["home"]), tmpdir=Path(stored["tmpdir"]), artifacts_dir=artifacts, base_url=stored["base_url"],
        model_name=stored["model_name"], timeout_s=float(stored["timeout_s"]), run_values=result.run_values,
        agent_executable=Path(stored["agent_executable"]) if stored.get("agent_executable") else None,
        seen_at=Path(stored["seen_at"]) if stored.get("seen_at") else None)
    files = {n: artifacts / f"{phase}.{n}" for n in stored.get("extra") or []}
    capture = PhaseCapture(stdout_path=case_dir / f"{phase}.stdout", stderr_path=case_dir / f"{phase}.stderr",
                           process=record.process, files=files)
    return ctx, capture


def stored_transcript(case_dir: Path, phase: str = "measured", plugins: Any = None) -> Any:
    """What the case's agent driver reads from a stored phase (its :class:`~gripprobe_core.Transcript`)."""
    from ..pluginmanager import make_plugin_manager

    ctx, capture = stored_phase(case_dir, phase)
    driver = (plugins or make_plugin_manager()).registry.agents[ctx.agent.plugin]
    return driver.parse(ctx, capture)


def responses_user_item(text: str) -> dict[str, Any]:
    """A user message as a Responses API ``input`` item."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def read_sse_events(resp: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(event name, data)`` pairs of a Responses API stream (an aiohttp response), checking the framing
    of every event (``event:`` then ``data:``, the data's ``type`` equal to the event name)."""
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
    blocks = (await resp.text()).split("\n\n")
    assert blocks[-1] == ""
    out = []
    for block in blocks[:-1]:
        name_line, data_line = block.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        data = json.loads(data_line[6:])
        assert data["type"] == name_line[7:]
        out.append((name_line[7:], data))
    return out
