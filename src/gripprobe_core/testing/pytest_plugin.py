"""pytest plugin (entry point ``pytest11``: ``gripprobe``): fixtures for testing an agent plugin.

Name your agent once in the plugin's pytest configuration::

    [tool.pytest.ini_options]
    gripprobe_agent = "myagent"        # the driver's name (what cli_agents specs put in ``plugin:``)

and the fixtures below are about it. They use the real plugin manager (your installed plugin among the
others), real specs, the real oracle and the real ``gripprobe`` command; nothing stands in for a component.

* ``gripprobe_plugins`` — the plugin manager (session);
* ``agent_name``, ``agent_driver``, ``agent_spec`` — your driver and its cli_agents spec
  (``cli_agents/<name>.yaml`` of the specs :func:`gripprobe_core.testing.kit_specs` finds);
* ``make_phase_ctx(**kw)`` / ``phase_ctx`` — a :class:`~gripprobe_core.PhaseContext` laid out like the
  runner's under ``tmp_path`` (keywords as :func:`gripprobe_core.testing.phase_context`);
* ``agent_install`` — the agent installed at its pinned version in the agent cache (session; installs it
  when missing, as ``gripprobe run`` does; None for an agent that needs no install);
* ``e2e_specs`` — a specs folder holding your agent's spec, every oracle model and every test of the
  specs the kit finds (:func:`gripprobe_core.testing.kit_specs`; no other agent's spec, so only your plugin
  needs to be installed). Shared by the session: copy it (``shutil.copytree``) before adding files of your
  own. Without specs the end-to-end tests skip, and fail under ``CI=true``;
* ``e2e_run(*tests, models=..., fmt=None, args=())`` — the run directory of one real ``gripprobe run`` of
  your agent (installed first) × ``models`` (default oracle-perfect and oracle-lazy) × ``tests``, made
  once per session for the same arguments: the contract's end-to-end run and your own checks of the same
  run share it.

:class:`gripprobe_core.testing.DriverContract` is the contract suite every driver passes; subclass it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pytest

INI_AGENT = "gripprobe_agent"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_AGENT, "Name of the agent driver the gripprobe fixtures are about (its `plugin:` name).",
                  default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: runs real agent processes end to end")


@pytest.fixture(scope="session")
def gripprobe_plugins() -> Any:
    """The real plugin manager: the core's defaults plus every installed plugin."""
    from ..pluginmanager import make_plugin_manager

    return make_plugin_manager()


@pytest.fixture(scope="session")
def agent_name(request: pytest.FixtureRequest) -> str:
    """The driver under test, from the ``gripprobe_agent`` ini option (override the fixture to change it)."""
    name = str(request.config.getini(INI_AGENT) or "").strip()
    if not name:
        pytest.fail(f"set `{INI_AGENT} = \"<driver name>\"` under [tool.pytest.ini_options] (or override the "
                    f"agent_name fixture) to use gripprobe's agent fixtures", pytrace=False)
    return name


@pytest.fixture(scope="session")
def agent_driver(gripprobe_plugins: Any, agent_name: str) -> Any:
    """Your registered driver (fails, naming the load problem, when it is not registered)."""
    found = gripprobe_plugins.registry.agents.get(agent_name)
    if found is None:
        problems = "; ".join(str(f) for f in gripprobe_plugins.failures) or "no plugin registers it"
        pytest.fail(f"no agent driver named {agent_name!r} is registered ({problems})", pytrace=False)
    return found


@pytest.fixture(scope="session")
def agent_spec(gripprobe_plugins: Any, agent_name: str, agent_driver: Any) -> Any:
    """The agent's cli_agents spec (see :func:`gripprobe_core.testing.agent_spec`)."""
    from .helpers import agent_spec as spec_of

    return spec_of(agent_name, gripprobe_plugins)


@pytest.fixture
def make_phase_ctx(tmp_path: Path, agent_spec: Any) -> Callable[..., Any]:
    """``make_phase_ctx(**kw)``: a phase context under this test's ``tmp_path``. ``agent=`` picks another
    spec; every other keyword is :func:`gripprobe_core.testing.phase_context`'s."""
    from .helpers import phase_context

    def make(**kw: Any) -> Any:
        agent = kw.pop("agent", agent_spec)
        return phase_context(tmp_path, agent, **kw)

    return make


@pytest.fixture
def phase_ctx(make_phase_ctx: Callable[..., Any]) -> Any:
    return make_phase_ctx()


@pytest.fixture(scope="session")
def agent_install(gripprobe_plugins: Any, agent_spec: Any) -> Any:
    """The agent at its pinned version in the agent cache (installed now when missing; cached across runs).

    Outside CI an agent that cannot be installed here skips the test with the reason; under ``CI=true`` it
    fails: a component a test needs must be there."""
    from ..agents.install import InstallError
    from .helpers import install_agent

    try:
        return install_agent(agent_spec, gripprobe_plugins)
    except InstallError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot install {agent_spec.id} under CI=true: {exc}", pytrace=False)
        pytest.skip(f"cannot install {agent_spec.id} here: {exc}")


NO_SPECS = ("no GripProbe specs to run end to end: not inside a GripProbe checkout, and this gripprobe-core ships "
            "none (gripprobe_core/_specs); run the tests from a GripProbe checkout or install a gripprobe-core that "
            "ships its specs")


@pytest.fixture(scope="session")
def e2e_specs(tmp_path_factory: pytest.TempPathFactory, agent_name: str) -> Path:
    """A specs folder: your agent's spec, every oracle model and every test of the specs the kit finds
    (:func:`gripprobe_core.testing.kit_specs`: the checkout's, else those shipped with gripprobe-core). With
    none, the end-to-end tests skip; under ``CI=true`` they fail, saying why."""
    from .helpers import copy_specs, kit_specs

    source = kit_specs()
    if source is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{NO_SPECS} (CI=true: a component a test needs must be there)", pytrace=False)
        pytest.skip(NO_SPECS)
    files = [f"cli_agents/{agent_name}.yaml"]
    files += [p.relative_to(source).as_posix() for p in sorted((source / "models").glob("oracle-*.yaml"))]
    files += [p.relative_to(source).as_posix() for p in sorted((source / "tests").glob("*.yaml"))]
    return copy_specs(tmp_path_factory.mktemp("specs"), files, source=source, suite={
        "title": f"{agent_name} x oracle", "agents": [agent_name], "models": ["oracle-perfect"], "tests": ["shell_pwd"]})


@pytest.fixture(scope="session")
def e2e_run(agent_install: Any, e2e_specs: Path, agent_spec: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``e2e_run(*tests, models=("oracle-perfect", "oracle-lazy"), fmt=None, args=())``: the run directory
    of that real run of your agent, made once per session (see the module docstring)."""
    from .helpers import run_gripprobe

    made: dict[tuple[Any, ...], Path] = {}

    def run(*tests: str, models: tuple[str, ...] = ("oracle-perfect", "oracle-lazy"), fmt: str | None = None,
            args: tuple[str, ...] = ()) -> Path:
        key = (tests, tuple(models), fmt or agent_spec.formats[0], tuple(args))
        if key not in made:
            argv = ["run", "--specs", e2e_specs, "--results", tmp_path_factory.mktemp("e2e"), "-a", agent_spec.id,
                    "-f", key[2], "--jobs", "2", *[a for m in models for a in ("-m", m)],
                    *[a for t in tests for a in ("-t", t)], *args]
            made[key] = run_gripprobe(*argv, timeout=1800)
        return made[key]

    return run
