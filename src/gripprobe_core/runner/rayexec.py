"""``--executor ray``: each case a Ray task, run on whichever cluster node offers what it needs.

The driver (``gripprobe run`` on any machine that reaches the cluster) submits one task per planned case
(per trial). A worker, on its own node and with no shared filesystem: checks it runs the driver's
versions of gripprobe and its plugins; installs the agent with the same pinned recipe into its node's
agent cache (once per node: a lock keeps concurrent tasks from installing twice); runs the case exactly
as the local executor does (sandboxed phases, proxy, validators, verdict) into a private temporary run
folder; and sends the finished case directory back as bytes (:mod:`..store.archive`). The driver writes
it into the run directory as it arrives, checks its evidence against the worker's digests, signs it with
the run's key (which never leaves the driver: workers sign nothing) and writes case.json last, with the
case's :class:`Placement` (node and attempts).

Placement: a case asks for its agent spec's and its backend spec's ``resources`` (``CPU`` default 1,
``GPU``, and custom ones such as ``ollama-qwen3-8b``), so it runs only where they are offered and at most
as many at once as the nodes hold. A resource no live node offers is refused before the run starts
(exit 2) and, if its nodes die mid-run, ends the waiting cases as HARNESS_ERROR ``executor_lost``.

Faults: the driver retries a case whose worker or node was lost (Ray's task retries are off, so every
attempt is known), up to ``max_attempts``; each case is delivered exactly once, every attempt recorded.
Ctrl-C or SIGTERM cancels this run's tasks on the cluster (agents killed with them) and leaves the run
resumable with either executor. See docs/scale.md.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import UserError
from ..models.results import Attempt, CaseResult, Placement
from ..integrity.seal import write_case_json
from ..store import RunFolder
from ..store.archive import ArchiveError, pack_case, unpack_case
from ..store.trees import scratch_folder
from .evidence import evidence_digests
from .executors import case_failed, guarded_case, run_each, write_not_run
from .matrix import PlannedCase
from .settings import ActiveRun, RunSettings

RAY_MISSING = ("--executor ray needs Ray, which is not installed: pip install 'gripprobe-core[ray]' "
               "(on this machine and on every node of the cluster)")
MAX_ATTEMPTS = 3
"""Tries per case when its worker or node is lost (``--ray-max-attempts``)."""
WATCH_PERIOD_S = 1.0
"""How often a waiting case checks that some live node can still run it."""
INFEASIBLE_GRACE_S = float(os.environ.get("GRIPPROBE_RAY_INFEASIBLE_S", "10"))
"""How long a case may wait with no live node offering what it needs (a node may come back) before it
ends as ``executor_lost``."""
CANCEL_GRACE_S = 5.0
"""After Ctrl-C: how long cancelled tasks get to kill their agents before their workers are killed."""
NODE_INFO_TTL_S = 1.0
CONNECT_TIMEOUT_S = 5.0
ERROR_TEXT_MAX = 500


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(RAY_MISSING) from None
    return ray


# --------------------------------------------------------------------------- what travels

@dataclass(frozen=True)
class CaseJob:
    """Everything a worker needs to run one case (pickled by Ray; no path of the driver's machine)."""

    case: PlannedCase
    run_id: str
    run_values: dict[str, str]
    settings: RunSettings
    """The run's settings with nothing of the driver's machine: no results root, installs or environment."""
    api_keys: dict[str, str]
    """The driver's value of the case's ``api_key_env``, when set there."""
    versions: dict[str, Any]


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


def requirement(case: PlannedCase) -> dict[str, Any]:
    """The Ray task options of ``case``: its agent's and backend's resources (the larger amount where both
    name one), one CPU unless they say otherwise."""
    need: dict[str, float] = {}
    for source in (case.agent.resources, case.backend.resources):
        for name, amount in source.items():
            need[name] = max(need.get(name, 0.0), float(amount))
    return requirement_of(need)


def requirement_of(resources: Mapping[str, float], *, cpu: float = 1.0) -> dict[str, Any]:
    """Ray task options asking for ``resources`` (``CPU`` default ``cpu``, ``GPU``, custom ones)."""
    need = dict(resources)
    opts: dict[str, Any] = {"num_cpus": need.pop("CPU", cpu)}
    if "GPU" in need:
        opts["num_gpus"] = need.pop("GPU")
    if need:
        opts["resources"] = need
    return opts


def needed(opts: Mapping[str, Any]) -> dict[str, float]:
    """Task options as the resource table a node must hold (Ray's names: CPU, GPU, custom)."""
    out = {"CPU": float(opts.get("num_cpus", 1.0))}
    if opts.get("num_gpus"):
        out["GPU"] = float(opts["num_gpus"])
    out.update(opts.get("resources") or {})
    return {k: v for k, v in out.items() if v > 0}


def fits(need: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> bool:
    """Whether some node's total resources hold ``need``."""
    return any(all(node.get(k, 0.0) >= v for k, v in need.items()) for node in nodes)


def describe_need(need: Mapping[str, float]) -> str:
    return ", ".join(f"{k}: {v:g}" for k, v in sorted(need.items()))


# --------------------------------------------------------------------------- the worker side

_WORKER: dict[str, Any] = {}


def _worker_plugins() -> Any:
    if "plugins" not in _WORKER:
        from ..pluginmanager import make_plugin_manager
        _WORKER["plugins"] = make_plugin_manager()
    return _WORKER["plugins"]


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
    from .eventloop import run as run_loop

    node = _node_facts()
    plugins = _worker_plugins()
    with scratch_folder(f"gripprobe-{job.run_id}-") as root:  # agents' homes: removed whatever they hold
        (root / "scratch").mkdir()

        def open_run(installed: dict) -> ActiveRun:
            settings = replace(job.settings, results_root=root, installed=installed, durable=False,
                               source_env={**os.environ, **job.api_keys})
            return ActiveRun(id=job.run_id, folder=RunFolder(root / "runs" / job.run_id), plugins=plugins,
                             values=job.run_values, scratch=root / "scratch", settings=settings)

        mine = versions_of(plugins)
        if mine != job.versions:
            run = open_run({})
            case_failed(job.case, run, "executor_mismatch",
                        f"node {node['hostname']} ({node['node_ip']}) runs {_short(mine)}, the driver "
                        f"{_short(job.versions)}: install the same versions on every node")
        else:
            try:
                run = open_run(_install(plugins, job))
            except Exception as exc:  # the install failed on this node: the case says so, nothing is lost
                run = open_run({})
                write_not_run(job.case, run, **skipped(f"agent {job.case.agent.id!r} could not be installed on "
                                                       f"node {node['hostname']}: {_first_line(exc)}"))
            else:
                run_loop(guarded_case(job.case, run))
        return Delivery(pack_case(run.folder.case(job.case.case_id)), node)


def probe_on_node(targets: list, api_keys: dict[str, str], timeout_s: float) -> list:
    """The backend preflight from this node (the body of a Ray task): what :func:`.preflight.probe_targets`
    sees from here."""
    from .eventloop import run as run_loop
    from .preflight import probe_targets

    env = {**os.environ, **api_keys}
    return run_loop(probe_targets(targets, _worker_plugins().registry.backends, env, timeout_s))


def _install(plugins: Any, job: CaseJob) -> dict:
    """The case's agent from this node's cache, installed first when the run installs."""
    from ..agents import AgentCache
    from ..agents import ensure_agents_installed, find_installed_agents

    cache = AgentCache.default()
    if job.settings.install_missing:
        return ensure_agents_installed(plugins.registry, [job.case.agent], cache, log=lambda m: None)
    return find_installed_agents(plugins.registry, [job.case.agent], cache)


def _short(v: Mapping[str, Any]) -> str:
    plugins = ", ".join(f"{p[1]} {p[2]}" for p in v.get("plugins", []) if p[1] != "gripprobe-core")
    return f"gripprobe {v.get('gripprobe')}" + (f" with {plugins}" if plugins else "")


# --------------------------------------------------------------------------- the driver side

def check_address(address: str) -> None:
    """A ``HOST:PORT`` that accepts no connection is a one-line error now, not Ray's minutes of retries."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UserError(f"--ray-address {address!r}: give auto or HOST:PORT of the cluster's head "
                        f"(the address `ray start --head` printed, port 6379 by default)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UserError(f"--ray-address {address}: no Ray head answers there ({exc.strerror or exc}); start one "
                        f"with `ray start --head --port {port}` or fix the address") from None


class RayExecutor:
    """Cases as Ray tasks on a cluster (see the module docstring)."""

    name = "ray"

    def __init__(self, ray: Any, *, address: str, jobs: int, max_attempts: int, started_here: bool):
        self.ray = ray
        self.address = address
        self.jobs = jobs
        self.max_attempts = max(1, max_attempts)
        self.started_here = started_here
        self._nodes: tuple[float, list[dict[str, float]]] = (0.0, [])
        self._task: Any = None
        self._closed = False

    @classmethod
    def connect(cls, address: str | None, *, jobs: int = 0, max_attempts: int | None = None) -> "RayExecutor":
        """Join the cluster at ``address`` (``auto``: the one running on this machine; ``HOST:PORT``), or,
        with none given (and no ``RAY_ADDRESS``), start a one-machine cluster for this run."""
        ray = import_ray()
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address and address not in ("auto", "local"):
            check_address(address)
        import logging
        extra: dict[str, Any] = {} if address else {"include_dashboard": False, "_node_ip_address": "127.0.0.1"}
        if address and address.rpartition(":")[0] in ("127.0.0.1", "localhost"):
            extra["_node_ip_address"] = "127.0.0.1"  # a cluster on this machine's loopback: stay on it
        try:
            ctx = ray.init(address=address or "local", namespace="gripprobe", logging_level=logging.ERROR,
                           log_to_driver=False, configure_logging=True, **extra)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(f"--ray-address {address}: cannot join the Ray cluster ({str(exc).splitlines()[0]}); "
                            f"is `ray start --head` running there, with the same Ray version?") from None
        gcs = getattr(ctx, "address_info", {}).get("gcs_address") or address or "local"
        return cls(ray, address=str(gcs), jobs=jobs, max_attempts=max_attempts or MAX_ATTEMPTS,
                   started_here=not address)

    def manifest_fields(self) -> dict:
        return {"executor": self.name, "ray": {"address": self.address, "started_here": self.started_here,
                                               "max_attempts": self.max_attempts, "ray_version": self.ray.__version__}}

    # ---- placement

    def live_nodes(self, *, fresh: bool = False) -> list[dict[str, float]]:
        """The total resources of every live node (cached for a second)."""
        at, nodes = self._nodes
        if fresh or time.monotonic() - at > NODE_INFO_TTL_S:
            nodes = [dict(n.get("Resources") or {}) for n in self.ray.nodes() if n.get("Alive")]
            self._nodes = (time.monotonic(), nodes)
        return nodes

    def check_placement(self, cases: list[PlannedCase], where: Callable[[PlannedCase], str] | None = None) -> None:
        """Exit 2 before anything runs when a case needs what no live node offers."""
        nodes = self.live_nodes(fresh=True)
        bad: dict[str, str] = {}
        for case in cases:
            need = needed(requirement(case))
            if not fits(need, nodes):
                owner = f"model {case.model.id} (backend {case.backend.id})" if (
                    case.backend.resources) else f"agent {case.agent.id}"
                bad.setdefault(describe_need(need), where(case) if where else owner)
        if bad:
            lines = [f"no node of the Ray cluster at {self.address} offers {{{need}}}, which {who} needs; start one "
                     f"with `ray start --address {self.address} --resources '{{...}}'` (docs/scale.md)"
                     for need, who in bad.items()]
            raise UserError("\nerror: ".join(lines))

    def probe(self, targets: list, backends: Mapping[str, Any], env: Mapping[str, str],
              timeout_s: float | None = None) -> list:
        """Probe backends for the preflight: one that asks for resources from a node offering them (the one
        its cases will run on), the others from here. Results in the order of ``targets``."""
        from .eventloop import run as run_loop
        from .preflight import PROBE_TIMEOUT_S, probe_targets

        timeout_s = timeout_s or PROBE_TIMEOUT_S
        groups: dict[tuple, list[int]] = {}
        for i, t in enumerate(targets):
            groups.setdefault(tuple(sorted(t.resources.items())), []).append(i)
        out: list = [None] * len(targets)
        for res, idx in groups.items():
            mine = [targets[i] for i in idx]
            keys = {t.api_key_env: env[t.api_key_env] for t in mine if t.api_key_env and t.api_key_env in env}
            if not res:
                got = run_loop(probe_targets(mine, backends, env, timeout_s))
            else:
                opts = requirement_of(dict(res), cpu=0.0)
                task = self.ray.remote(max_retries=1)(probe_on_node).options(**opts)
                got = self.ray.get(task.remote(mine, keys, timeout_s), timeout=timeout_s * 4 + 60)
            for i, p in zip(idx, got):
                out[i] = p
        return out

    # ---- running

    def _remote(self) -> Any:
        if self._task is None:
            self._task = self.ray.remote(max_retries=0)(run_job)
        return self._task

    async def run_cases(self, cases: list[PlannedCase], run: ActiveRun,
                        on_done: Callable[[CaseResult], None], results: list[CaseResult]) -> None:
        shipped = replace(run.settings, results_root=Path("."), installed={}, source_env={}, preflight=None,
                          argv=None, specs_layers=())
        versions = versions_of(run.plugins)
        live: dict[str, Any] = {}

        def job(case: PlannedCase) -> CaseJob:
            env_name = case.backend.api_key_env
            keys = {env_name: run.settings.source_env[env_name]} if env_name and env_name in run.settings.source_env else {}
            return CaseJob(case=case, run_id=run.id, run_values=dict(run.values), settings=shipped, api_keys=keys,
                           versions=versions)

        try:
            await run_each(cases, self.jobs, lambda case: self._one(case, run, job, live), on_done, results)
        finally:
            if live:
                await asyncio.to_thread(self._cancel, list(live.values()))

    async def _one(self, case: PlannedCase, run: ActiveRun, job: Callable[[PlannedCase], CaseJob],
                   live: dict[str, Any]) -> CaseResult:
        """One case through the cluster; whatever goes wrong on the way ends as a classified case."""
        try:
            return await self._attempts(case, run, job, live)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug on either side, a write that failed: a HARNESS_ERROR case, never a lost one
            return await asyncio.to_thread(case_failed, case, run, "harness_exception", _first_line(exc))

    async def _attempts(self, case: PlannedCase, run: ActiveRun, job: Callable[[PlannedCase], CaseJob],
                        live: dict[str, Any]) -> CaseResult:
        opts = requirement(case)
        need = needed(opts)
        attempts: list[Attempt] = []
        for n in range(1, self.max_attempts + 1):
            ref = self._remote().options(**opts, scheduling_strategy="SPREAD").remote(job(case))
            live[case.case_id] = ref
            try:
                got = await self._wait(ref, need)
            finally:
                live.pop(case.case_id, None)
            if isinstance(got, Delivery):
                return await asyncio.to_thread(self._deliver, case, run, got, attempts)
            attempts.append(Attempt(attempt=n, error=got.error))
            if not got.retry:
                break
        detail = "; ".join(f"attempt {a.attempt}: {a.error}" for a in attempts)
        return await asyncio.to_thread(case_failed, case, run, "executor_lost",
                                       f"the case was lost {len(attempts)} time(s) on the Ray cluster: {detail}")

    async def _wait(self, ref: Any, need: dict[str, float]) -> "Delivery | Lost":
        """The task's delivery, or why it delivered none (its worker or node lost, no live node to run it)."""
        fut = asyncio.wrap_future(ref.future())
        infeasible_since: float | None = None
        while True:
            done, _ = await asyncio.wait({fut}, timeout=WATCH_PERIOD_S)
            if done:
                break
            at, nodes = self._nodes
            if time.monotonic() - at > NODE_INFO_TTL_S:  # one GCS call a second, however many cases wait
                nodes = await asyncio.to_thread(self.live_nodes)
            if fits(need, nodes):
                infeasible_since = None
                continue
            infeasible_since = infeasible_since or time.monotonic()
            if time.monotonic() - infeasible_since >= INFEASIBLE_GRACE_S:
                await asyncio.to_thread(self.ray.cancel, ref, force=True)
                fut.cancel()
                return Lost(f"no live node offers {{{describe_need(need)}}} any more", retry=False)
        exc = fut.exception()
        if exc is None:
            return fut.result()
        if isinstance(exc, self.ray.exceptions.RayTaskError):
            # the worker's own code raised (not a lost node): trying again would do the same
            raise WorkerFailed(f"the Ray worker failed: {_first_line(exc)}")
        return Lost(_first_line(exc), retry=True)

    def _deliver(self, case: PlannedCase, run: ActiveRun, delivery: Delivery, attempts: list[Attempt]) -> CaseResult:
        """Write a delivered case into the run directory, case.json last, with where it ran, signed here by
        the run's key after checking the evidence that arrived against the worker's own digests."""
        case_dir = run.folder.case(case.case_id)
        try:
            raw = unpack_case(delivery.archive, case_dir)
            res = CaseResult.model_validate_json(raw)
            if res.case_id != case.case_id or res.key != case.key or res.run_id != run.id:
                raise ArchiveError(f"it holds case {res.case_id!r} of run {res.run_id!r}")
        except (ArchiveError, ValueError) as exc:
            return case_failed(case, run, "harness_exception", f"the case came back unreadable from the Ray cluster: "
                                                               f"{_first_line(exc)}")
        if evidence_digests(case_dir) != (res.evidence or {}):  # what the worker hashed is what arrived
            return case_failed(case, run, "harness_exception", "the case came back from the Ray cluster with "
                                                               "evidence that differs from its own digests")
        node = delivery.node
        res.placement = Placement(executor="ray", node_id=str(node.get("node_id")), node_ip=node.get("node_ip"),
                                  hostname=node.get("hostname"),
                                  attempts=[*attempts, Attempt(attempt=len(attempts) + 1, node_id=node.get("node_id"))])
        # the driver signs what it received (the key never leaves it), then writes case.json last
        write_case_json(case_dir, res, signer=run.signer, new=True)
        return res

    def _cancel(self, refs: list[Any]) -> None:
        """Stop this run's tasks: an interrupt first (their agents are killed on the way out), then, after
        :data:`CANCEL_GRACE_S`, their workers."""
        for ref in refs:
            try:
                self.ray.cancel(ref, force=False)
            except Exception:
                pass
        try:
            _, pending = self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
        except Exception:
            pending = refs
        for ref in pending:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.ray.shutdown()


class WorkerFailed(RuntimeError):
    """The case's task raised on its node (a harness bug there, not a lost node): not tried again."""


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:ERROR_TEXT_MAX]
