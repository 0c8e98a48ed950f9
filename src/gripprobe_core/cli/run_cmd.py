"""``gripprobe run``: run a case matrix (default: the default suite) and print where the results are."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from ..errors import UserError
from ..pluginmanager import describe_failures, make_plugin_manager
from ..textsafe import safe_name
from ..models.bounds import COUNT_MAX, TIMEOUT_MAX_S
from .main import release_gc
from .params import FiniteFloat, PathArg

DEFAULT_SUITE = "default"
_SIZE = re.compile(r"([0-9]+)([KMG]?)", re.IGNORECASE | re.ASCII)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
SIZE_MAX = 4 << 30
"""The largest request body cap (4 GiB): the proxy reads a request body whole before forwarding it."""


def _parse_size(text: str) -> int:
    """``"1048576"``, ``"512K"``, ``"64M"``, ``"1G"`` (KiB, MiB, GiB; any case) → bytes, at least 1 and at
    most ``SIZE_MAX``. ``ValueError`` with the fix otherwise."""
    m = _SIZE.fullmatch(text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"{text!r} is not a size: give a positive number of bytes, or of KiB, MiB or GiB "
                         f"with a K, M or G suffix (e.g. 64M)")
    size = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if size > SIZE_MAX:
        raise ValueError(f"{text!r} is over the 4G a request body may be (the proxy holds it in memory); give "
                         f"at most 4G")
    return size


class _ByteSize(click.ParamType):
    name = "SIZE"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= SIZE_MAX:
            return value
        try:
            return _parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _common_options(fn):
    """Options shared by ``run`` and ``run-suite`` (applied bottom-up, so listed in reverse)."""
    opts = [
        click.option("--results", "results_root", type=PathArg(file_okay=False, path_type=Path),
                     default=Path("results"), show_default=True,
                     help="Results root; runs go to <results>/runs/<RUN_ID>."),
        click.option("--no-install", is_flag=True, help="Do not install missing agents; their cases are SKIPPED."),
        click.option("--hardware", "hardware", envvar="GRIPPROBE_HARDWARE_PROFILE",
                     help="Hardware profile id from specs/hardware_profiles.yaml, recorded in every case "
                          "(env GRIPPROBE_HARDWARE_PROFILE). Default: none recorded."),
        click.option("--specs", "--root", "specs_root", type=PathArg(file_okay=False, path_type=Path),
                     multiple=True, help="A specs folder layered on the shipped specs (repeatable; later folders "
                                         "win by id). Default: $GRIPPROBE_SPECS, else the nearest specs/ folder."),
        click.option("--no-shipped", "no_shipped", is_flag=True,
                     help="Load only the --specs folders, not the shipped specs under them."),
        click.option("--base-url", help="Override the backend base URL (not for the oracle)."),
        click.option("--timeout", "timeout_s", type=FiniteFloat(min=0.1, max=TIMEOUT_MAX_S),
                     help="Per-phase agent timeout in seconds (0.1 to 86400)."),
        click.option("--telemetry-proxy", "proxy_mode", type=click.Choice(["off", "auto", "force"]), default=None,
                     help="Recording proxy mode (default: the agent spec's telemetry_proxy_mode)."),
        click.option("--sandbox", "sandbox", type=click.Choice(["auto", "bwrap", "none"]), default=None,
                     help="Confine each agent phase with bubblewrap (its own network: only its proxy): auto "
                          "(sandboxed when a start-of-run probe shows it works; unsandboxed, said in the run's first "
                          "line, only where bubblewrap is absent; exit 2 when it is installed but fails), bwrap "
                          "(required: exit 2 when it cannot run), none (unsandboxed on purpose). "
                          "Default: the suite's, else each agent spec's `sandbox`, else auto."),
        click.option("--proxy-max-body", "proxy_max_body", type=_ByteSize(), default=None,
                     help="Largest request body the recording proxy accepts: bytes, or K/M/G (KiB/MiB/GiB), at most 4G. "
                          "A larger request gets 413 and is recorded as request_body_too_large. Default: 64M."),
        click.option("--jobs", "-j", type=click.IntRange(1, 64), default=None, help="Cases whose agents run at once (default 1)."),
        click.option("--no-warmup", "no_warmup", is_flag=True,
                     help="Run each case's measured phase alone, without the warmup before it (for slow models; "
                          "recorded in the manifest, kept by --resume). Default: the suite's `warmup`, else a warmup."),
        click.option("--trials", type=click.IntRange(1, 100), default=None,
                     help="Run each cell (agent × model × format × test) N times; reports give pass@k and pass^k "
                          "and mark cells whose trials disagree. Default: the suite's `trials`, else 1."),
        click.option("--max-tokens-per-phase", "token_budget", type=click.IntRange(1, COUNT_MAX), default=None,
                     help="Token budget of each phase, enforced by the recording proxy: past it the next model call "
                          "is refused, the agent stopped, the case TIMEOUT / budget_exceeded. Default: the suite's "
                          "`max_tokens_per_phase`, else each model's policy, else none."),
        click.option("--backend", help="Backend id of the model specs to use (default: each model's first)."),
        click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                     help="Run the cases in this process (local) or as tasks on a Ray cluster (ray: needs "
                          "gripprobe-core[ray]; placement by the specs' `resources`; docs/scale.md)."),
        click.option("--ray-address", "ray_address", metavar="auto|HOST:PORT",
                     help="The Ray cluster to use with --executor ray: auto (the one started on this machine with "
                          "`ray start`) or the head's HOST:PORT. Default: RAY_ADDRESS, else a one-machine cluster "
                          "started for this run."),
        click.option("--ray-max-attempts", "ray_max_attempts", type=click.IntRange(1, 20), default=None,
                     help="Tries per case when its Ray worker or node is lost (default 3)."),
    ]
    for o in opts:
        fn = o(fn)
    return fn


@click.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--suite", "-s", help="Suite id (specs/suites/<id>.yaml). Default: 'default' when nothing is selected.")
@click.option("--agent", "-a", "agents", multiple=True, help="Agent id (repeatable).")
@click.option("--model", "-m", "models", multiple=True, help="Model id (repeatable).")
@click.option("--test", "-t", "tests", multiple=True, help="Test id or tag:<tag> (repeatable).")
@click.option("--format", "-f", "formats", multiple=True, help="Format (repeatable). Default: every format the agent supports.")
@_common_options
def run_command(suite, agents, models, tests, formats, **common) -> None:
    """Run agents × models × tests × formats. With no selection, runs the default suite.

    Missing selections are taken from the suite (the default suite unless --suite is given); with -a, -m
    and -t given no suite is needed, and the run is recorded as ad hoc (suite null, its selection in
    manifest.json). The last line printed is the run directory.

    Progress goes to stderr: on a terminal a bar and a line per running case (time, phase, model and tool
    calls, last reply or the call open now); otherwise a line as a case starts, every GRIPPROBE_PROGRESS_INTERVAL seconds (default
    30) while it runs, and as it ends.
    """
    _execute(suite, agents, models, tests, formats, resume=None, **common)


@click.command("run-suite", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--suite", "-s", help="Suite id (specs/suites/<id>.yaml); with --resume, default: the run's own suite.")
@click.option("--resume", "resume", type=PathArg(file_okay=False, path_type=Path),
              help="Continue this run directory: run only the suite's cases that have no complete case.json "
                   "(key: agent, model, backend, format, test); each case ends up exactly once.")
@_common_options
def run_suite_command(suite, resume, **common) -> None:
    """Run one suite as it is written, or resume an interrupted run of it.

    The last line printed is the run directory. Progress goes to stderr as for `gripprobe run`.
    """
    if not suite and not resume:
        raise UserError("run-suite needs --suite S (or --resume RUN_DIR); suites are in specs/suites/")
    _execute(suite, (), (), (), (), resume=resume, whole_suite=True, **common)


def _execute(suite, agents, models, tests, formats, *, resume, backend, jobs, proxy_mode, proxy_max_body, timeout_s,
             base_url, specs_root, no_shipped, hardware, no_install, results_root, sandbox, trials, token_budget,
             executor, ray_address, ray_max_attempts, no_warmup: bool = False, whole_suite: bool = False) -> None:
    from ..proxy import DEFAULT_MAX_REQUEST_BODY
    from ..runner import RunSettings, execute_run, plan_cases, plan_suite
    from ..runner.matrix import with_trials
    from ..runner.run import load_resume_manifest, planned_keys, planned_trials, prefetch_host, prepare_resume
    from ..specs import load_specs, spec_layers
    from .progress import make_reporter

    from ..store import check_run_dir, prepare_results_root

    # Results paths first: a folder that cannot hold the run is one line and exit 2 before any work.
    if resume is not None:
        resume = check_run_dir(resume, f"--resume {resume}")
    else:
        results_root = prepare_results_root(results_root)
    # The key before anything runs or is removed: one that cannot be used (or a resume of a run signed by
    # another key) is one line and exit 2 (integrity/keys.py).
    from ..integrity.seal import signer_for_run

    signer = signer_for_run(results_root if resume is None else resume.parent.parent, resume)
    prefetch_host()  # the manifest's platform string runs a subprocess: meanwhile the plugins and specs load
    if sandbox != "none":
        from ..runner.sandbox import prefetch_probe

        prefetch_probe()  # so does the sandbox's probe (bwrap runs)
    if proxy_mode != "off" and executor != "ray":  # (on Ray each worker has its own)
        from ..proxy.recorder_client import prefetch_recorder

        prefetch_recorder()  # and the proxies' recorder process starts, so it is up before the first agent
    plugins = make_plugin_manager()
    for w in describe_failures(plugins):
        click.echo(w, err=True)
    manifest = load_resume_manifest(resume) if resume is not None else None
    layers = spec_layers(specs_root, shipped=not no_shipped)
    root = layers[-1]
    specs = load_specs(layers, registry=plugins.registry)
    known_hw = [p.id for p in specs.hardware.profiles]
    if hardware and hardware not in known_hw:
        raise UserError(f"unknown hardware profile {hardware!r}; known: {', '.join(known_hw) or 'none'} "
                        f"(add it to {root}/hardware_profiles.yaml)")
    selected = bool(agents or models or tests or formats)
    asked_trials = trials
    if manifest is not None:
        # A resumed run plans exactly what its manifest planned; the suite (if it ran one) only gives defaults.
        keys = planned_keys(manifest)
        suite = suite or _opt_str(manifest.get("suite"))
        if not suite and not keys:
            raise UserError(f"{resume}/manifest.json names no suite and no planned case; pass --suite")
        # With the plan in hand, a suite since removed from the specs costs only its defaults (jobs ...).
        s = (specs.suites.get(suite) if keys else _suite(specs, root, suite)) if suite else None
        cases = plan_cases(specs, agents=[], models=[], tests=[], explicit=keys) if keys else plan_suite(
            specs, s, backend=backend)
        recorded_suite = suite
        selection = manifest.get("selection") if not suite and isinstance(manifest.get("selection"), dict) else None
        # the run's own trials (resume is by trial); --trials may add more, never fewer
        trials = max(asked_trials or 0, planned_trials(manifest))
    elif whole_suite or not selected:
        # The suite as written: --suite S, or the default suite when nothing is selected.
        s = _suite(specs, root, suite or DEFAULT_SUITE, default=not suite)
        cases = plan_suite(specs, s, backend=backend)
        recorded_suite, selection = s.id, None
    else:
        # An ad-hoc selection: no suite needed; a selection not given is taken from --suite, else from the
        # default suite when there is one.
        base = suite or (DEFAULT_SUITE if DEFAULT_SUITE in specs.suites else None)
        s = _suite(specs, root, base) if base else None
        missing = [opt for opt, given in (("--agent", agents), ("--model", models), ("--test", tests)) if not given]
        if missing and s is None:
            them = "them" if len(missing) > 1 else "it"
            raise UserError(f"nothing selected for {' and '.join(missing)} and there is no default suite to take "
                            f"{them} from ({root}/suites/{DEFAULT_SUITE}.yaml); "
                            f"pass {' '.join(_HINT[m] for m in missing)}")
        given = {"agents": agents, "models": models, "tests": tests, "formats": formats}
        taken = [k for k, v in given.items() if not v and s is not None and getattr(s, k)]
        selection = {k: list(v or (getattr(s, k) if k in taken else ())) for k, v in given.items()}
        selection |= {"backend": backend, "from_suite": s.id if taken else None}
        cases = plan_cases(specs, agents=selection["agents"], models=selection["models"], tests=selection["tests"],
                           formats=selection["formats"], backend=backend)
        recorded_suite = None
    if manifest is None:
        trials = trials or (s.trials if s is not None else None) or 1
    if not cases:
        raise UserError("the selection is empty: no case to run")
    cases = with_trials(cases, trials)
    state = None
    resumed_judge = None
    if resume is not None:
        state = prepare_resume(resume, cases, suite=suite, manifest=manifest)
        click.echo(f"resuming {safe_name(state.run_dir.path)}: {state.done} of {len(cases)} case(s) done, "
                   f"{len(state.todo)} to run", err=True)
        cases = state.todo
        hardware = hardware or state.option("hardware_profile")
        proxy_mode = proxy_mode or state.option("telemetry_proxy_mode")
        timeout_s = timeout_s or _resumed_timeout(state)
        base_url = base_url or state.option("base_url_override")
        sandbox = sandbox or state.option("sandbox")
        resumed_judge = state.option("judge")
        resumed_cap = state.option("proxy_max_body")
        proxy_max_body = proxy_max_body or (resumed_cap if type(resumed_cap) is int and 0 < resumed_cap <= SIZE_MAX
                                            else None)
        no_warmup = no_warmup or state.option("warmup") is False
        resumed_budget = state.option("max_tokens_per_phase")
        token_budget = token_budget or (resumed_budget if type(resumed_budget) is int and 0 < resumed_budget <= COUNT_MAX
                                        else None)
    from ..runner.executors import Executor, LocalExecutor
    from ..runner.preflight import preflight

    judge = (resumed_judge if isinstance(resumed_judge, str) and resumed_judge else None) \
        or (s.judge if s is not None else None)
    if judge is not None and judge not in plugins.registry.evaluators:  # a resumed run's, or a suite not validated
        raise UserError(f"judge {judge!r} is not installed; registered evaluators: "
                        f"{', '.join(sorted(plugins.registry.evaluators))} (install the plugin that registers it)")
    jobs = jobs or (s.jobs if s is not None else None) or (0 if executor == "ray" else 1)
    if executor != "ray" and (ray_address or ray_max_attempts):
        raise UserError(f"{'--ray-address' if ray_address else '--ray-max-attempts'} needs --executor ray")
    # the Ray executor joins its cluster here: Ray missing or a head that does not answer is one line, exit 2
    cluster = None
    if executor == "ray":
        from ..runner.rayexec import RayExecutor  # the module only with --executor ray (it imports Ray when it runs)

        cluster = RayExecutor.connect(ray_address, jobs=jobs, max_attempts=ray_max_attempts)
    runner: Executor = cluster if cluster is not None else LocalExecutor(jobs)
    try:
        locate = lambda case: specs.where("model", case.model.id, "backends",  # noqa: E731
                                          case.model.backends.index(case.backend), "base_url")
        if cluster is not None:
            cluster.check_placement(cases)
        # Before anything is installed or written: a dead backend is exit 2 with the fix, not a matrix of errors.
        probes = preflight(cases, plugins.registry.backends, base_url_override=base_url, env=os.environ, locate=locate,
                           probe=(lambda targets: cluster.probe(targets, plugins.registry.backends, os.environ))
                           if cluster is not None else None)
        sandbox = sandbox or (s.sandbox if s is not None else None)
        suite_interaction = s.observe.interaction if s is not None and s.observe is not None else None
        _check_manual(cases, suite_interaction, ray=cluster is not None)
        if cluster is not None:  # the nodes install their agents and probe their own sandbox
            installed = {}
        else:
            _check_sandbox(sandbox, cases)
            installed = _install_agents(plugins, cases, no_install)
        opts = RunSettings(results_root=results_root, jobs=jobs,
                          installed=installed, install_missing=not no_install, sandbox=sandbox, judge=judge,
                          proxy_mode=proxy_mode or (s.telemetry_proxy_mode if s is not None else None),
                          timeout_s=timeout_s, base_url_override=base_url, suite=recorded_suite, selection=selection,
                          specs_layers=tuple(layers), argv=sys.argv[1:],
                          hardware_profile=hardware, proxy_max_body=proxy_max_body or DEFAULT_MAX_REQUEST_BODY,
                          preflight=[p.model_dump(mode="json") for p in probes], trials=trials,
                          token_budget=token_budget or (s.max_tokens_per_phase if s is not None else None),
                          interaction=suite_interaction,
                          warmup=not no_warmup and (s.warmup if s is not None else True))
        reporter = make_reporter(total=len(cases))  # a bad GRIPPROBE_PROGRESS_INTERVAL: one line, exit 2
    except BaseException:
        runner.close()
        raise
    release_gc()  # the set-up is done (plugins, specs, plan): collect as usual while the cases run
    with reporter:
        outcome = execute_run(cases, plugins, opts, on_done=reporter.case_done, resume=state, executor=runner,
                              signer=signer, on_event=reporter.case_event)
    reporter.final(outcome)
    click.echo(safe_name(outcome.run_dir.path))
    if outcome.interrupted:
        sys.exit(128 + outcome.signal)  # 130 after Ctrl-C (SIGINT), 143 after SIGTERM


def _resumed_timeout(state) -> float | None:
    """The timeout the resumed run recorded, checked like ``--timeout``: a manifest saying ``NaN`` or ``1e308``
    is one line and exit 2, never a phase that runs forever."""
    value = state.option("timeout_s")
    if value is None:
        return None
    if type(value) in (int, float) and 0.1 <= value <= TIMEOUT_MAX_S:  # nan fails both comparisons
        return float(value)
    raise UserError(f"{safe_name(state.run_dir.manifest)}: timeout_s {value!r} is not a timeout (0.1 to "
                    f"{TIMEOUT_MAX_S:g} seconds); pass --timeout SECONDS to resume with one")


def _install_agents(plugins, cases, no_install: bool) -> dict:
    """This machine's installs of the cases' agents (``--no-install``: only those already in the cache)."""
    from ..agents import AgentCache
    from ..agents import ensure_agents_installed, find_installed_agents
    agents_used = list({c.agent.id: c.agent for c in cases}.values())
    if no_install:  # use what the cache already has; the others' cases are SKIPPED with the fix
        return find_installed_agents(plugins.registry, agents_used, AgentCache.default())
    from .progress import make_install_progress

    return ensure_agents_installed(plugins.registry, agents_used, AgentCache.default(),
                                   log=lambda m: click.echo(m, err=True), progress=make_install_progress())


_HINT = {"--agent": "-a AGENT", "--model": "-m MODEL", "--test": "-t TEST|tag:TAG"}


def _opt_str(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _suite(specs, root: Path, suite_id: str, *, default: bool = False):
    """The suite ``suite_id`` of ``specs``; a one-line error with the fix when there is none."""
    if suite_id in specs.suites:
        return specs.suites[suite_id]
    if default:
        raise UserError(f"nothing selected and no default suite ({root}/suites/{DEFAULT_SUITE}.yaml) to run; "
                        f"select cases (gripprobe run -a AGENT -m MODEL -t TEST|tag:TAG) or write that suite "
                        f"(docs/specs.md#suites)")
    raise UserError(f"unknown suite {suite_id!r}; suites: {', '.join(sorted(specs.suites)) or 'none'} "
                    f"(in {root}/suites)")


def _check_sandbox(mode: str | None, cases: list) -> None:
    """Probe the sandbox once before anything runs: ``bwrap`` that cannot run is exit 2 with the fix;
    ``auto`` that falls back says so once (and every such case records ``sandbox: none``)."""
    from ..runner.sandbox import resolve_sandbox

    modes = {mode} if mode else {c.agent.sandbox or "auto" for c in cases}
    warned = set()
    for m in sorted(modes):
        box = resolve_sandbox(m)
        if box.warning and box.warning not in warned:
            warned.add(box.warning)
            click.echo(f"warning: {box.warning}", err=True)


def _check_manual(cases: list, suite_interaction: object, *, ray: bool) -> None:
    """A run with ``manual`` cases needs an operator at a terminal, on this machine: else exit 2 now."""
    from ..runner.manual import terminal_problem

    manual = sorted({c.test.id for c in cases
                     if getattr((c.test.observe.interaction if c.test.observe else None) or suite_interaction,
                                "policy", None) == "manual"})
    if not manual:
        return
    shown = ", ".join(manual[:3]) + (" ..." if len(manual) > 3 else "")
    if ray:
        raise UserError(f"interaction policy manual ({shown}) asks the operator on this terminal: it cannot run "
                        f"on a cluster; use --executor local, or another policy")
    problem = terminal_problem()
    if problem is not None:
        raise UserError(f"interaction policy manual ({shown}) asks the operator, but {problem}; run it from a "
                        f"terminal, or use policy auto-approve, auto-deny or scripted")
