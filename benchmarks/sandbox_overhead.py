"""The sandbox's added cost per phase, and the CPU a case burns with and without it, measured from outside.

Three figures, each against a baseline measured in the same run, in alternating rounds:

1. **Added per phase**: the reference agent's real command (one phase of ``save_file`` on a fresh oracle
   server) run bare, and the same command under the harness's own bubblewrap command line
   (``Sandbox.wrap``: the harness's mounts, GripProbe's init as PID 1 — the init the harness really uses
   here: the compiled one where a C compiler works, else the Python one —, its forwarded port and the
   harness's network bridge, started and closed inside the timed span, as a phase does). Both get the same
   environment (the harness's ``base_env``: the same ``PATH``) and the same absolute executable, so nothing
   resolves differently inside and out. Target: ≤ 10 ms per phase (median subject − median baseline).
   When the harness uses the compiled init, the same line with the Python init runs in the same rounds too
   (``sandbox_added_per_phase_python_init``: what the compiled init saves).
2. **bwrap's floor**: ``bwrap --ro-bind / / true`` against ``true`` alone: what any bubblewrap exec costs here.
3. **CPU per case**: ``gripprobe run`` of the same cases with ``--sandbox none`` and ``--sandbox bwrap``,
   the CPU time of the whole command and everything it waited for (``RUSAGE_CHILDREN``), per case.
   Target: ``none`` burns no more than ``bwrap`` (ratio ≤ 1.05: the sandboxed run also runs bwrap and an
   init per phase, so ``none`` should come out lower).

Also printed, not targets: where the sandboxed phase's time goes (the full command line with /bin/true, with
each init and without one, without its network, its /dev, its /proc; each init alone, without bwrap),
measured in the same alternating rounds.

    .venv/bin/python benchmarks/sandbox_overhead.py [--quick] [--rounds N] [--cases N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADDED_TARGET_MS = 10.0
CPU_RATIO_TARGET = 1.05


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "-"


def _stats(xs: list[float]) -> str:
    return f"min {min(xs):7.1f}  median {statistics.median(xs):7.1f}  max {max(xs):7.1f} ms  (n={len(xs)})"


def result(name: str, value: float, unit: str, target: str, baseline: float | None, ratio: float | None) -> str:
    """The figure's RESULT line, its verdict (on the unrounded value and ratio) last when it has a target."""
    said = verdict(value, target, ratio)
    return (f"RESULT {name} {value:.1f} {unit} target={target} "
            f"baseline={'-' if baseline is None else f'{baseline:.1f}'} "
            f"ratio={'-' if ratio is None else f'{ratio:.3f}'} load={_load()}{'' if said == '-' else ' ' + said}")


async def _timed_exec(argv: list[str], env: dict[str, str], cwd: Path, out: Path) -> float:
    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(*argv, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL,
                                                    stdout=fh, stderr=subprocess.STDOUT)
        rc = await proc.wait()
        dt = (time.perf_counter() - t0) * 1000
    if rc != 0:
        raise SystemExit(f"{argv[:3]}… exited {rc}: {out.read_text(errors='replace')[-2000:]}")
    return dt


async def phase_rounds(rounds: int) -> dict[str, list[float]]:
    """Wall ms of one reference-agent phase: ``bare``, ``box`` (the harness's sandbox and init) and, when that
    init is the compiled one, ``python`` (the same sandbox with the Python init); alternating the order."""
    from gripprobe_core.oracle.server import OracleServer
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner.env import base_env
    from gripprobe_core.runner.netbridge import NetBridge
    from gripprobe_core.runner.phase import resolve_executable
    from gripprobe_core.runner.sandbox import resolve_sandbox
    from gripprobe_core.specs import load_specs

    harness = resolve_sandbox("bwrap")
    boxes = {"box": harness, **({"python": replace(harness, init=None)} if harness.init is not None else {})}
    specs = load_specs(ROOT / "specs", registry=make_plugin_manager().registry)
    test = specs.tests["save_file"]
    exe = resolve_executable("gripprobe-refagent", os.environ.get("PATH", ""))
    times: dict[str, list[float]] = {"bare": [], **{k: [] for k in boxes}}

    async def one(scratch: Path, variant: str) -> float:
        sandboxed = variant != "bare"
        ws, home, tmp = scratch / "workspace", scratch / "home", scratch / "tmp"
        for d in (ws, home, tmp):
            d.mkdir(parents=True)
        env = base_env(home, tmp, {})
        env["OPENAI_API_KEY"] = "oracle"
        server = OracleServer(list(test.reference), default_profile="perfect")
        await server.start()
        try:
            argv = [exe, "--base-url", f"{server.base_url}/v1", "--model", "perfect", "--workspace", str(ws),
                    "--prompt", test.prompt]
            if not sandboxed:
                return await _timed_exec(argv, env, ws, scratch / "out")
            port = int(server.base_url.rsplit(":", 1)[1])
            t0 = time.perf_counter()
            async with NetBridge([port]) as bridge:
                wrapped = boxes[variant].wrap(argv, cwd=ws, rw=[ws, home, tmp], forwards=bridge.forwards)
                await _timed_exec(wrapped, env, ws, scratch / "out")
            return (time.perf_counter() - t0) * 1000
        finally:
            await server.stop()
            if not (ws / "greeting.txt").is_file():
                raise SystemExit(f"the agent did not do its task ({variant}): "
                                 f"{(scratch / 'out').read_text(errors='replace')[-2000:]}")

    with tempfile.TemporaryDirectory(prefix="gp-bench-sandbox-") as d:
        names = list(times)
        for name in names:  # bytecode, page cache: warm for all
            await one(Path(d) / f"warm-{name}", name)
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                times[name].append(await one(Path(d) / f"{r}-{name}", name))
    return times


def _wall_ms(argv: list[str], cwd: str = "/") -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def _drop(argv: list[str], flag: str, n_args: int) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag:
            i += 1 + n_args
            continue
        out.append(argv[i])
        i += 1
    return out


def exec_rounds(rounds: int) -> dict[str, list[float]]:
    """Wall ms of starting ``true`` bare, under the minimal bwrap, and under the harness's command line in
    pieces (the breakdown of where a sandboxed phase's fixed cost goes), all alternating."""
    from gripprobe_core.runner.sandbox import resolve_sandbox

    box = resolve_sandbox("bwrap")
    python_box = replace(box, init=None)
    bwrap = box.bwrap or "bwrap"
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="gp-bench-exec-") as d:
        ws = Path(d)
        forward = {40000: ws / "40000.sock"}
        full = box.wrap([true], cwd=ws, rw=[ws], forwards=forward)
        full_py = python_box.wrap([true], cwd=ws, rw=[ws], forwards=forward)
        cut = full_py.index("--as-pid-1")
        mounts = full_py[:cut]  # bwrap and its mounts, no init: the command run directly by bwrap's own init
        py_init = full_py[cut + 4:cut + 8]  # python -I -S sandbox_init.py
        variants = {
            "true": [true],
            "floor: bwrap --ro-bind / / true": [bwrap, "--ro-bind", "/", "/", true],
            f"harness line, {box.init_kind} init + forward": full,
            **({"harness line, python init + forward": full_py} if box.init is not None else {}),
            "harness line, no init": [*mounts, "--", true],
            "  … and no network namespace": [*_drop(mounts, "--unshare-all", 0)[:1], "--unshare-user",
                                              "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
                                              *_drop(mounts, "--unshare-all", 0)[1:], "--", true],
            "  … and no --dev": [*_drop(mounts, "--dev", 1), "--", true],
            "  … and no --proc": [*_drop(mounts, "--proc", 1), "--", true],
            **({"compiled init alone, no bwrap": [str(box.init.path), "-C", "/", "--", true]}
               if box.init is not None else {}),
            "python init alone, no bwrap": [*py_init, "-C", "/", "--", true],
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        for name in names:  # warm
            _wall_ms(variants[name])
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                times[name].append(_wall_ms(variants[name]))
    return times


def cpu_rounds(rounds: int, tests: list[str]) -> dict[str, dict[str, list[float]]]:
    """Per mode: CPU ms per case (the command and all it waited for) and wall ms per case, alternating."""
    out: dict[str, dict[str, list[float]]] = {m: {"cpu": [], "wall": []} for m in ("none", "bwrap")}
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="gp-bench-cpu-") as tmp:
        for r in range(rounds):
            for mode in (("none", "bwrap") if r % 2 == 0 else ("bwrap", "none")):
                argv = [sys.executable, "-m", "gripprobe_core.cli", "run", "--specs", str(ROOT / "specs"),
                        "--results", str(Path(tmp) / f"{mode}-{r}"), "--sandbox", mode, "-a", "reference",
                        "-m", "oracle-perfect", *[x for t in tests for x in ("-t", t)]]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
                wall = (time.perf_counter() - t0) * 1000
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if proc.returncode != 0:
                    raise SystemExit(f"gripprobe run --sandbox {mode} failed ({proc.returncode}): {proc.stderr[-2000:]}")
                cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
                out[mode]["cpu"].append(cpu / len(tests))
                out[mode]["wall"].append(wall / len(tests))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few rounds (CI smoke)")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds per figure (default 20; quick 3)")
    ap.add_argument("--cases", type=int, default=None, help="cases per `gripprobe run` for the CPU figure "
                                                             "(default 6; quick 2)")
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 20)
    ncases = args.cases or (2 if args.quick else 6)

    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.specs import load_specs

    specs = load_specs(ROOT / "specs", registry=make_plugin_manager().registry)
    tests = sorted(t.id for t in specs.tests.values() if t.challenge is None)[:ncases]

    from gripprobe_core.runner.sandbox import resolve_sandbox

    box = resolve_sandbox("bwrap")
    print(f"load at start: {_load()}; {rounds} alternating rounds; the harness's init here: {box.init_kind}"
          + (f" ({box.init.path})" if box.init is not None else f" ({box.warning})"))
    phases = asyncio.run(phase_rounds(rounds))
    bare, boxed = phases["bare"], phases["box"]
    print(f"reference agent, one phase, bare:            {_stats(bare)}")
    print(f"reference agent, one phase, harness's bwrap: {_stats(boxed)}  ({box.init_kind} init)")
    if "python" in phases:
        print(f"reference agent, one phase, Python init:     {_stats(phases['python'])}")
    execs = exec_rounds(max(rounds, 10))
    print("starting /bin/true (where the fixed cost goes):")
    base = statistics.median(execs["true"])
    for name, xs in execs.items():
        print(f"  {name:34s} {_stats(xs)}   +{statistics.median(xs) - base:5.1f} ms")
    cpu = cpu_rounds(max(2, rounds // 4), tests)
    for mode in ("none", "bwrap"):
        print(f"gripprobe run --sandbox {mode:5s} per case: CPU {_stats(cpu[mode]['cpu'])}; "
              f"wall {_stats(cpu[mode]['wall'])}")

    added = statistics.median(boxed) - statistics.median(bare)
    floor = statistics.median(execs["floor: bwrap --ro-bind / / true"]) - base
    cpu_none, cpu_box = statistics.median(cpu["none"]["cpu"]), statistics.median(cpu["bwrap"]["cpu"])
    met_added = added <= ADDED_TARGET_MS
    met_cpu = cpu_none <= cpu_box * CPU_RATIO_TARGET
    print(f"added per phase {added:.1f} ms with the {box.init_kind} init (target ≤ {ADDED_TARGET_MS:g}): "
          f"{'MET' if met_added else 'MISSED'}; "
          f"bwrap's floor here {floor:.1f} ms")
    print(f"CPU per case, none/bwrap {cpu_none / cpu_box:.3f} (target ≤ {CPU_RATIO_TARGET}): "
          f"{'MET' if met_cpu else 'MISSED'}")
    if "python" in phases:
        py = statistics.median(phases["python"])
        print(result("sandbox_added_per_phase_python_init", py - statistics.median(bare), "ms", "-",
                     statistics.median(bare), py / statistics.median(bare)))
    print(result("sandbox_added_per_phase", added, "ms", f"{ADDED_TARGET_MS:g}", statistics.median(bare),
                 statistics.median(boxed) / statistics.median(bare)))
    print(result("sandbox_bwrap_floor", floor, "ms", "-", base, statistics.median(execs["floor: bwrap --ro-bind / / true"]) / base))
    print(result("sandbox_none_cpu_per_case", cpu_none, "ms", f"ratio<={CPU_RATIO_TARGET}", cpu_box, cpu_none / cpu_box))
    return 0 if met_added and met_cpu else 1


if __name__ == "__main__":
    sys.exit(main())
