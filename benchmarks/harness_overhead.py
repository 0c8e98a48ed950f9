"""Harness cost per case, seen from outside: ``gripprobe run`` of N oracle cases against the same agent processes run alone.

* **Subject**: the wall time of a whole ``gripprobe run`` (``--jobs 1``, the default sandbox) of N cases of
  the reference agent on the oracle: start-up, preflight, two phases per case (workspace, oracle, recording
  proxy, sandbox, the agent, the copy-out, judging, signed case files), the reports. What a user waits for.
* **Baseline**, in the same rounds, alternating (baseline first): the same 2·N agent processes run alone,
  one after another, each timed from its spawn to its exit by a helper process (``--role agents``). The
  helper builds each phase the way the harness does (the runner's own ``prepare``: the workspace seeded
  from the test, a fresh HOME/TMPDIR, the oracle started with the test's reference, the driver's command
  and the harness's environment), with the recording proxy off and no sandbox, and runs the command with
  the same cwd and environment, its output to files. Only the agents' own time counts: the oracle starts
  and stops outside it. After the rounds the helper's commands are checked against the ones the harness
  stored (case.json ``phases[].process.command``, inside the sandbox's wrapper): same argv but for the
  phase's folders and the oracle's port, or the benchmark stops.

Both run with PATH reduced to the system folders (benchmarks/_bench.py), so ``python3`` is the same file
inside the sandbox and outside it. Harness cost per case = (subject wall − baseline) / N, per round; ratio =
subject / baseline, per round; each figure is the median over the rounds (pair by pair: the machine's speed
drifts between rounds, by up to a fifth here, and a ratio of two medians from different rounds mixes them).
At N=6 (start-up dominates) and N=48 (``--quick``: 6 and 12, one round). Targets at N=48: ≤ 60 ms per case,
≤ 1.1× the agents alone. Five rounds by default: one round's ratio at N=48 moves by ±0.05 with the machine
(1.04–1.14 within one table here), so the median of three could land on either side of 1.1 by chance.

    .venv/bin/python benchmarks/harness_overhead.py [--quick] [--rounds 5] [--sizes 6,48]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (ROOT, Figure, Spread, add_contract_args, bench_env, gripprobe_cli, load1,  # noqa: E402
                    python3_on, report, rounds_of)

TESTS = ("json_rank_from_file", "patch_file", "patch_file_prepared", "patch_file_shell", "python_file",
         "python_file_de", "python_file_simple", "save_file", "shell_date", "shell_file", "shell_pwd",
         "weekly_plan_next_week")
"""Tests that need nothing but the reference agent's own tools (no challenge server, no interaction)."""
MODELS = ("oracle-perfect", "oracle-lazy")
TARGET_MS = 60.0
TARGET_RATIO = 1.1
TARGET_AT = 48


def selection(n: int) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """(models, tests, trials) giving exactly ``n`` cases."""
    if 1 <= n <= len(TESTS):
        return MODELS[:1], TESTS[:n], 1
    if n <= 2 * len(TESTS) and n % 2 == 0:
        return MODELS, TESTS[: n // 2], 1
    if n % (2 * len(TESTS)) == 0:
        return MODELS, TESTS, n // (2 * len(TESTS))
    raise SystemExit(f"N={n}: use 1..{len(TESTS)}, an even number up to {2 * len(TESTS)}, or a multiple of "
                     f"{2 * len(TESTS)}")


# ------------------------------------------------------------------------------------------ the subject

def subject(n: int, results: Path) -> tuple[float, Path]:
    """One ``gripprobe run`` of ``n`` cases: (wall seconds, its run folder)."""
    models, tests, trials = selection(n)
    argv = [*gripprobe_cli(), "run", "--specs", str(ROOT / "specs"), "--results", str(results), "--jobs", "1",
            "-a", "reference", *[a for m in models for a in ("-m", m)], *[a for t in tests for a in ("-t", t)],
            *(["--trials", str(trials)] if trials > 1 else [])]
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, env=bench_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"gripprobe run failed ({res.returncode}):\n{res.stderr[-3000:]}")
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    found = len(list(run_dir.glob("cases/*/case.json")))
    if found != n:
        raise SystemExit(f"gripprobe run wrote {found} cases, not {n}: {run_dir}")
    return wall, run_dir


def stored(run_dir: Path) -> tuple[dict[str, list[str]], float]:
    """The agent commands the harness ran (normalized, by ``case_id/phase``) and the agent time it recorded."""
    commands: dict[str, list[str]] = {}
    recorded = 0.0
    for path in run_dir.glob("cases/*/case.json"):
        case = json.loads(path.read_text())
        for ph in case.get("phases", []):
            proc = ph["process"]
            recorded += proc.get("duration_s") or 0.0
            ctx = json.loads((path.parent / "artifacts" / f"{ph['phase']}.context.json").read_text())
            seen = [Path(ctx["seen_at"])] if ctx.get("seen_at") else []  # where the sandbox showed the folder
            commands[f"{case['case_id']}/{ph['phase']}"] = normalize(inner_command(proc["command"]),
                                                                    Path(ctx["workspace"]).parent, *seen)
    return commands, recorded


def failed_phases(run_dir: Path) -> list[str]:
    """The phases of a stored run whose agent did not exit 0 (both sides must run the same work)."""
    bad = []
    for path in run_dir.glob("cases/*/case.json"):
        case = json.loads(path.read_text())
        bad += [f"{case['case_id']}/{ph['phase']}: {ph['process'].get('status')} exit {ph['process'].get('exit_code')}"
                for ph in case.get("phases", []) if ph["process"].get("exit_code") != 0]
    return bad


def inner_command(argv: list[str]) -> list[str]:
    """The agent's own argv inside the sandbox's wrapper (bwrap … the init … -- argv, whichever init), else argv."""
    from gripprobe_core.runner.sandbox import inner_argv

    return list(inner_argv(argv))


_URL = re.compile(r"http://127\.0\.0\.1:\d+")


def normalize(argv: list[str], *phase_dirs: Path) -> list[str]:
    """``argv`` with the phase's folder (its real path, and where the sandbox shows it) and loopback ports
    replaced by placeholders."""
    out = []
    for a in argv:
        for d in phase_dirs:
            a = a.replace(str(d), "<phase>")
        out.append(_URL.sub("http://127.0.0.1:<port>", a))
    return out


# ----------------------------------------------------------------------------------------- the baseline

def baseline(n: int, out: Path) -> dict:
    """Run the helper (this script, ``--role agents``) in its own process; what it measured."""
    res = subprocess.run([sys.executable, __file__, "--role", "agents", "--n", str(n), "--out", str(out)],
                         cwd=ROOT, env=bench_env(), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise SystemExit(f"the agents-alone helper failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


async def agents_alone(n: int, out: Path) -> dict:
    """Every phase of the ``n`` cases prepared as the runner prepares it (no proxy, no sandbox), its agent
    run alone: the agents' wall times and normalized commands."""
    from contextlib import AsyncExitStack

    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.matrix import plan_cases, with_trials
    from gripprobe_core.runner.phase import PHASES, prepare, resolve_executable
    from gripprobe_core.runner.settings import ActiveRun, RunSettings
    from gripprobe_core.runvalues import make_run_values
    from gripprobe_core.specs import load_specs
    from gripprobe_core.store.layout import RunFolder

    gpm = make_plugin_manager()
    specs = load_specs(ROOT / "specs", registry=gpm.registry)
    models, tests, trials = selection(n)
    cases = with_trials(plan_cases(specs, agents=["reference"], models=list(models), tests=list(tests)), trials)
    cases = [c.settle(proxy_mode="off", sandbox="none") for c in cases]
    scratch = out / "scratch"
    run = ActiveRun(id="agents-alone", folder=RunFolder(out / "run"), plugins=gpm, values=make_run_values(),
                    scratch=scratch, settings=RunSettings(results_root=out, proxy_mode="off", sandbox="none"))
    times: list[float] = []
    exits: list[int] = []
    commands: dict[str, list[str]] = {}
    for case in cases:
        case_dir = out / "run" / "cases" / case.case_id
        (case_dir / "artifacts").mkdir(parents=True, exist_ok=True)
        for phase in PHASES:
            async with AsyncExitStack() as servers:
                setup = await prepare(case, run, phase, case_dir, scratch / case.case_id / phase, servers)
                if not hasattr(setup, "command"):
                    raise SystemExit(f"{case.case_id} {phase}: the phase could not be prepared: {setup}")
                command = setup.command
                if command.session is not None:
                    raise SystemExit(f"{case.case_id}: a session agent cannot be replayed alone")
                argv = [resolve_executable(command.argv[0], setup.env.get("PATH", "")), *command.argv[1:]]
                cwd = command.cwd or setup.ctx.workspace
                commands[f"{case.case_id}/{phase}"] = normalize(argv, setup.ctx.workspace.parent)
                with open(case_dir / f"{phase}.stdout", "wb") as so, open(case_dir / f"{phase}.stderr", "wb") as se:
                    t0 = time.perf_counter()
                    proc = await asyncio.create_subprocess_exec(
                        *argv, cwd=cwd, env=setup.env, stdout=so, stderr=se, start_new_session=True,
                        stdin=subprocess.PIPE if command.stdin is not None else subprocess.DEVNULL)
                    if command.stdin is not None:
                        assert proc.stdin is not None
                        proc.stdin.write(command.stdin)
                        await proc.stdin.drain()
                        proc.stdin.close()
                    exits.append(await proc.wait())
                    times.append(time.perf_counter() - t0)
    return {"n": len(cases), "processes": len(times), "agent_s": sum(times), "exits": exits, "commands": commands}


# ----------------------------------------------------------------------------------------------- main

def measure(n: int, rounds: int, tmp: Path) -> list[Figure]:
    subj: list[float] = []
    base: list[float] = []
    recorded: list[float] = []
    last_run: Path | None = None
    helper: dict = {}
    for r in range(rounds):  # alternating: baseline, subject, baseline, subject ...
        helper = baseline(n, tmp / f"alone-{n}-{r}")
        if helper["processes"] != 2 * n or any(helper["exits"]):
            raise SystemExit(f"N={n}: the helper ran {helper['processes']} agents, exits {helper['exits']}")
        base.append(helper["agent_s"])
        wall, last_run = subject(n, tmp / f"run-{n}-{r}")
        if bad := failed_phases(last_run):
            raise SystemExit(f"N={n}: agents failed under the harness: {bad[:3]}")
        subj.append(wall)
        recorded.append(stored(last_run)[1])
        print(f"N={n} round {r + 1}/{rounds}: agents alone {helper['agent_s']:.2f} s, gripprobe run {wall:.2f} s "
              f"(load {load1():.2f})", flush=True)
    assert last_run is not None
    harness_commands = stored(last_run)[0]
    differ = [k for k in harness_commands if harness_commands[k] != helper["commands"].get(k)]
    if differ or set(harness_commands) != set(helper["commands"]):
        k = (differ or sorted(set(harness_commands) ^ set(helper["commands"])))[0]
        raise SystemExit(f"N={n}: the agents alone did not run the harness's commands ({len(differ)} differ), e.g. "
                         f"{k}:\n  harness: {harness_commands.get(k)}\n  alone:   {helper['commands'].get(k)}")
    cost = Spread.of((s - b) * 1000 / n for s, b in zip(subj, base))
    s_case, b_case = Spread.of(s * 1000 / n for s in subj), Spread.of(b * 1000 / n for b in base)
    rec = Spread.of((s - a) * 1000 / n for s, a in zip(subj, recorded))
    ratio = Spread.of(s / b for s, b in zip(subj, base)).median  # paired, as the cost: the machine drifts between rounds
    print(f"N={n}, {rounds} round(s), {2 * n} agent processes per round, the same commands on both sides:")
    print(f"  gripprobe run, per case:       {s_case.show('ms')}")
    print(f"  the agents alone, per case:    {b_case.show('ms')}")
    print(f"  harness cost per case:         {cost.show('ms')}  ratio {ratio:.2f}x")
    print(f"  (wall minus the agent time the harness records itself: {rec.show('ms')} per case)")
    target_ms = TARGET_MS if n >= TARGET_AT else None
    target_x = TARGET_RATIO if n >= TARGET_AT else None
    return [Figure(f"harness_cost_n{n}", cost.median, "ms", target_ms, b_case.median, ratio,
                   what=f"gripprobe run minus the agents alone, per case, median of {rounds}"),
            Figure(f"harness_ratio_n{n}", ratio, "x", target_x, b_case.median, ratio,
                   what="gripprobe run / the agents alone (baseline: the agents' ms per case)")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=5, quick_rounds=1)
    ap.add_argument("--sizes", default=None, help="case counts, comma-separated (default 6,48; --quick 6,12)")
    ap.add_argument("--role", choices=["bench", "agents"], default="bench", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "agents":
        print(json.dumps(asyncio.run(agents_alone(args.n, Path(args.out)))))
        return 0

    sizes = [int(s) for s in (args.sizes or ("6,12" if args.quick else "6,48")).split(",")]
    rounds = rounds_of(args)
    print(f"python3 on the agents' PATH: {python3_on()} (inside the sandbox and outside); load {load1():.2f}")
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="gp-bench-") as tmp:
        for n in sizes:
            figures += measure(n, rounds, Path(tmp))
    report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
