"""What every benchmark script shares: the contract's rounds, figures and ``RESULT`` lines.

The contract (benchmarks/run_all.py collects what it asks for):

* measure what a user waits for, from outside (whole commands run with :mod:`subprocess`), against a
  baseline measured in the same run, in **alternating rounds** (baseline, subject, baseline, subject, ...):
  :func:`alternate`;
* report min / median / max of each (:class:`Spread`) and the ratio subject / baseline;
* take ``--quick`` (few rounds, a CI smoke run): :func:`add_contract_args`;
* print, as the last lines, one line per figure (:func:`result_line`)::

      RESULT <name> <value> <unit> target=<target or -> baseline=<baseline value> ratio=<ratio or -> load=<1-min loadavg> [MET|MISSED]

  A target is an upper bound (``60`` or ``<=60``: the figure is met when it is at most that), or a lower
  bound written ``>=N``; ``ratio<=N`` bounds the ratio instead. The benchmark itself says MET or MISSED
  per figure (:func:`verdict`, on the unrounded figure) and writes that word after the line's fields
  (:func:`report`), where run_all reads it: the printed value has at most 3 decimals, and a median of
  1.1002× prints as ``1.1`` against a target of 1.1 — MISSED, which a reader of the rounded value would call
  MET.

``python3`` must resolve to the same interpreter inside the sandbox and outside it: the sandbox mounts the
system folders and the project's own interpreter, never a user's shims (a pyenv shim is a bash script that
costs ~120 ms per start, the interpreter 13 ms). :func:`bench_env` gives the environment every benchmark
runs its commands in, with ``PATH`` reduced to :data:`SYSTEM_PATH`, so the harness hands its agents the
same ``python3`` as the baseline's agents get.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The agents' PATH in every benchmark: folders the sandbox mounts as they are (under ``/usr``), so a
command name resolves to the same file inside and outside it."""

T = TypeVar("T")


def load1() -> float:
    """The machine's 1-minute load average (others may be measuring too: every figure carries it)."""
    return os.getloadavg()[0]


def add_contract_args(ap: argparse.ArgumentParser, rounds: int = 3, quick_rounds: int = 1) -> None:
    """``--quick`` and ``--rounds`` (``--quick`` sets the rounds to ``quick_rounds`` unless given)."""
    ap.add_argument("--quick", action="store_true", help=f"a CI smoke run: {quick_rounds} round(s), smaller sizes")
    ap.add_argument("--rounds", type=int, default=None, help=f"alternating rounds (default {rounds}, "
                                                              f"{quick_rounds} with --quick)")
    ap.set_defaults(_default_rounds=rounds, _quick_rounds=quick_rounds)


def rounds_of(args: argparse.Namespace) -> int:
    if args.rounds is not None:
        return max(1, args.rounds)
    return args._quick_rounds if args.quick else args._default_rounds


def alternate(baseline: Callable[[int], T], subject: Callable[[int], T], rounds: int) -> tuple[list[T], list[T]]:
    """``rounds`` rounds of baseline then subject (each called with the round's number); their results."""
    base: list[T] = []
    subj: list[T] = []
    for r in range(rounds):
        base.append(baseline(r))
        subj.append(subject(r))
    return base, subj


@dataclass(frozen=True)
class Spread:
    """min / median / max of a figure over rounds."""

    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread":
        vals = sorted(values)
        if not vals:
            raise ValueError("no values")
        return cls(vals[0], statistics.median(vals), vals[-1])

    def show(self, unit: str = "", digits: int = 1) -> str:
        u = f" {unit}" if unit else ""
        return f"{self.median:.{digits}f}{u} (min {self.min:.{digits}f}, max {self.max:.{digits}f})"


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; 0.0 for no values."""
    vals = sorted(values)
    if not vals:
        return 0.0
    return vals[min(len(vals) - 1, max(0, math.ceil(q * len(vals)) - 1))]


def ratio(subject: float, baseline: float) -> float | None:
    return subject / baseline if baseline else None


def parse_target(target: str | float | None) -> tuple[str, float] | None:
    """``60``/``<=60`` → ("<=", 60.0); ``>=5`` → (">=", 5.0); None or ``-`` → None (``≤``/``≥`` too).
    A target on the ratio (``ratio<=1.2``) gives its operator and bound the same way (see :func:`target_of`)."""
    got = target_of(target)
    return None if got is None else (got[1], got[2])


def target_of(target: str | float | None) -> tuple[str, str, float] | None:
    """(what it bounds: ``value`` or ``ratio``, operator, bound) of a target; None for none.
    Raises ValueError for a target that is none of these forms."""
    if target is None:
        return None
    if isinstance(target, (int, float)):
        return "value", "<=", float(target)
    t = target.strip().replace("≤", "<=").replace("≥", ">=")
    if t in ("", "-"):
        return None
    field = "value"
    for name in ("ratio", "value"):
        if t.startswith(name):
            field, t = name, t[len(name):].lstrip()
            break
    for op in ("<=", ">="):
        if t.startswith(op):
            return field, op, float(t[len(op):])
    if field != "value" or not t:
        raise ValueError(f"not a target: {target!r}")
    return field, "<=", float(t)


def verdict(value: float, target: str | float | None, ratio: float | None = None) -> str:
    """``MET``/``MISSED`` against ``target`` (see :func:`target_of`: on the value, or on ``ratio``);
    ``-`` when there is none (or it bounds a ratio that is not known)."""
    parsed = target_of(target)
    if parsed is None:
        return "-"
    field, op, bound = parsed
    x = value if field == "value" else ratio
    if x is None:
        return "-"
    ok = x <= bound if op == "<=" else x >= bound
    return "MET" if ok else "MISSED"


def num(value: float | None) -> str:
    """A figure as the RESULT line writes it: ``-`` for none, no exponent, at most 3 decimals."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if value == 0:
        return "0"
    digits = 3 if abs(value) < 10 else 2 if abs(value) < 1000 else 1
    return f"{value:.{digits}f}".rstrip("0").rstrip(".")


def result_line(name: str, value: float, unit: str, *, target: str | float | None = None,
                baseline: float | None = None, ratio: float | None = None, load: float | None = None,
                stated: str | None = None) -> str:
    """One figure as the contract's ``RESULT`` line; ``stated``: the script's verdict (``MET``/``MISSED``, taken on
    the unrounded figure), written last."""
    if not name or any(c.isspace() for c in name) or not unit or any(c.isspace() for c in unit):
        raise ValueError(f"a RESULT name and unit are single words: {name!r} {unit!r}")
    if stated not in (None, "MET", "MISSED"):
        raise ValueError(f"a verdict is MET or MISSED, not {stated!r}")
    tgt = "-" if target_of(target) is None else (num(float(target)) if isinstance(target, (int, float))
                                                     else str(target).strip())
    return (f"RESULT {name} {num(value)} {unit} target={tgt} baseline={num(baseline)} ratio={num(ratio)} "
            f"load={num(load1() if load is None else load)}" + (f" {stated}" if stated else ""))


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    target: str | float | None = None
    baseline: float | None = None
    ratio: float | None = None
    load: float | None = None
    what: str = ""
    """One human sentence printed with the verdict (what the figure is)."""


def report(figures: list[Figure]) -> None:
    """Each figure's verdict as a sentence, then the RESULT lines, last (the contract)."""
    load = load1()
    said = [verdict(f.value, f.target, f.ratio) for f in figures]
    for f, v in zip(figures, said):
        tgt = "" if v == "-" else f", target {f.target}: {v}"
        print(f"{f.name}: {num(f.value)} {f.unit}{tgt}" + (f"  ({f.what})" if f.what else ""))
    for f, v in zip(figures, said):
        print(result_line(f.name, f.value, f.unit, target=f.target, baseline=f.baseline, ratio=f.ratio,
                          load=load if f.load is None else f.load, stated=None if v == "-" else v))
    sys.stdout.flush()


def missed(figures: Iterable[Figure]) -> list[Figure]:
    """The figures whose target is MISSED (a script may exit 1 after its RESULT lines when any is)."""
    return [f for f in figures if verdict(f.value, f.target, f.ratio) == "MISSED"]


def bench_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment benchmark commands run in: this one without GRIPPROBE_* and PYTHONPATH, PATH reduced
    to :data:`SYSTEM_PATH` (``python3`` the same file inside and outside the sandbox)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    env["PATH"] = SYSTEM_PATH
    env.update(extra or {})
    return env


def python3_on(path: str = SYSTEM_PATH) -> str:
    """The file ``python3`` resolves to on ``path`` (followed through links), or ``-``."""
    found = shutil.which("python3", path=path)
    return os.path.realpath(found) if found else "-"


def gripprobe_cli() -> list[str]:
    """The ``gripprobe`` command as a user runs it: the console script of this venv, else ``python -m``."""
    script = Path(sys.executable).parent / "gripprobe"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "gripprobe_core.cli"]


# ------------------------------------------------------------------------------- memory, seen from outside

def status_kib(pid: int, field: str = "VmRSS") -> int:
    """A ``/proc/<pid>/status`` size field in KiB (``VmRSS``: resident now; ``VmHWM``: the kernel's peak of
    it so far); 0 when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(field.encode() + b":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def child_pids(pid: int) -> list[int]:
    """The pids of ``pid``'s children (its main thread's), [] when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except (OSError, ValueError):
        return []


def cmdline_has(pid: int, needle: bytes) -> bool:
    """Whether ``pid``'s command line holds ``needle``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return needle in fh.read()
    except OSError:
        return False


class MemorySampler:
    """Samples the memory of processes from outside, on a thread, every ``every_s`` until :meth:`stop`.

    ``pids`` is called on every tick (processes may come and go: a recorder child started late); for each
    pid it returns, under its name, the peak of the ``VmRSS`` samples and the last ``VmHWM`` read (the
    kernel's own peak: it also sees what falls between two samples) are kept, in KiB. Use as a context
    manager around what it should watch."""

    def __init__(self, pids: Callable[[], Mapping[str, int]], every_s: float = 0.02) -> None:
        import threading

        self._pids, self.every_s = pids, every_s
        self.rss: dict[str, int] = {}
        self.hwm: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tick(self) -> None:
        for name, pid in self._pids().items():
            rss, hwm = status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
            if rss:
                self.rss[name] = max(self.rss.get(name, 0), rss)
            if hwm:
                self.hwm[name] = max(self.hwm.get(name, 0), hwm)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.every_s)

    def start(self) -> "MemorySampler":
        self._thread.start()
        return self

    def stop(self) -> "MemorySampler":
        self._stop.set()
        self._thread.join()
        return self

    def __enter__(self) -> "MemorySampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def peak_mib(self, name: str, kernel: bool = True) -> float:
        """The peak of ``name`` in MiB: the larger of the sampled VmRSS and the last VmHWM read, or with
        ``kernel=False`` the sampled VmRSS alone (VmHWM holds the process's whole life: its start-up too)."""
        return max(self.rss.get(name, 0), self.hwm.get(name, 0) if kernel else 0) / 1024
