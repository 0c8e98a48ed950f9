"""``--executor ray``: each case a Ray task, run on whichever cluster node offers what it needs.

The driver (``gripprobe run`` on any machine that reaches the cluster) submits one task per planned case
(per trial). A worker, on its own node and with no shared filesystem: checks it runs the driver's
versions of gripprobe and its plugins; installs the agent with the same pinned recipe into its node's
agent cache (once per node: a lock keeps concurrent tasks from installing twice); runs the case exactly
as the local executor does (sandboxed phases, proxy, validators, verdict) into a private temporary run
folder; and sends the finished case directory back as bytes (:mod:`..store.archive`). The driver writes
it into the run directory as it arrives, checks its evidence against the worker's digests, signs it with
the run's key (which never leaves the driver: workers sign nothing) and writes case.json last, with the
case's :class:`Placement` (node and attempts). What a worker does is :mod:`.raywork`: its process keeps
its imports, plugins, the run's shared inputs (put in the object store once per run) and the agents it
found installed across the run's cases, and is warmed up before the first case reaches its node.
``--jobs N`` bounds the agents running at once on the whole cluster, as it does locally: up to ``2 N`` cases
are under way, each of its own task, and an :class:`~.rayturns.AgentTurns` actor hands out N agent turns,
so a case is prepared, and the last one judged, shipped back and written, while another's agent runs.

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
import contextlib
import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import UserError
from ..models.results import Attempt, CaseResult, Placement
from ..integrity.seal import write_case_json
from ..store.archive import ArchiveError, unpack_case
from .evidence import evidence_digests
from .executors import case_failed, run_each
from .matrix import PlannedCase
from .raywork import (RAY_MISSING, CaseJob, Delivery, Lost, RunInputs, first_line as _first_line, import_ray,
                      probe_on_node, run_job, versions_of, warm_up)
from .settings import ActiveRun

__all__ = ["RAY_MISSING", "RayExecutor", "fits", "import_ray", "needed", "requirement", "requirement_of"]

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
HEAD_RESOURCE = "node:__internal_head__"
"""The resource Ray gives the head node alone."""
CONNECT_TIMEOUT_S = 5.0


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
        self._runs = 0
        self._warming: list[Any] = []
        self._turns: Any = None
        self._node_ids: list[str] = []
        self._under_way: dict[str, int] = {}
        self._tickets = 0
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
            alive = [n for n in self.ray.nodes() if n.get("Alive")]
            nodes = [dict(n.get("Resources") or {}) for n in alive]
            self._nodes = (time.monotonic(), nodes)
            self._node_ids = [str(n["NodeID"]) for n in alive]
        return nodes

    def _where(self, need: dict[str, float]) -> tuple[Any, str | None]:
        """Where to send a case under ``--jobs``: the node, among those whose resources hold it, with the
        fewest of this run's cases under way (a node runs as many at once as it has warm workers: Ray's
        SPREAD may put both of two cases on one node and start a cold worker there). Soft: a node that
        cannot take it now passes it on."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = self.live_nodes()
        fit = [nid for nid, res in zip(self._node_ids, nodes) if fits(need, [res])]
        if not fit:
            return "SPREAD", None
        best = min(fit, key=lambda nid: self._under_way.get(nid, 0))
        return NodeAffinitySchedulingStrategy(best, soft=True), best

    def check_placement(self, cases: list[PlannedCase], where: Callable[[PlannedCase], str] | None = None) -> None:
        """Exit 2 before anything runs when a case needs what no live node offers; else start warming the
        worker processes that will run the cases (:meth:`warm_up`) while the driver prepares the run."""
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
        with contextlib.suppress(Exception):  # its process starts beside the warm-ups; run_cases tries again
            self.agent_turns()
        self.warm_up(cases)

    def warm_up(self, cases: list[PlannedCase]) -> None:
        """Warm the worker processes that will run ``cases`` while the driver still prepares the run: each
        live node that can run some of them gets as many warm-up tasks as it will run cases at once (its
        CPUs, at most its cases, and with ``--jobs N`` — up to ``2 N`` cases under way, spread over the
        nodes — its share of them), each making a worker process import the harness and load its plugins
        (:class:`WarmWorker`). Together they hold all of the node's CPUs, so its first cases wait for them
        and then run in those warm processes instead of starting cold ones beside them. Nothing waits for
        them; one that fails changes nothing."""
        try:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            task = self.ray.remote(max_retries=0)(warm_up)
            needs = [needed(requirement(case)) for case in cases]
            nodes = []
            for node in self.ray.nodes():
                res = dict(node.get("Resources") or {})
                mine = sum(1 for need in needs if fits(need, [res]))
                if node.get("Alive") and mine and int(res.get("CPU", 0)) >= 1:
                    nodes.append((node["NodeID"], int(res["CPU"]), mine))
            share_of_jobs = -(-2 * self.jobs // max(1, len(nodes)))  # ceil: the cases under way, per node
            for node_id, cpus, mine in nodes:
                count = min(mine, cpus, share_of_jobs or mine)
                where = NodeAffinitySchedulingStrategy(node_id, soft=False)
                for i in range(count):
                    share = cpus - (count - 1) if i == 0 else 1  # whole CPUs (Ray's rule above 1), all of them
                    self._warming.append(task.options(num_cpus=share, scheduling_strategy=where).remote())
        except Exception:  # only an optimisation: the cases warm their workers themselves
            pass

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

    def agent_turns(self) -> Any:
        """The :class:`~.rayturns.AgentTurns` actor granting ``--jobs`` agent turns on the cluster, or None
        with no ``--jobs``. Made once, on the head node: the one node whose loss ends the cluster anyway
        (on any other, a lost node would take every case's turns with it)."""
        if self.jobs <= 0:
            return None
        if self._turns is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            from .rayturns import AgentTurns

            head = next((n["NodeID"] for n in self.ray.nodes()
                         if n.get("Alive") and HEAD_RESOURCE in (n.get("Resources") or {})), None)
            where = NodeAffinitySchedulingStrategy(head, soft=False) if head else "DEFAULT"
            self._turns = self.ray.remote(AgentTurns).options(num_cpus=0, max_restarts=0,
                                                              scheduling_strategy=where).remote(self.jobs)
        return self._turns

    def _remote(self) -> Any:
        if self._task is None:
            self._task = self.ray.remote(max_retries=0)(run_job)
        return self._task

    async def run_cases(self, cases: list[PlannedCase], run: ActiveRun,
                        on_done: Callable[[CaseResult], None], results: list[CaseResult]) -> None:
        shipped = replace(run.settings, results_root=Path("."), installed={}, source_env={}, preflight=None,
                          argv=None, specs_layers=())
        inputs = RunInputs(run_id=run.id, run_values=dict(run.values), settings=shipped,
                           versions=versions_of(run.plugins))
        ref = await asyncio.to_thread(self.ray.put, inputs)  # once per run, not in every task
        self._runs += 1
        key = f"{run.id}/{self._runs}"
        live: dict[str, Any] = {}
        # --jobs N: N agent turns on the cluster (the actor), 2 N cases under way as locally (the next one
        # prepares, the last one is judged and shipped back); a delivered case is written beside them
        turns = self.agent_turns()
        slot = asyncio.Semaphore(2 * self.jobs) if self.jobs > 0 else None

        def job(case: PlannedCase, ticket: int) -> CaseJob:
            env_name = case.backend.api_key_env
            keys = {env_name: run.settings.source_env[env_name]} if env_name and env_name in run.settings.source_env else {}
            return CaseJob(case=case, api_keys=keys, inputs_key=key, inputs=[ref], turns=turns, ticket=ticket)

        try:
            await run_each(cases, 0, lambda case: self._one(case, run, job, live, slot), on_done, results)
        finally:
            if live:
                await asyncio.to_thread(self._cancel, list(live.values()))

    async def _one(self, case: PlannedCase, run: ActiveRun, job: Callable[[PlannedCase, int], CaseJob],
                   live: dict[str, Any], slot: asyncio.Semaphore | None) -> CaseResult:
        """One case through the cluster; whatever goes wrong on the way ends as a classified case."""
        try:
            return await self._attempts(case, run, job, live, slot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug on either side, a write that failed: a HARNESS_ERROR case, never a lost one
            return await asyncio.to_thread(case_failed, case, run, "harness_exception", _first_line(exc))

    async def _attempts(self, case: PlannedCase, run: ActiveRun, job: Callable[[PlannedCase, int], CaseJob],
                        live: dict[str, Any], slot: asyncio.Semaphore | None) -> CaseResult:
        opts = requirement(case)
        need = needed(opts)
        attempts: list[Attempt] = []
        for n in range(1, self.max_attempts + 1):
            async with slot if slot is not None else contextlib.nullcontext():
                ticket, self._tickets = self._tickets, self._tickets + 1  # plan order (the semaphore is FIFO)
                where, node = self._where(need) if self.jobs > 0 else ("SPREAD", None)
                ref = self._remote().options(**opts, scheduling_strategy=where).remote(job(case, ticket))
                live[case.case_id] = ref
                if node is not None:
                    self._under_way[node] = self._under_way.get(node, 0) + 1
                got: Delivery | Lost | None = None
                try:
                    got = await self._wait(ref, need)
                finally:
                    live.pop(case.case_id, None)
                    if node is not None:
                        self._under_way[node] -= 1
                    if not isinstance(got, Delivery):  # a delivered case's worker gave its turn back itself
                        self._end_turn(ticket)
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

    def _end_turn(self, ticket: int) -> None:
        """The attempt holding ``ticket`` ended without delivering (its worker or node lost, the worker's code
        failed, the run cancelled): its agent turn, if it still holds one, goes to the next case; a turn it
        never got is never granted. (A worker that delivered gave its turn back as its last agent exited.)"""
        if self._turns is not None:
            with contextlib.suppress(Exception):
                self._turns.end.remote(ticket)

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


