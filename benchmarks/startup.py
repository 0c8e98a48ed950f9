"""A command's fixed cost, seen from outside: start-up, a bare one-case run, and what the spec cache saves.

Every figure is whole commands timed with :mod:`subprocess`, in alternating rounds against a baseline
measured in the same rounds (baseline first), min / median / max of each:

* ``startup_version``: ``gripprobe --version`` against a bare interpreter (``python -c pass``): what
  importing the CLI costs before any command runs.
* ``startup_validate``: ``gripprobe validate`` of the shipped specs (plugins loaded, every spec read,
  validated and cross-checked) against the same bare interpreter.
* ``spec_cache`` (wall) and ``spec_cache_cpu`` (the command's CPU time): ``gripprobe validate`` with the
  parse cache warm against ``GRIPPROBE_SPEC_CACHE=0`` (every spec parsed again), twice the rounds: the
  cache must be faster than parsing (target: ratio ≤ 1).
* ``startup_run``: a one-case ``gripprobe run`` (the reference agent on ``oracle-perfect``, ``save_file``,
  ``--jobs 1``, the default sandbox) minus the same case's two agent processes run alone (the helper of
  benchmarks/harness_overhead.py: each phase prepared as the runner prepares it, its agent timed from spawn
  to exit; the commands checked against those the harness stored). Target: ≤ 0.3 s.

Before the rounds it says whether the editable sources' bytecode is current (``./dev setup`` compiles it;
with ``PYTHONDONTWRITEBYTECODE=1`` stale bytecode means the core is compiled again on every start).

    .venv/bin/python benchmarks/startup.py [--quick] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (ROOT, Figure, Spread, add_contract_args, bench_env, gripprobe_cli, load1,  # noqa: E402
                    report, rounds_of)
from harness_overhead import baseline as agents_alone, stored, subject as one_run  # noqa: E402

TARGET_RUN_S = 0.3
CASE = ("reference", "oracle-perfect", "save_file")


def timed(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    """Wall seconds of one command, which must succeed."""
    return timed_cpu(argv, env, cwd)[0]


def timed_cpu(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float]:
    """(wall, CPU) seconds of one command, which must succeed; CPU is the child's user + system time (less
    moved by the machine's load than wall time, which others' benchmarks share)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def stale_bytecode() -> list[str]:
    """The core's and plugins' sources whose bytecode Python would not use: missing, or its header's source
    mtime and size (PEP 552, timestamp-based) not those of the source now."""
    out = []
    for top in [ROOT / "src", *sorted((ROOT / "plugins").glob("*/src"))]:
        for py in top.rglob("*.py"):
            try:
                head = Path(importlib.util.cache_from_source(str(py))).read_bytes()[:16]
                st = py.stat()
            except OSError:
                out.append(str(py.relative_to(ROOT)))
                continue
            flags = int.from_bytes(head[4:8], "little")
            fresh = len(head) == 16 and head[:4] == importlib.util.MAGIC_NUMBER and (
                flags != 0 or (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                               and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF))
            if not fresh:
                out.append(str(py.relative_to(ROOT)))
    return out


def pair(name: str, base_argv: list[str], subj_argv: list[str], rounds: int, *, base_env: dict[str, str],
         subj_env: dict[str, str], unit_what: str, target: str | float | None = None,
         as_ratio: bool = False) -> list[Figure]:
    """Alternating rounds of two commands: the subject's wall (or, ``as_ratio``, subject / baseline of the
    wall and of the CPU time, ``<name>`` and ``<name>_cpu``)."""
    base: list[tuple[float, float]] = []
    subj: list[tuple[float, float]] = []
    for r in range(rounds):
        base.append(timed_cpu(base_argv, base_env))
        subj.append(timed_cpu(subj_argv, subj_env))
        print(f"{name} round {r + 1}/{rounds}: baseline {base[-1][0] * 1000:.0f} ms (CPU {base[-1][1] * 1000:.0f}), "
              f"subject {subj[-1][0] * 1000:.0f} ms (CPU {subj[-1][1] * 1000:.0f}) (load {load1():.2f})", flush=True)
    b, s = Spread.of(x * 1000 for x, _ in base), Spread.of(x * 1000 for x, _ in subj)
    bc, sc = Spread.of(c * 1000 for _, c in base), Spread.of(c * 1000 for _, c in subj)
    extra = Spread.of((y[0] - x[0]) * 1000 for x, y in zip(base, subj))
    ratio, cpu_ratio = s.median / b.median, sc.median / bc.median
    print(f"  {name}: subject {s.show('ms', 0)}, baseline {b.show('ms', 0)}, difference {extra.show('ms', 0)}, "
          f"ratio {ratio:.2f}x; CPU subject {sc.show('ms', 0)}, baseline {bc.show('ms', 0)}, ratio {cpu_ratio:.2f}x")
    if as_ratio:
        return [Figure(name, ratio, "x", target, b.median, ratio, what=unit_what + ", wall"),
                Figure(f"{name}_cpu", cpu_ratio, "x", target, bc.median, cpu_ratio, what=unit_what + ", CPU")]
    return [Figure(name, s.median, "ms", target, b.median, ratio, what=unit_what)]


def same_agent_commands(harness: dict[str, list[str]], alone: dict[str, list[str]]) -> bool:
    """Each phase's agent argv run alone is the argv the harness ran: the whole stored command, or its end (the
    sandbox's wrapper, ``bwrap … sandbox_init … --``, comes first; its init may be a compiled program)."""
    return harness.keys() == alone.keys() and all(
        len(alone[k]) > 0 and harness[k][len(harness[k]) - len(alone[k]):] == alone[k] for k in alone)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=5, quick_rounds=2)
    args = ap.parse_args(argv)
    rounds = rounds_of(args)
    stale = stale_bytecode()
    print(f"bytecode of the editable sources: {'current' if not stale else f'{len(stale)} file(s) stale or missing, e.g. {stale[0]} (./dev setup compiles them)'}; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}; load {load1():.2f}", flush=True)
    gp = gripprobe_cli()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="gp-startup-") as tmp_name:
        tmp = Path(tmp_name)
        # The commands' own cache folder (the spec cache, the report templates'): warm after the first command.
        env = bench_env({"XDG_CACHE_HOME": str(tmp / "cache")})
        bare = [sys.executable, "-c", "pass"]
        timed([*gp, "validate"], env)  # warm the caches once, outside the rounds (the run's: the user's own)
        timed([*gp, "validate", "--specs", str(ROOT / "specs")], bench_env())
        figures += pair("startup_version", bare, [*gp, "--version"], rounds, base_env=env, subj_env=env,
                        unit_what="gripprobe --version (baseline: python -c pass)")
        figures += pair("startup_validate", bare, [*gp, "validate"], rounds, base_env=env, subj_env=env,
                        unit_what="gripprobe validate of the shipped specs (baseline: python -c pass)")
        # the cache saves ~0.15 s of a ~1.2 s command: twice the rounds, so the machine's noise does not decide
        figures += pair("spec_cache", [*gp, "validate"], [*gp, "validate"], 2 * rounds,
                        base_env={**env, "GRIPPROBE_SPEC_CACHE": "0"}, subj_env=env, target=1.0, as_ratio=True,
                        unit_what="gripprobe validate, spec cache warm / parsing every spec (GRIPPROBE_SPEC_CACHE=0)")

        # A bare one-case run against its two agent processes alone (benchmarks/harness_overhead.py's helper).
        base: list[float] = []
        subj: list[float] = []
        helper: dict = {}
        last_run = None
        for r in range(rounds):
            helper = agents_alone(1, tmp / f"alone-{r}")
            if helper["processes"] != 2 or any(helper["exits"]):
                raise SystemExit(f"the helper ran {helper['processes']} agents, exits {helper['exits']}")
            base.append(helper["agent_s"])
            wall, last_run = one_run(1, tmp / f"run-{r}")
            subj.append(wall)
            print(f"startup_run round {r + 1}/{rounds}: agents alone {helper['agent_s'] * 1000:.0f} ms, "
                  f"gripprobe run {wall * 1000:.0f} ms (load {load1():.2f})", flush=True)
        assert last_run is not None
        commands = stored(last_run)[0]
        if not same_agent_commands(commands, helper["commands"]):
            raise SystemExit(f"the agents alone did not run the harness's commands:\n  harness: {commands}\n"
                             f"  alone:   {helper['commands']}")
        cost = Spread.of((s - b) * 1000 for s, b in zip(subj, base))
        b_ms, s_ms = Spread.of(b * 1000 for b in base), Spread.of(s * 1000 for s in subj)
        ratio = s_ms.median / b_ms.median
        print(f"  startup_run: gripprobe run {s_ms.show('ms', 0)}, the agents alone {b_ms.show('ms', 0)}, "
              f"cost {cost.show('ms', 0)}, ratio {ratio:.2f}x")
        figures.append(Figure("startup_run", cost.median / 1000, "s", TARGET_RUN_S, b_ms.median / 1000, ratio,
                              what=f"a one-case gripprobe run minus its agents alone, median of {rounds}"))
    report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
