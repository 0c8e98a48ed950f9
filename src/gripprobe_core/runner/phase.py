"""One phase of a case, top to bottom: prepare → launch → collect.

* **prepare**: a fresh workspace (seeded from the test's fixtures), HOME/XDG/TMPDIR and scratch, outside
  the results tree; the challenge server; the backend opened for this phase; the recording proxy in its
  mode; then the frozen :class:`~gripprobe_core.phase.PhaseContext` the driver sees, and from it the
  agent's environment and command.
* **launch**: the agent, sandboxed, with a timeout that kills everything it started.
* **collect**: servers stopped (so every record is complete); the harness's own look at the backend; the
  measured workspace copied out; the files the driver wants kept, copied; the phase's context written.

:func:`run_phases` runs a case's phases in order; sandboxed, it prepares the next phase while an agent
runs, with its sandbox already started and held at a gate (:func:`stage`), and collects a phase while the
next agent runs: the next agent is released the moment the previous one's end is seen, so one follows the
other with only the init's fork and exec between them (docs/sandbox.md, Pre-started sandboxes).

What a phase gives is its evidence (:class:`~.judge.PhaseEvidence`); the case judges it once both phases
ran, with the one judge a recompute uses too (:func:`~.judge.judge_case`). Each step returns a value the
next one takes; nothing is passed on the side. Everything that touches the disk or spawns runs in a worker
thread, so the event loop that relays every proxied model call of every case running at once never waits
on it (benchmarks/loop_lag.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from ..challenges import ChallengeServer
from ..drivers import AgentDriver, Backend, BackendPhase
from ..jsonl import dumps
from ..models.results import BackendProbe, ProcessResult
from ..models.specs import TestSpec
from ..interaction import InteractionSupport
from ..phase import SEEN_ROOT, SESSION_TRANSCRIPT, AgentCommand, Phase, PhaseContext, SessionChannel
from ..runvalues import render_test, template_vars
from ..store import atomic_write_json, atomic_write_text
from ..store.trees import remove_tree
from . import live
from .env import base_env, make_phase_dirs
from .evidence import LISTING, KeptFiles, copy_workspace, keep_files
from .phase_files import PhaseEvidence, phase_context_name, phase_context_record, proxy_record_name
from .matrix import PlannedCase
from .netbridge import NetBridge, loopback_port
from .process import Gate, Session, Spawned, run_process, spawn_process
from .proxy_session import ProxySession, open_proxy_session
from .sandbox import Sandbox, resolve_sandbox
from .settings import ActiveRun

PHASES: tuple[Phase, Phase] = ("warmup", "measured")


@dataclass(frozen=True)
class PhaseResult:
    """What one phase gave the case: its evidence (for the judge) and its warnings."""

    evidence: PhaseEvidence
    warnings: list[str] = field(default_factory=list)
    """Classified one-liners for case.json ``warnings`` (``kept_file_refused: …``)."""

    @property
    def harness_error(self) -> str | None:
        """Set when the phase could not run at all (a forced proxy that was not available ...)."""
        return self.evidence.never_ran


class AgentSlots:
    """The agents one executor lets run at once (``--jobs``), granted in the order the cases were planned.

    A case holds its slot from its first agent's start to its last agent's exit, so its phases run back to
    back (the warmup warms the backend's caches for the measured phase; no other case's agent comes
    between them). Preparing its first phase, and collecting, judging and writing after its last, happen
    outside the slot: while the next case's agent runs, on another core when there is one. A case that
    runs no agent gives its turn on, so it never holds up the cases after it."""

    def __init__(self, slots: int):
        self._free, self._issued, self._turn = max(1, slots), 0, 0
        self._waiting: dict[int, asyncio.Future] = {}
        self._passed: set[int] = set()

    def hold(self) -> "SlotHold":
        """A case's place in line: take one per case, in plan order, before anything is awaited."""
        self._issued += 1
        return SlotHold(self, self._issued - 1)

    def _grant(self) -> None:
        while self._free > 0 and self._turn < self._issued:
            if self._turn in self._passed:
                self._passed.discard(self._turn)
            elif (waiter := self._waiting.pop(self._turn, None)) is None:
                return  # the next in line is not ready yet: it keeps its turn
            else:
                self._free -= 1
                waiter.set_result(None)
            self._turn += 1

    async def _take(self, ticket: int) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = waiter
        self._grant()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # granted as it was cancelled: the slot goes on
            else:
                self._waiting.pop(ticket, None)
                self._pass(ticket)
            raise

    def _release(self) -> None:
        self._free += 1
        self._grant()

    def _pass(self, ticket: int) -> None:
        if ticket >= self._turn:
            self._passed.add(ticket)
            self._grant()


class SlotHold:
    """One case's place in line and hold on an agent slot: taken before its first launch, given back after
    its last or on any way out (both idempotent; giving back a slot never taken passes the turn on);
    ``waited_s`` is how long it queued for the slot."""

    def __init__(self, slots: AgentSlots, ticket: int):
        self._slots, self._ticket, self._held, self._done, self.waited_s = slots, ticket, False, False, 0.0

    async def take(self) -> None:
        if self._held or self._done:
            return
        t0 = time.monotonic()
        await self._slots._take(self._ticket)
        self._held, self.waited_s = True, self.waited_s + time.monotonic() - t0

    def give_back(self) -> None:
        if self._done:
            return
        self._done = True
        if self._held:
            self._held = False
            self._slots._release()
        else:
            self._slots._pass(self._ticket)


@dataclass(frozen=True)
class PhaseSetup:
    """A phase ready to launch (the answer of :func:`prepare`)."""

    ctx: PhaseContext
    driver: AgentDriver
    backend: Backend
    upstream: str
    proxy: ProxySession
    env: dict[str, str]
    command: AgentCommand
    sandbox: Sandbox
    challenge: ChallengeServer | None
    facts: Mapping[str, Any]
    forwards: Mapping[int, Path] = field(default_factory=dict)
    """Sandboxed: the ports the agent may reach (its proxy, its challenge server) → the harness's Unix
    socket behind each (:class:`~.netbridge.NetBridge`)."""
    interaction: InteractionSupport = InteractionSupport("native", True)
    """How the driver meets the case's interaction policy (asked before its environment and command)."""
    endpoint: Any = None
    """The backend opened for the phase; one with ``warnings`` (the replay's unmatched requests) adds them."""


async def run_phases(case: PlannedCase, run: ActiveRun, case_dir: Path, *, slot: SlotHold | None = None) -> list[PhaseResult]:
    """Run the case's phases in order (the measured phase alone when the run skips the warmup) and return what
    each left (a phase that could not run ends the list).

    With ``slot`` the first agent starts once the case holds an agent slot, given back at the last
    agent's exit. Sandboxed, the next phase is prepared (its sandbox pre-started) while an agent runs, it is
    released as soon as that agent's end is seen (after an agent on a remote backend, once that backend is
    probed), and a phase is collected while the next agent runs. Unsandboxed
    (``--sandbox none``) a phase is collected, and the next prepared, after its agent and everything it
    left behind are gone: an agent that may reach every path must not find the next phase's folders."""
    overlap = resolve_sandbox(case.sandbox).confined
    phases = PHASES if run.settings.warmup else PHASES[1:]
    finishing: list[asyncio.Future] = []
    never_ran: list[PhaseResult] = []
    ended: _Ended | None = None  # the last agent: its exit seen, its collect not yet started
    async with AsyncExitStack() as outer:  # on any way out: pending collects cancelled, every server stopped
        outer.push_async_callback(_cancel_all, finishing)
        try:
            nxt: _OpenPhase | None = await _open_phase(case, run, phases[0], case_dir, outer)
            for i in range(len(phases)):
                cur, nxt, last = nxt, None, i == len(phases) - 1
                assert cur is not None
                if isinstance(cur.setup, PhaseResult):  # the proxy was required and is not available: no agent
                    if ended is not None:
                        finishing.append(asyncio.ensure_future(_finish(ended, run, case_dir)))
                        ended = None
                    await cur.servers.aclose()
                    never_ran.append(cur.setup)
                    break
                if slot is not None:
                    await slot.take()
                live.emit(case.case_id, case.key, phases[i], cur.setup.proxy.record_path if cur.setup.proxy.started else None,
                          activity=getattr(cur.setup.proxy.handle, "activity", None))
                exited = asyncio.Event()

                def on_exit(exited: asyncio.Event = exited, last: bool = last) -> None:
                    exited.set()
                    if last and slot is not None:
                        slot.give_back()  # the next case's agent may start now

                agent = asyncio.ensure_future(cur.staged.run(on_exit=on_exit) if cur.staged is not None
                                              else launch(cur.setup, run, case_dir))
                if ended is not None:  # collected beside this agent (its task is queued first)
                    finishing.append(asyncio.ensure_future(_finish(ended, run, case_dir)))
                    ended = None
                try:
                    if overlap and not last:
                        nxt = await _open_phase(case, run, phases[i + 1], case_dir, outer)
                    if overlap and not cur.setup.backend.remote:  # the next agent may start at this one's exit
                        await _exit_of(agent, exited)
                    else:
                        await asyncio.wait([agent])
                except BaseException:
                    if not agent.done():
                        agent.cancel()
                        await asyncio.gather(agent, return_exceptions=True)
                    raise
                if agent.done():
                    agent.result()  # a harness error in the launch surfaces here, before anything else starts
                if slot is not None and last:
                    slot.give_back()
                # a remote backend is looked at before the next agent (it may share the backend): its agent was
                # awaited to the end above
                probe = await _probe_backend(cur.setup) if agent.done() else None
                ended = _Ended(cur, agent, probe)
                if not overlap:
                    finishing.append(asyncio.ensure_future(_finish(ended, run, case_dir)))
                    ended = None
                    await finishing[-1]
                    if not last:
                        nxt = await _open_phase(case, run, phases[i + 1], case_dir, outer)
            if ended is not None:
                finishing.append(asyncio.ensure_future(_finish(ended, run, case_dir)))
                ended = None
        finally:
            if ended is not None and not ended.agent.done():  # its exit seen, its drain cut short
                ended.agent.cancel()
                await asyncio.gather(ended.agent, return_exceptions=True)
        return [*[await f for f in finishing], *never_ran]


@dataclass(frozen=True)
class _Ended:
    """A phase whose agent's exit was seen (its task may still be draining the pipes)."""

    phase: "_OpenPhase"
    agent: "asyncio.Future[ProcessResult]"
    probe: BackendProbe | None


async def _exit_of(agent: "asyncio.Future[ProcessResult]", exited: asyncio.Event) -> None:
    """Until the agent's exit is seen (``exited``) or its task ends, whichever comes first."""
    if agent.done() or exited.is_set():
        return
    seen: asyncio.Future[Any] = asyncio.ensure_future(exited.wait())
    try:
        await asyncio.wait([agent, seen], return_when=asyncio.FIRST_COMPLETED)
    finally:
        seen.cancel()


async def _finish(ended: _Ended, run: ActiveRun, case_dir: Path) -> PhaseResult:
    """The phase collected once its agent's task has ended."""
    return await _close_phase(ended.phase, run, await ended.agent, ended.probe, case_dir)


@dataclass(frozen=True)
class _OpenPhase:
    """A prepared phase (or the result of one that cannot run) and the servers it holds."""

    setup: "PhaseSetup | PhaseResult"
    servers: AsyncExitStack
    staged: "StagedAgent | None" = None
    """Sandboxed: its agent's sandbox, pre-started (discarded with the servers unless it ran)."""


async def _open_phase(case: PlannedCase, run: ActiveRun, phase: Phase, case_dir: Path,
                      outer: AsyncExitStack) -> _OpenPhase:
    servers = await outer.enter_async_context(AsyncExitStack())  # challenge, backend, proxy: stopped even on error
    setup = await prepare(case, run, phase, case_dir, run.scratch / case.case_id / phase, servers)
    staged = None
    if isinstance(setup, PhaseSetup) and setup.sandbox.confined:  # its start is then only the init's exec
        staged = await stage(setup, run, case_dir, prestart=True)
        servers.push_async_callback(staged.discard)  # first on the way out: before its network bridge closes
    return _OpenPhase(setup, servers, staged)


async def _close_phase(op: _OpenPhase, run: ActiveRun, process: ProcessResult, probe: BackendProbe | None,
                       case_dir: Path) -> PhaseResult:
    await op.servers.aclose()  # every record complete before it is read
    assert isinstance(op.setup, PhaseSetup)
    return await collect(op.setup, run, process, probe, case_dir)


async def _cancel_all(tasks: list[asyncio.Future]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ------------------------------------------------------------------------------------------- prepare

async def prepare(case: PlannedCase, run: ActiveRun, phase: Phase, case_dir: Path, scratch: Path,
                  servers: AsyncExitStack) -> PhaseSetup | PhaseResult:
    """Everything the agent needs before it starts; servers are entered into ``servers``."""
    driver = run.registry.agents[case.agent.plugin]
    backend = run.registry.backends[case.backend.kind]
    artifacts = case_dir / "artifacts"
    workspace, home, tmpdir = scratch / "workspace", scratch / "home", scratch / "tmp"

    challenge, facts = None, {}
    if case.test.challenge is not None:
        challenge = run.registry.challenges[case.test.challenge.kind](dict(case.test.challenge.options), phase)
        await challenge.start()
        servers.push_async_callback(challenge.stop)
        facts = dict(challenge.facts)
    box = resolve_sandbox(case.sandbox)
    seen_at = SEEN_ROOT if box.confined else None  # the agent's paths: the same for every phase and trial
    test = render_test(case.test, template_vars(run.values, workspace=(seen_at / "workspace") if seen_at else workspace,
                                                challenge_facts=facts))
    await asyncio.to_thread(_fresh_folder, scratch)
    await asyncio.to_thread(_lay_out, workspace, test, case_dir if phase == "measured" else None)

    endpoint = await backend.open(BackendPhase(
        spec=case.backend, url=run.settings.base_url_override or case.backend.base_url, phase=phase,
        format=case.format, reference=list(test.reference), dialects=run.registry.dialects,
        record_path=artifacts / f"oracle.{phase}.jsonl", trial=case.key.trial))
    servers.push_async_callback(endpoint.close)
    upstream = endpoint.base_url

    before_routing = PhaseContext(
        run_id=run.id, case_id=case.case_id, phase=phase, agent=case.agent, model=case.model, backend=case.backend,
        test=test, format=case.format, prompt=test.prompt, workspace=workspace, home=home, tmpdir=tmpdir,
        artifacts_dir=artifacts, base_url=upstream, model_name=case.backend.agent_model_id or case.backend.model_id,
        api_key=run.settings.source_env.get(case.backend.api_key_env) if case.backend.api_key_env else None,
        timeout_s=phase_timeout(case, run), run_values=dict(run.values),
        agent_executable=getattr(run.settings.installed.get(case.agent.id), "executable", None),
        interaction=case.interaction, seen_at=seen_at)
    proxy = await open_proxy_session(run.hooks, driver, before_routing, mode=case.proxy_mode, upstream=upstream,
                                     record_path=artifacts / proxy_record_name(phase),
                                     max_request_body=run.settings.proxy_max_body, token_budget=case.token_budget)
    servers.push_async_callback(proxy.stop)
    if proxy.harness_error:
        return await _not_run(before_routing, proxy, facts, proxy.harness_error)
    ctx = replace(before_routing, base_url=proxy.base_url or upstream)
    forwards: dict[int, Path] = {}
    if box.confined:  # a network of its own: only its proxy (or local backend) and its challenge server
        ports, unreachable = reachable_ports(ctx.base_url, proxied=proxy.started, challenge=challenge)
        if unreachable:
            return await _not_run(ctx, proxy, facts, unreachable)
        bridge = NetBridge(ports)
        await bridge.start()
        servers.push_async_callback(bridge.close)
        forwards = bridge.forwards
    support = interaction_support(driver, ctx)
    env, command = await asyncio.to_thread(_agent_setup, run, case, driver, ctx)
    return PhaseSetup(ctx, driver, backend, upstream, proxy, env, command, box, challenge, facts, forwards, support,
                      endpoint)


def interaction_support(driver: AgentDriver, ctx: PhaseContext) -> InteractionSupport:
    """How ``driver`` meets ``ctx.interaction`` (its ``interaction_support``, else the default: only no
    policy or auto-approve is applied); a driver's answer that is not an InteractionSupport is not applied."""
    from ..drivers import BaseAgentDriver

    ask = getattr(driver, "interaction_support", None)
    try:
        got = ask(ctx) if callable(ask) else BaseAgentDriver.interaction_support(driver, ctx)  # type: ignore[arg-type]
    except Exception as exc:  # a plugin's bug must not lose the case: the policy is then not applied
        return InteractionSupport("none", False, f"the driver failed to say how it applies the policy: "
                                                 f"{type(exc).__name__}: {exc}")
    if not isinstance(got, InteractionSupport):
        return InteractionSupport("none", False, "the driver's interaction_support gave no InteractionSupport")
    return got


#: A sandboxed agent whose backend is neither proxied nor on this machine's loopback cannot reach it.
UNREACHABLE_BACKEND = "backend_unreachable_in_sandbox"


def reachable_ports(base_url: str, *, proxied: bool, challenge: ChallengeServer | None) -> tuple[set[int], str | None]:
    """The loopback ports a sandboxed agent may reach: its base URL's (the proxy, or with no proxy a
    backend on this machine's loopback) and its challenge server's; and why not, when its backend is
    elsewhere (a remote backend is reached only through the proxy)."""
    ports: set[int] = set()
    port = loopback_port(base_url)
    if port is None:
        what = "its recording proxy" if proxied else "its backend"
        return ports, (f"{UNREACHABLE_BACKEND}: {what} at {base_url} is not on this machine's loopback, and a "
                       f"sandboxed agent reaches nothing else; a remote backend is reached through the recording "
                       f"proxy (--telemetry-proxy auto or force), or run --sandbox none")
    ports.add(port)
    if challenge is not None and (cport := loopback_port(challenge.url)) is not None:
        ports.add(cport)
    return ports, None


def _fresh_folder(scratch: Path) -> None:
    """The phase's own folder, made now: whatever was there (an unsandboxed warmup agent may have planted
    links where the measured phase's HOME will be) goes first, so config files are never written through it."""
    remove_tree(scratch)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(mode=0o700)


def _lay_out(workspace: Path, test: TestSpec, keep_prompt_in: Path | None) -> None:
    """The workspace seeded with the (rendered) fixtures, and the measured prompt."""
    workspace.mkdir(parents=True, exist_ok=True)
    for fx in test.fixtures:
        target = workspace / fx.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(fx.content, encoding="utf-8")
        if fx.mode is not None:
            target.chmod(fx.mode)
    if keep_prompt_in is not None:
        atomic_write_text(keep_prompt_in / "prompt.txt", test.prompt, sync=False)


def _agent_setup(run: ActiveRun, case: PlannedCase, driver: AgentDriver,
                 ctx: PhaseContext) -> tuple[dict[str, str], AgentCommand]:
    """The agent's environment (the allowlist, fresh HOME/XDG/TMPDIR, the backend's and driver's
    variables, every plugin's additions) and its command. The driver writes its config files here."""
    make_phase_dirs(ctx.home, ctx.tmpdir, ctx.xdg)
    env = base_env(ctx.home, ctx.tmpdir, ctx.xdg, source=run.settings.source_env)
    env.update(case.backend.env)
    env.update({str(k): str(v) for k, v in dict(driver.environment(ctx)).items()})
    env.update(run.hooks.build_env(ctx.agent, ctx))
    return env, driver.command(ctx)


async def _not_run(ctx: PhaseContext, proxy: ProxySession, facts: Mapping[str, Any], error: str) -> PhaseResult:
    """The phase that never ran: its proxy was required (``force``) and is not available, or a sandboxed
    agent could not reach its backend."""
    await asyncio.to_thread(atomic_write_json, ctx.artifacts_dir / phase_context_name(ctx.phase),
                            phase_context_record(ctx, kept=[], harness_error=error), sync=False)
    return PhaseResult(PhaseEvidence(ctx, ProcessResult(status="ok", error=error), proxy=proxy.describe(),
                                     challenge=dict(facts), never_ran=error))


def phase_timeout(case: PlannedCase, run: ActiveRun) -> float:
    """The run's --timeout, else the test's, else the model's policy for this agent, else its general
    policy, else the agent spec's."""
    if run.settings.timeout_s:
        return run.settings.timeout_s
    if case.test.timeout_s:
        return case.test.timeout_s
    pol = case.model.policy
    agent_pol = pol.agents.get(case.agent.id)
    if agent_pol and agent_pol.timeout_s:
        return agent_pol.timeout_s
    return pol.timeout_s or case.agent.timeout_s


# -------------------------------------------------------------------------------------------- launch

async def launch(setup: PhaseSetup, run: ActiveRun, case_dir: Path) -> ProcessResult:
    """Run the agent, sandboxed (as the case settled), until it exits or its timeout ends it."""
    return await (await stage(setup, run, case_dir, prestart=False)).run()


@dataclass
class StagedAgent:
    """A phase's agent ready to start (the answer of :func:`stage`): its command line built and, sandboxed and
    pre-started, its sandbox already up (bwrap, its mounts and network, the init) and waiting at its gate.
    :meth:`run` starts the agent (releases the gate: its ``duration_s``, ``started_at`` and timeout start
    there) and runs it to its end; :meth:`discard` tears a pre-started sandbox down unused. A phase calls one
    of them (discard after run is a no-op)."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    stdin: bytes | None
    session: Session | None
    timeout_s: float
    stdout_path: Path
    stderr_path: Path
    cap_bytes: int
    sandboxed: bool
    stop: tuple[Callable[[], bool], str] | None
    spawned: Spawned | None = None
    """The pre-started sandbox (None: the process is spawned at :meth:`run`)."""

    async def run(self, on_exit: Callable[[], None] | None = None) -> ProcessResult:
        """``on_exit``: called the moment the agent's end is seen (a pre-started sandbox only)."""
        how = dict(stdin=self.stdin, timeout_s=self.timeout_s, stdout_path=self.stdout_path,
                   stderr_path=self.stderr_path, cap_bytes=self.cap_bytes, stop=self.stop, session=self.session)
        if self.spawned is not None:
            return await self.spawned.run(**how, on_exit=on_exit)  # type: ignore[arg-type]
        return await run_process(self.argv, cwd=self.cwd, env=self.env, sandboxed=self.sandboxed, **how)  # type: ignore[arg-type]

    async def discard(self) -> None:
        if self.spawned is not None:
            await self.spawned.discard()


async def stage(setup: PhaseSetup, run: ActiveRun, case_dir: Path, *, prestart: bool) -> StagedAgent:
    """The agent's command line, sandboxed as the case settled; with ``prestart`` and a sandbox, the sandbox
    is started now and holds the agent at its gate until :meth:`StagedAgent.run` (``--sandbox none`` is
    never pre-started: an unconfined process could see whatever runs beside it). The caller runs or
    discards what it gets."""
    ctx, command, box = setup.ctx, setup.command, setup.sandbox
    installed = getattr(run.settings.installed.get(ctx.agent.id), "path", None)
    cwd = command.cwd or ctx.workspace
    needs = [*([installed] if installed else []), *command.read_only]
    # The PATH the sandbox shows, with and without it: `python3` is then the same program in both (outside,
    # a pyenv shim first on PATH cost about 0.1 s of CPU a call: the extra CPU of --sandbox none).
    env = {**setup.env, "PATH": box.shown_path(setup.env.get("PATH", ""),
                                               binds=[*needs, ctx.workspace, ctx.home, ctx.tmpdir])}
    argv = [resolve_executable(command.argv[0], env["PATH"]), *command.argv[1:]]
    stdin = command.stdin
    rw_at: list[tuple[Path, Path]] = []
    if ctx.seen_at is not None and box.confined:  # the phase's folder at one path, named so on the command line
        seen = seen_paths(ctx.workspace.parent, ctx.seen_at)
        argv, env = [seen(a) for a in argv], {k: seen(v) for k, v in env.items()}
        stdin = seen(stdin.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape") if stdin else stdin
        rw_at = [(ctx.workspace.parent, ctx.seen_at)]
    gate = Gate(exit_note=True) if prestart and box.confined else None
    try:
        argv = box.wrap(argv, cwd=ctx.seen(cwd), rw=[ctx.workspace, ctx.home, ctx.tmpdir], ro=needs,
                        rw_at=rw_at, forwards=setup.forwards, gate=gate.read_fd if gate is not None else None,
                        exit_note=gate.note_write_fd if gate is not None else None)
    except BaseException:
        if gate is not None:
            gate.shut()
        raise
    budget = setup.proxy.token_budget
    session = None
    if command.session is not None:
        talk, responder = command.session, run.responder(ctx.interaction)
        transcript = session_transcript(ctx)

        async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await talk.run(SessionChannel(reader, writer, responder, transcript, ctx))
    staged = StagedAgent(
        argv, cwd, env, stdin, session, ctx.timeout_s, case_dir / f"{ctx.phase}.stdout", case_dir / f"{ctx.phase}.stderr",
        run.settings.capture_cap, box.confined,
        (setup.proxy.token_budget_exceeded, f"the phase's token budget of {budget} tokens is spent")
        if budget is not None else None)
    if gate is not None:
        staged.spawned = await spawn_process(argv, cwd=cwd, env=env, with_stdin=stdin is not None or session is not None,
                                             sandboxed=True, gate=gate)
    return staged


#: What may follow a mention of the phase's folder for it to be the folder itself (beside the end of the text and
#: any whitespace): a deeper path, a quote, a separator of a shell line, a list or an option.
_PATH_ENDS = frozenset("/\"'`:;,=)]}>|&")


def seen_paths(real: Path, seen: Path) -> Callable[[str], str]:
    """A rewrite of every mention of ``real`` (the phase's folder) as a whole path component into ``seen``.

    A plain scan, not a pattern: compiling one for each phase's folder cost ~0.15 ms a phase on the event loop."""
    needle, to = str(real), str(seen)
    size = len(needle)

    def rewrite(text: str) -> str:
        at = text.find(needle)
        if at < 0:
            return text
        out: list[str] = []
        start = 0
        while at >= 0:
            end = at + size
            if end == len(text) or text[end] in _PATH_ENDS or text[end].isspace():
                out += (text[start:at], to)
                start = end
                at = text.find(needle, end)
            else:  # a longer name that begins the same: not this folder; a mention may still start inside it
                at = text.find(needle, at + 1)
        out.append(text[start:])
        return "".join(out)

    return rewrite


def session_transcript(ctx: PhaseContext) -> Path:
    """Where a session's own record goes: the case's artifacts, outside anything the agent can reach."""
    return ctx.artifacts_dir / f"{ctx.phase}.{SESSION_TRANSCRIPT}"


def resolve_executable(name: str, path_env: str) -> str:
    """Bare names are looked up next to the running Python first (same venv), then on the agent's PATH."""
    if os.sep in name:
        return name
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name, path=path_env) or name


async def _probe_backend(setup: PhaseSetup) -> BackendProbe | None:
    """The harness's own look at a remote backend right after the agent: a dead backend is not the
    agent's fault (HARNESS_ERROR backend_unreachable)."""
    if not setup.backend.remote:
        return None
    return await setup.backend.probe(setup.upstream, api_key=setup.ctx.api_key, backend_id=setup.ctx.backend.id,
                                     timeout_s=5.0)


# ------------------------------------------------------------------------------------------- collect

async def collect(setup: PhaseSetup, run: ActiveRun, process: ProcessResult, probe: BackendProbe | None,
                  case_dir: Path) -> PhaseResult:
    """Keep what the phase left: the challenge's request log, the measured workspace (copied by the
    harness, never a symlink followed or a FIFO opened), the driver's files, the phase's context."""
    ctx = setup.ctx
    requests = list(setup.challenge.requests) if setup.challenge is not None else []
    kept_names = dict(await asyncio.to_thread(setup.driver.artifacts, ctx) or {})
    if setup.command.session is not None:  # the name is the harness's own record's: never a file the agent names
        kept_names.pop(SESSION_TRANSCRIPT, None)
    kept = await asyncio.to_thread(_keep, ctx, case_dir, requests if setup.challenge is not None else None,
                                   kept_names, setup.command.session is not None, setup.interaction)
    warnings = [f"kept_file_refused: {ctx.phase} {r['name']}: {r['reason']}" + (f" at {r['at']}" if r.get("at") else "")
                for r in kept.refused if r["reason"] != "missing"]  # a log the agent never wrote is no news
    if ctx.interaction is not None and not setup.interaction.applied and ctx.phase == "measured":
        warnings.append(f"interaction_not_applied: policy {ctx.interaction.policy}: {setup.interaction.reason}")
    said = getattr(setup.endpoint, "warnings", None)
    if isinstance(said, list):  # the replay backend: each request that matched nothing it recorded
        for w in [w for w in said if isinstance(w, str)][:25]:
            code, _, rest = w.partition(": ")
            warnings.append(f"{code}: {ctx.phase} {rest}")
    return PhaseResult(PhaseEvidence(ctx, process, kept=sorted(kept.files), proxy=setup.proxy.describe(),
                                     challenge=dict(setup.facts), probe=probe,
                                     interaction=setup.interaction.as_json()), warnings)


def _keep(ctx: PhaseContext, case_dir: Path, requests: list[dict[str, Any]] | None,
          wanted: Mapping[str, Any], session: bool = False,
          support: InteractionSupport | None = None) -> KeptFiles:
    artifacts = ctx.artifacts_dir
    if requests is not None:
        atomic_write_text(artifacts / f"challenge.{ctx.phase}.requests.jsonl",
                          "".join(dumps(r, ensure_ascii=False, default=str) + "\n" for r in requests), sync=False)
    if ctx.phase == "measured":
        listing = copy_workspace(ctx.workspace, case_dir / "workspace")
        atomic_write_json(artifacts / LISTING, listing.as_json(), sync=False)
    kept = keep_files(ctx, wanted, artifacts)  # only from the phase's own folders, never through a link
    transcript = session_transcript(ctx)
    if session:  # the session's record is the harness's: written outside the sandbox, kept as it is
        if not transcript.exists():
            transcript.write_bytes(b"")
        kept.files[SESSION_TRANSCRIPT], kept.sources[SESSION_TRANSCRIPT] = transcript, "harness"
    atomic_write_json(artifacts / phase_context_name(ctx.phase),
                      phase_context_record(ctx, kept=list(kept.files), sources=kept.sources, refused=kept.refused,
                                           interaction=support), sync=False)
    return kept
