"""The worker side of ``--executor ray`` (:mod:`.rayexec` is the driver's): what travels between the
driver and a node, and what a node's worker process does with it.

A worker process keeps what it made for its first case (:class:`WarmWorker`: the harness's imports, the
plugin manager and registry, its versions, where it runs, the sandbox probe, the run's shared inputs, the
agents it found installed) for every later case of the run; the driver has one warmed on each node
before the first case goes out (:func:`warm_up`). The run's shared inputs (:class:`RunInputs`: id,
values, settings, versions) are put in Ray's object store once per run and fetched once per worker
process; a task carries only its case. With ``--jobs`` a case's agents start only once it holds one of the
cluster's agent turns (:class:`ClusterSlots`, granted by the driver's :class:`~.rayturns.AgentTurns`
actor), as a local case waits for one of :class:`~.phase.AgentSlots`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..store import RunFolder
from ..store.archive import pack_case
from ..store.trees import scratch_folder
from .executors import case_failed, guarded_case, write_not_run
from .matrix import PlannedCase
from .phase import AgentSlots, SlotHold
from .settings import ActiveRun, RunSettings

RAY_MISSING = ("--executor ray needs Ray, which is not installed: pip install 'gripprobe-core[ray]' "
               "(on this machine and on every node of the cluster)")
ERROR_TEXT_MAX = 500


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        from ..errors import UserError
        raise UserError(RAY_MISSING) from None
    return ray


# --------------------------------------------------------------------------- what travels

@dataclass(frozen=True)
class RunInputs:
    """What every case of a run shares: put in Ray's object store once per run, fetched once per worker
    process (not pickled into every task)."""

    run_id: str
    run_values: dict[str, str]
    settings: RunSettings
    """The run's settings with nothing of the driver's machine: no results root, installs or environment."""
    versions: dict[str, Any]


@dataclass(frozen=True)
class CaseJob:
    """Everything a worker needs to run one case (pickled by Ray; no path of the driver's machine)."""

    case: PlannedCase
    api_keys: dict[str, str]
    """The driver's value of the case's ``api_key_env``, when set there."""
    inputs_key: str
    """Names the run's :class:`RunInputs` (the run id and a counter of the driver's)."""
    inputs: list
    """``[ObjectRef]`` of the run's :class:`RunInputs`: inside a list so that Ray does not resolve it for
    each task; a worker that has not seen ``inputs_key`` yet fetches it (once)."""
    turns: Any = None
    """The run's :class:`~.rayturns.AgentTurns` actor (``--jobs N``: N agents at once on the cluster), or
    None (no cap: the cluster's resources decide)."""
    ticket: int = 0
    """This attempt's ticket for an agent turn (issued by the driver in plan order)."""


@dataclass(frozen=True)
class Delivery:
    """What a worker sends back: the case directory (case.json inside) and where it ran."""

    archive: bytes
    node: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Lost:
    """Why an attempt delivered nothing, and whether another attempt could."""

    error: str
    retry: bool


def versions_of(plugins: Any) -> dict[str, Any]:
    from .. import __version__
    return {"gripprobe": __version__,
            "plugins": sorted([p.name, p.distribution, p.version] for p in plugins.records())}


# --------------------------------------------------------------------------- the worker side

class TurnEnded(RuntimeError):
    """The driver ended this attempt before it got its turn (the run was cancelled or gave the case up)."""


class ClusterSlots(AgentSlots):
    """One case's view of the cluster's agent turns, for :func:`~.case.run_case` on a worker: its
    :meth:`hold` asks the :class:`AgentTurns` actor ``turns`` for ticket ``ticket``'s turn."""

    def __init__(self, turns: Any, ticket: int):
        super().__init__(1)
        self.turns, self.ticket = turns, ticket

    def hold(self) -> SlotHold:
        return ClusterHold(self)


class ClusterHold(SlotHold):
    """:class:`~.phase.SlotHold` for a turn granted by the cluster's :class:`AgentTurns` actor."""

    def __init__(self, slots: ClusterSlots):
        super().__init__(slots, slots.ticket)
        self._cluster = slots
        self._taken = self._over = False

    async def take(self) -> None:
        if self._taken or self._over:
            return
        t0 = time.monotonic()
        granted = await asyncio.wrap_future(self._cluster.turns.take.remote(self._cluster.ticket).future())
        self.waited_s += time.monotonic() - t0
        if not granted:
            self._over = True
            raise TurnEnded("the driver ended this case's attempt before its agent's turn came")
        self._taken = True

    def give_back(self) -> None:
        if self._over:
            return
        self._over = True
        self._cluster.turns.end.remote(self._cluster.ticket)  # nothing to wait for: the driver ends it too


class WarmWorker:
    """What one Ray worker process keeps across the cases it runs (one per process, :func:`warm`). Ray
    keeps a run's worker processes for the run's tasks, so only a process's first case (or the warm-up
    task the driver sends ahead) pays for these."""

    INPUTS_KEPT = 4

    def __init__(self) -> None:
        from .. import pluginmanager

        self.plugins = pluginmanager.make_plugin_manager()
        self.plugins.registry  # collected now, not in the first case
        self.versions = versions_of(self.plugins)
        self.node = _node_facts()
        from .sandbox import probe_report
        probe_report()  # this node's bubblewrap probe, which every case's sandbox asks for (kept per process)
        self._inputs: dict[str, RunInputs] = {}
        self._installed: dict[tuple, Any] = {}

    def inputs(self, job: CaseJob) -> RunInputs:
        """The run's shared inputs, fetched from the object store the first time this process sees them."""
        got = self._inputs.get(job.inputs_key)
        if got is None:
            got = import_ray().get(job.inputs[0])
            while len(self._inputs) >= self.INPUTS_KEPT:
                self._inputs.pop(next(iter(self._inputs)))
            self._inputs[job.inputs_key] = got
        return got

    def install(self, agent: Any, install_missing: bool) -> dict:
        """The case's agent from this node's cache (installed first when the run installs: once per node, a
        lock makes concurrent tasks wait for the first), remembered while its executable is there."""
        from ..agents import AgentCache, ensure_agents_installed, find_installed_agents, install_recipe

        recipe = install_recipe(self.plugins.registry, agent)
        if recipe is None:
            return {}
        key = (agent.id, recipe.package, recipe.version)
        known = self._installed.get(key)
        if known is not None and Path(known.executable).exists():
            return {agent.id: known}
        cache = AgentCache.default()
        if install_missing:
            got = ensure_agents_installed(self.plugins.registry, [agent], cache, log=lambda m: None)
        else:
            got = find_installed_agents(self.plugins.registry, [agent], cache)
        if agent.id in got:
            self._installed[key] = got[agent.id]
        return got


_WARM: WarmWorker | None = None


def warm() -> WarmWorker:
    """This worker process's :class:`WarmWorker`, made on first use."""
    global _WARM
    if _WARM is None:
        _WARM = WarmWorker()
    return _WARM


def warm_up() -> str:
    """The body of a warm-up task: make this worker process's :class:`WarmWorker`; its node id."""
    return str(warm().node.get("node_id"))


def _node_facts() -> dict[str, str | None]:
    ray = import_ray()
    try:
        ip = ray.util.get_node_ip_address()
    except Exception:
        ip = None
    return {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ip, "hostname": socket.gethostname()}


def run_job(job: CaseJob) -> Delivery:
    """Run one case on this node (the body of the Ray task) and pack its directory."""
    from .case import skipped
    from .eventloop import SWITCH_INTERVAL_S, run as run_loop

    w = warm()
    node, plugins = w.node, w.plugins
    inputs = w.inputs(job)
    with scratch_folder(f"gripprobe-ray-{inputs.run_id}-") as root:  # agents' homes (never a driver's stale scratch)
        (root / "scratch").mkdir()

        def open_run(installed: dict) -> ActiveRun:
            settings = replace(inputs.settings, results_root=root, installed=installed, durable=False,
                               source_env={**os.environ, **job.api_keys})
            return ActiveRun(id=inputs.run_id, folder=RunFolder(root / "runs" / inputs.run_id), plugins=plugins,
                             values=inputs.run_values, scratch=root / "scratch", settings=settings)

        if w.versions != inputs.versions:
            run = open_run({})
            case_failed(job.case, run, "executor_mismatch",
                        f"node {node['hostname']} ({node['node_ip']}) runs {_short(w.versions)}, the driver "
                        f"{_short(inputs.versions)}: install the same versions on every node")
        else:
            try:
                run = open_run(w.install(job.case.agent, inputs.settings.install_missing))
            except Exception as exc:  # the install failed on this node: the case says so, nothing is lost
                run = open_run({})
                write_not_run(job.case, run, **skipped(f"agent {job.case.agent.id!r} could not be installed on "
                                                       f"node {node['hostname']}: {first_line(exc)}"))
            else:
                # as in a local run: the loop relaying the agent's model calls waits at most 1 ms for the GIL
                previous = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_INTERVAL_S)
                slots = ClusterSlots(job.turns, job.ticket) if job.turns is not None else None
                try:
                    run_loop(guarded_case(job.case, run, slots))
                finally:
                    sys.setswitchinterval(previous)
        return Delivery(pack_case(run.folder.case(job.case.case_id)), node)


def probe_on_node(targets: list, api_keys: dict[str, str], timeout_s: float) -> list:
    """The backend preflight from this node (the body of a Ray task): what :func:`.preflight.probe_targets`
    sees from here."""
    from .eventloop import run as run_loop
    from .preflight import probe_targets

    env = {**os.environ, **api_keys}
    return run_loop(probe_targets(targets, warm().plugins.registry.backends, env, timeout_s))


def _short(v: Mapping[str, Any]) -> str:
    plugins = ", ".join(f"{p[1]} {p[2]}" for p in v.get("plugins", []) if p[1] != "gripprobe-core")
    return f"gripprobe {v.get('gripprobe')}" + (f" with {plugins}" if plugins else "")


def first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:ERROR_TEXT_MAX]
