"""A run: allocate the run directory, run planned cases (``--jobs N`` at once), write manifest and reports.

Ctrl-C (SIGINT) and SIGTERM both leave every finished case intact, kill running agents' process groups,
and mark the run incomplete in manifest.json (with ``interrupted_by``), so ``run-suite --resume``
continues it. A SIGTERM that arrives after the last case, while the harness writes its results, waits
for the writes and does not make a finished run incomplete.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import platform
import signal
import socket
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..models.results import CaseResult
from ..pluginmanager import GripProbePluginManager
from ..proxy.recorder_client import release_recorder
from ..runvalues import make_run_values
from ..store import RunFolder, allocate_run_dir, atomic_write_json
from ..store.trees import remove_tree, scratch_folder
from ..timeutil import utc_now_iso
from .eventloop import StopSignals, Terminated, loop_name
from .executors import Executor, LocalExecutor
from .live import WATCH, Watch
from .matrix import PlannedCase
from .settings import ActiveRun, RunSettings

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: RunFolder
    results: list[CaseResult]
    interrupted: bool
    duration_s: float
    signal: int = 0
    """The signal that interrupted the run (``signal.SIGINT`` or ``signal.SIGTERM``), 0 when none did."""

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else ""

    @property
    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(r.verdict.status for r in self.results).items()))


def prefetch_host() -> None:
    """Start finding out what the manifest's ``host.platform`` says, on a thread of its own: Python's
    ``platform.platform()`` runs ``uname -p`` (~10 ms, cached for the process after), which then overlaps the
    command's set-up instead of delaying the first case. The value is the same; if the thread has not finished
    when the manifest is written, the manifest's own call computes it."""
    import threading

    threading.Thread(target=platform.platform, name="gripprobe-host-platform", daemon=True).start()


class _WarmWhileAgentsRun:
    """The run's watcher (``on_event``), wrapped, to start ahead what the run's end needs:

    * the first time an agent phase starts, what judging and writing a case and the reports need loads on a
      thread of its own (:func:`_warm_rest`: the result models' validators, the judge's modules, the report
      modules and templates), while the harness mostly waits for the agent; on a running event loop the thread
      starts two turns of the loop after the phase's event, once the phase's task has let its agent go (the
      agent's start does not wait for the thread's). :meth:`join` waits for it before the reports are written
      (no import races the run's own), at most ``timeout`` seconds;
    * once the last of the run's ``cases`` is being judged (every phase of every case has run and flushed its
      own records), the proxies' recorder process is released (:func:`release_recorder`): it exits while that
      case is judged and written and the reports are, instead of after; :meth:`recorder_gone` waits for it.

    A run whose agents never start (every case skipped, a Ray cluster: its events stay on the workers) loads
    what it needs when it needs it and releases the recorder after its cases, as before."""

    def __init__(self, watch: Watch | None, cases: int):
        self._watch = watch
        self._thread: Any = None
        self._asked = False
        self._cases = cases
        self._judged = 0
        self._released: Callable[[float], None] | None = None

    def __call__(self, event: Any) -> None:
        if not self._asked and event.phase in ("warmup", "measured"):
            import asyncio

            self._asked = True
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._start()
            else:
                loop.call_soon(loop.call_soon, self._start)
        elif event.phase == "judging":
            self._judged += 1
            if self._judged == self._cases and self._released is None:
                self._released = release_recorder()
        if self._watch is not None:
            self._watch(event)

    def _start(self) -> None:
        """Start the thread with the switch interval already short: the loop gets the GIL back within
        :data:`WARM_SWITCH_INTERVAL_S` from the thread's first step on (the thread puts it back when done)."""
        import sys
        import threading

        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, WARM_SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=_warm_rest, args=(interval,), name="gripprobe-warm", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 10.0) -> None:
        if self._thread is not None:  # None: never asked for, or its loop stopped before starting it
            self._thread.join(timeout)

    def recorder_gone(self, timeout: float = 5.0) -> None:
        """Wait for the recorder released when the last case was judged (nothing when none was)."""
        if self._released is not None:
            self._released(timeout)


#: The interpreter's switch interval while the thread loads beside an agent: the event loop (relaying the agent's
#: model calls) waits at most this long for the loading thread to give up the GIL, not Python's default 5 ms.
WARM_SWITCH_INTERVAL_S = 0.0005


def _warm_rest(interval: float) -> None:
    """Load what a case's end and the run's reports need, with a short switch interval while it runs: the
    result models' validators first (:func:`~gripprobe_core.models.results.build_validators`: the phase's
    result is the first thing made when its agent ends), then the judge's modules and tier D's claim patterns
    (:func:`~gripprobe_core.telemetry.tier_d.compile_rules`: the judge's first-case cost), ``syncfs`` for the case's
    durable write (:func:`~gripprobe_core.store.layout.prepare_flush`), then the report modules
    and templates (:func:`~gripprobe_core.reports.warm.warm_run_reports`). Everything it does would otherwise
    happen on first use, the same. The switch interval was shortened by the thread's starter; ``interval`` is
    the one put back at the end. (Not at a lower CPU priority: an unprivileged process cannot raise it
    again, and the run's end waits for this thread.)"""
    import sys

    try:
        from ..models.results import build_validators

        build_validators()
        from . import judge  # noqa: F401  (imported for what it imports: telemetry, usage, permissions)
        from ..telemetry.tier_d import compile_rules

        compile_rules()
        from ..store.layout import prepare_flush

        prepare_flush()
        from ..reports.warm import warm_run_reports

        warm_run_reports()
    except Exception:  # only ahead of time: what it loads loads as it would have, and says what fails then
        log.debug("loading ahead failed", exc_info=True)
    finally:
        sys.setswitchinterval(interval)


def _case_pages(run_id: str, executor: Any) -> Any:
    """Where a run's cases leave their rendered report pages (:class:`~gripprobe_core.runner.case_pages.CasePages`);
    None for an executor whose cases run elsewhere (Ray: their pages are rendered at the end, here)."""
    if getattr(executor, "name", "local") != "local":
        return None
    from .case_pages import CasePages

    return CasePages(run_id)


def harness_identity() -> dict[str, Any]:
    """Who is writing this run: the process, the machine and its boot. ``gripprobe view`` tells a run still
    going from one whose harness was killed (SIGKILL leaves the manifest saying ``running``) by whether this
    process still lives, when it looks from the same machine and boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot_id: str | None = f.read(64).strip() or None
    except OSError:
        boot_id = None
    return {"pid": os.getpid(), "hostname": socket.gethostname(), "boot_id": boot_id}


def _manifest(run: ActiveRun, cases: list[PlannedCase], *, status: str, started_at: str,
              results: list[CaseResult] | None = None, finished_at: str | None = None,
              executor: Executor | None = None) -> dict:
    from .. import __version__
    from ..integrity.seal import manifest_signing
    opts = run.settings
    placed = sorted((r for r in results or [] if r.placement is not None), key=lambda r: r.case_id)
    return {
        "run_id": run.id, "status": status, "started_at": started_at, "finished_at": finished_at,
        "gripprobe_version": __version__, "suite": opts.suite,
        "selection": opts.selection, "argv": opts.argv or [],
        "specs_root": str(opts.specs_layers[-1]) if opts.specs_layers else None,
        "specs_layers": [str(p) for p in opts.specs_layers],
        "jobs": opts.jobs, "hardware_profile": opts.hardware_profile, "telemetry_proxy_mode": opts.proxy_mode,
        "sandbox": opts.sandbox, "judge": opts.judge,
        "timeout_s": opts.timeout_s, "base_url_override": opts.base_url_override, "run_values": dict(run.values),
        "proxy_max_body": opts.proxy_max_body, "trials": opts.trials, "max_tokens_per_phase": opts.token_budget,
        "warmup": opts.warmup,
        "host": {"python": platform.python_version(), "platform": platform.platform(), "event_loop": loop_name()},
        "harness": harness_identity(),
        "plugins": [{"name": p.name, "distribution": p.distribution, "version": p.version}
                    for p in run.plugins.records()],
        "planned": [{"case_id": c.case_id, **c.key.model_dump()} for c in cases],
        "counts": dict(sorted(Counter(r.verdict.status for r in results or []).items())),
        "completed": len(results or []),
        "preflight": list(opts.preflight or []),
        **(executor.manifest_fields() if executor is not None else {"executor": "local"}),
        "placement": {r.case_id: {"node_id": r.placement.node_id, "hostname": r.placement.hostname,
                                  "attempts": len(r.placement.attempts)} for r in placed if r.placement},
        **({"signing": manifest_signing(run.signer)} if run.signer is not None else {}),
    }


def execute_run(cases: list[PlannedCase], plugins: GripProbePluginManager, settings: RunSettings,
                on_done: Callable[[CaseResult], None] = lambda r: None,
                resume: ResumeState | None = None, executor: Executor | None = None,
                signer: Any = "auto", on_event: Watch | None = None) -> RunResult:
    """Run ``cases`` into a new run directory, or into ``resume.run_dir`` (see :func:`prepare_resume`), on
    ``executor`` (default: this process, ``settings.jobs`` at once), which is closed at the end. Each
    case's proxy mode and sandbox are settled here, once (:meth:`PlannedCase.settle`). Every case is
    signed as it is written, and the run's seal whenever the manifest or the reports are, with ``signer``
    (``auto``: :func:`~gripprobe_core.integrity.seal.signer_for_run`). Returns even when interrupted by
    Ctrl-C or SIGTERM. ``on_event`` hears each running case's phases as they start (:mod:`.live`: the
    progress display's live lines), on the event loop: it must not block."""
    from ..integrity.seal import reseal_run, signer_for_run

    t0 = time.monotonic()
    if signer == "auto":
        signer = signer_for_run(settings.results_root, resume.run_dir.path if resume is not None else None)
    executor = executor or LocalExecutor(settings.jobs)
    if resume is None:
        # Absolute from here on: agents run with the workspace as cwd, so a relative path would point nowhere.
        run_id, path = allocate_run_dir(settings.results_root.resolve())
        folder = RunFolder(path)
        started_at, values, planned, history = utc_now_iso(), make_run_values(), cases, []
    else:
        folder = resume.run_dir
        run_id = folder.run_id
        started_at, values = resume.started_at, resume.run_values
        planned, history = resume.planned, [*resume.resumed_at, utc_now_iso()]
    cases = [c.settle(proxy_mode=settings.proxy_mode, sandbox=settings.sandbox, token_budget=settings.token_budget,
                      judge=settings.judge, interaction=settings.interaction) for c in cases]
    results: list[CaseResult] = []
    with scratch_folder(scratch_prefix(folder)) as scratch:  # agents' homes: removed whatever they hold
        run = ActiveRun(id=run_id, folder=folder, plugins=plugins, values=values, scratch=scratch,
                        settings=settings, signer=signer, pages=_case_pages(run_id, executor))

        def manifest(status: str, finished_at: str | None = None) -> dict:
            present = folder.case_results() if resume is not None else results
            m = _manifest(run, planned, status=status, started_at=started_at, results=present,
                          finished_at=finished_at, executor=executor)
            if history:
                m["resumed_at"] = history
                # earlier sessions' probes stay, each with its checked_at
                earlier = resume.manifest.get("preflight") if resume is not None else None
                m["preflight"] = [p for p in earlier or [] if isinstance(p, dict)] + m["preflight"]
            return m

        stopped_by = 0
        with StopSignals() as stop:
            atomic_write_json(folder.manifest, manifest("running"))
            _warn(reseal_run(folder.path, signer, wrote=[folder.manifest]))
            warm = _WarmWhileAgentsRun(on_event, len(cases))
            watching = WATCH.set(warm)  # every task of the run's loop sees it (live.py)
            try:
                stop.run(executor.run_cases(cases, run, on_done, results))
            except KeyboardInterrupt:
                stopped_by = signal.SIGINT
            except Terminated:
                stopped_by = signal.SIGTERM
            finally:
                WATCH.reset(watching)
                # The proxies' recorder process exits while the manifest and reports are written (every phase
                # flushed its own records already); it is waited for, and reaped, before the run returns.
                recorder_gone = release_recorder()
                executor.close()
            try:
                status = "incomplete" if stopped_by or len(results) < len(cases) else "complete"
                m = manifest(status, utc_now_iso())
                if stopped_by:
                    m["interrupted_by"] = signal.Signals(stopped_by).name
                atomic_write_json(folder.manifest, m)
                from ..reports import write_run_reports
                warm.join()
                reports = write_run_reports(folder, run.pages)
                _warn(reseal_run(folder.path, signer, wrote=[folder.manifest, *reports],
                                 cases=[r.case_id for r in results]))
            finally:
                recorder_gone(5.0)
                warm.recorder_gone(5.0)
    return RunResult(folder, sorted(results, key=lambda r: r.case_id), bool(stopped_by), time.monotonic() - t0,
                     int(stopped_by))


def _warn(problem: str | None) -> None:
    if problem:
        log.warning("warning: %s", problem)


@dataclass
class ResumeState:
    """A run directory to continue: what its manifest fixed, and which planned cases still need a run."""

    run_dir: RunFolder
    started_at: str
    run_values: dict[str, str]
    planned: list[PlannedCase]
    todo: list[PlannedCase]
    done: int
    resumed_at: list[str]
    manifest: dict

    def option(self, name: str) -> Any:
        """A run option the original run recorded (``telemetry_proxy_mode``, ``hardware_profile``,
        ``timeout_s``, ``base_url_override``): a resume keeps them unless told otherwise."""
        return self.manifest.get(name)


def load_resume_manifest(run_path: Path) -> dict:
    """The manifest of a run to resume; a one-line :class:`UserError` when there is none to trust."""
    import json

    from ..errors import UserError

    from ..store import read_regular
    from ..store.layout import STORED_JSON_LIMIT

    path = Path(run_path) / "manifest.json"
    try:
        manifest = json.loads(read_regular(path, STORED_JSON_LIMIT))
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        raise UserError(f"{path}: no manifest; --resume takes a run directory "
                        f"(results/runs/<RUN_ID>), see `gripprobe list-runs`") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable ({exc}); this run cannot be resumed") from None
    return manifest


def prepare_resume(run_path: Path, cases: list[PlannedCase], *, suite: str | None, manifest: dict) -> ResumeState:
    """Check ``run_path`` (whose manifest is ``manifest``, see :func:`load_resume_manifest`) can be
    resumed with ``cases`` (the plan of ``suite``) and sort done from to-do.

    Granularity is the case key (agent, model, backend, format, test): a case is done when its case.json
    (written last, atomically) reads back with the same key; any other leftovers of a planned case (a
    run killed mid-case) are removed before it runs again, so every case ends up exactly once.
    """
    from ..errors import UserError
    from ..store.layout import read_case

    path = run_path.resolve()
    run_dir = RunFolder(path)
    if suite and not manifest.get("suite") and isinstance(manifest.get("selection"), dict):
        raise UserError(f"{path} ran an ad-hoc selection, not suite {suite!r}; resume it without --suite")
    if suite and manifest.get("suite") and manifest.get("suite") != suite:
        raise UserError(f"{path} ran suite {manifest.get('suite')!r}, not {suite!r}; resume it with "
                        f"--suite {manifest.get('suite')}")
    run_values = manifest.get("run_values", manifest.get("run_context"))  # run_context: runs before 0.2
    if not isinstance(run_values, dict) or not run_values:
        raise UserError(f"{run_dir.manifest}: no run_values recorded; this run cannot be resumed")
    todo, done = [], 0
    for case in cases:
        case_dir = run_dir.case(case.case_id)
        res = read_case(run_dir.stored_case(case.case_id) / "case.json")
        if res is not None and res.key == case.key:
            done += 1
            continue
        if case_dir.exists():  # a case killed mid-run: its partial artifacts go, the case runs again
            for problem in remove_tree(case_dir):
                log.warning("warning: case folder not removed: %s", problem)
        todo.append(case)
    by_id = {case.case_id: case for case in cases}
    old_ids = [p.get("case_id") for p in manifest.get("planned") or [] if isinstance(p, dict)]
    planned = [by_id[i] for i in old_ids if i in by_id] + [case for case in cases if case.case_id not in set(old_ids)]
    _remove_stale_work_dirs(run_dir)
    return ResumeState(run_dir=run_dir, started_at=str(manifest.get("started_at") or utc_now_iso()),
                       run_values={str(k): str(v) for k, v in run_values.items()}, planned=planned, todo=todo,
                       done=done, resumed_at=[str(x) for x in manifest.get("resumed_at") or []], manifest=manifest)


def planned_trials(manifest: dict) -> int:
    """How many trials a run planned per cell (1 for runs written before trials); a manifest planning more
    than ``TRIALS_MAX`` (or a trial that is not a whole number from 1) is a one-line :class:`UserError`."""
    from ..errors import UserError
    from ..models.bounds import TRIALS_MAX

    found = [p.get("trial") for p in manifest.get("planned") or [] if isinstance(p, dict) and "trial" in p]
    given = [t for t in [manifest.get("trials"), *found] if t is not None]
    bad = next((t for t in given if type(t) is not int or not 1 <= t <= TRIALS_MAX), None)
    if bad is not None:
        raise UserError(f"manifest.json: trial {bad!r} is not a trial number (1 to {TRIALS_MAX}); this run cannot be "
                        f"resumed")
    return max(given, default=1)


def planned_keys(manifest: dict) -> list:
    """The cells a run's manifest planned, as explicit suite cases ([] when it names none); their trials:
    :func:`planned_trials`."""
    from ..models.specs import SuiteCase

    try:
        return [SuiteCase(agent=p["agent"], model=p["model"], test=p["test"], format=p["format"],
                          backend=p.get("backend")) for p in manifest.get("planned") or []]
    except (TypeError, KeyError, AttributeError, ValueError):
        return []


def scratch_prefix(folder: RunFolder) -> str:
    """The name a run's scratch folder (its agents' homes, in the temp directory) starts with: the run id and a
    digest of the run folder's path. Run ids have a one-second resolution, so two runs into two results folders
    may share one; a resumed run removes what the run folder's earlier process left (:func:`_remove_stale_work_dirs`)
    and must never touch the live scratch of another run of the same id (it did: its agents found their
    workspaces gone and exited 127)."""
    where = hashlib.sha256(os.fsencode(os.path.realpath(folder.path))).hexdigest()[:12]
    return f"gripprobe-{folder.run_id}-{where}-"


def _remove_stale_work_dirs(run_dir: RunFolder) -> None:
    """Scratch folders (agent homes) a killed run of this run folder left in the temp directory."""
    for d in Path(tempfile.gettempdir()).glob(scratch_prefix(run_dir) + "*"):
        for problem in remove_tree(d):
            log.warning("warning: scratch_not_removed: %s", problem)
