"""Reading stored results at scale, against a plain read of the same files (issue 21 item 5; docs/aggregate.md
"Scale", docs/export.md "Scale").

Setup (not timed): one real case of the reference agent on the oracle (``gripprobe run``) is the template;
its case.json, events, ground truth, prompt and final text are cloned into synthetic runs with varied keys
(5 agents x 2 versions, 8 models, 2 formats, 18 tests, 2 hardware profiles, every status), case.json
rewritten and checked as a valid result, the other files with their ids replaced. The runs are unsigned.

Measured, whole commands from outside, each against a baseline in alternating rounds (baseline, subject, ...):

* ``gripprobe aggregate-reports`` over 10,000 cases in 20 runs;
* ``gripprobe compare`` of two runs of 504 cases each;
* ``gripprobe export --format junit`` and ``--format atif`` of one run of 1,008 cases;

the baseline of each a plain Python script (``python3 -c``, the same interpreter) that reads every file the command
reads, in the same order, with ``json.loads`` (a JSON lines file line by line). The figures: the median wall time
of each and the median of their ratio round by round (each round's command against the plain read just before it:
the machine drifts between rounds), five rounds by default, and the peak RSS of each command (``ru_maxrss`` from
``os.wait4``: ``getrusage(RUSAGE_CHILDREN)`` of that one child; the plain ``RUSAGE_CHILDREN`` keeps only the
largest child so far: for a command with worker processes, the largest of them). A child's ``ru_maxrss`` starts at
its parent's size when it was forked, so the setup runs in a child of its own and this process stays small. A
command that reads with worker processes (``aggregate-reports --jobs``) is also judged by what they hold together:
the largest sum of PSS (proportional set size: a page shared by a parent and its forked worker counted once) over
the command and every process below it, sampled every 20 ms (``*_tree_pss``). Targets (issue 21): the aggregate
within 1.5x its plain read and <= 100 MB peak (both memory figures); compare and the exports are reported without a
target (on ~1k cases the command's start-up, item 4, dominates the ratio).

    .venv/bin/python benchmarks/aggregate_scale.py [--quick] [--rounds 5] [--cases 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (  # noqa: E402
    Figure, Spread, add_contract_args, alternate, bench_env, gripprobe_cli, load1, report, rounds_of, verdict)

RATIO_TARGET = 1.5
RSS_TARGET_MB = 100.0
STATUS_WEIGHTS = {"PASS": 40, "PASS_WITH_POLICY_VIOLATION": 10, "FAIL": 15, "NO_TOOL_CALL": 15, "TIMEOUT": 5,
                  "TOOL_UNSUPPORTED": 3, "SHELL_ERROR": 4, "HARNESS_ERROR": 3, "SKIPPED": 5}
#: The files of a case that are cloned (all the commands measured here read; nothing else is written).
CASE_FILES = ("case.json", "prompt.txt", "artifacts/events.measured.jsonl", "artifacts/oracle.measured.jsonl",
              "artifacts/measured.final.txt")
#: What each command reads of a case (the baseline reads the same), besides each run's manifest.json.
READS = {"aggregate": ("case.json", "artifacts/events.measured.jsonl", "artifacts/oracle.measured.jsonl"),
         "compare": ("case.json",), "junit": ("case.json",),
         "atif": ("case.json", "prompt.txt", "artifacts/measured.final.txt", "artifacts/events.measured.jsonl")}

# The baseline: every run folder given, its manifest, then each case folder (sorted) and the files named.
PLAIN_READ = r"""
import json, os, sys
runs, names = sys.argv[1].split(os.pathsep), sys.argv[2].split(",")
n = 0
for run in runs:
    with open(os.path.join(run, "manifest.json"), "rb") as fh:
        json.loads(fh.read())
    cases = os.path.join(run, "cases")
    for case in sorted(os.listdir(cases)):
        for name in names:
            with open(os.path.join(cases, case, name), "rb") as fh:
                data = fh.read()
            if name.endswith(".json"):
                json.loads(data)
            elif name.endswith(".jsonl"):
                for line in data.splitlines():
                    if line.strip():
                        json.loads(line)
        n += 1
print(n)
"""


def real_case(tmp: Path) -> Path:
    """The folder of one real case (the reference agent on oracle-perfect, save_file)."""
    res = subprocess.run([*gripprobe_cli(), "run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file",
                          "--results", str(tmp / "template")], capture_output=True, text=True, env=bench_env(),
                         timeout=300)
    if res.returncode != 0:
        sys.exit(f"the template run failed ({res.returncode}): {res.stderr[-2000:]}")
    (case,) = (Path(res.stdout.strip().splitlines()[-1]) / "cases").iterdir()
    return case


def generate(case: Path, root: Path, runs: list[tuple[str, int]], seed: int = 7) -> list[Path]:
    """Runs ``(run_id, cases)`` under ``root/runs`` cloned from the real ``case``; their folders."""
    rng = random.Random(seed)
    base = json.loads((case / "case.json").read_bytes())
    old_run, old_case = base["run_id"], base["case_id"]
    other = {rel: (case / rel).read_bytes() for rel in CASE_FILES[1:]}
    agents = [(f"agent-{i}", f"{i}.{v}.0") for i in range(5) for v in range(2)]
    models = [(f"model-{i}", "sha256:" + f"{i:02d}" * 32) for i in range(8)]
    tests = [f"test_{i:02d}" for i in range(18)]
    statuses, weights = list(STATUS_WEIGHTS), list(STATUS_WEIGHTS.values())
    folders = []
    for r, (run_id, count) in enumerate(runs):
        run_dir = root / "runs" / run_id
        (run_dir / "cases").mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps({
            "run_id": run_id, "status": "complete", "started_at": "2026-01-01T00:00:00.000Z", "suite": "scale",
            "hardware_profile": "ci-2core" if r % 2 else "gpu-box"}, indent=2))
        for i in range(count):
            (agent, version), (model, digest) = rng.choice(agents), rng.choice(models)
            fmt, test, status = rng.choice(("tool", "text")), rng.choice(tests), rng.choices(statuses, weights)[0]
            case_id = f"{agent}__{model}__oracle__{fmt}__{test}__{i}"
            d = dict(base, run_id=run_id, case_id=case_id, agent_version=version, model_hash=digest,
                     key=dict(base["key"], agent=agent, model=model, backend="oracle", format=fmt, test=test),
                     verdict=dict(base["verdict"], status=status, strict_pass_score=float(status == "PASS"),
                                  overall_score={"PASS": 1.0, "PASS_WITH_POLICY_VIOLATION": 0.8}.get(status, 0.0)))
            data = json.dumps(d, indent=2, ensure_ascii=False).encode()
            if r == 0 and i == 0:  # the clone is a valid result (checked in a child: this process stays small)
                subprocess.run([sys.executable, "-c", "import sys; from gripprobe_core.models import CaseResult; "
                                "CaseResult.model_validate_json(sys.stdin.buffer.read())"], input=data, check=True)
            folder = run_dir / "cases" / case_id
            (folder / "artifacts").mkdir(parents=True)
            (folder / "case.json").write_bytes(data)
            for rel, raw in other.items():
                (folder / rel).write_bytes(raw.replace(old_run.encode(), run_id.encode())
                                           .replace(old_case.encode(), case_id.encode()))
        folders.append(run_dir)
    return folders


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (from /proc: ppid of each)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out = [root]
    for pid in out:
        out.extend(children.get(pid, ()))
    return out


def _pss_kb(pid: int) -> int:
    """The proportional set size of ``pid`` (its own pages, and its share of those it shares with its parent or
    its siblings: a forked worker's pages are not counted twice), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeMemory(threading.Thread):
    """The largest sum of PSS over a process and its workers, sampled every 20 ms (a command that reads with
    worker processes is judged by what all of them hold together, not by its largest process)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.most_procs = pid, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            pids = _tree(self.pid)
            total = sum(_pss_kb(p) for p in pids)
            if total > self.peak_kb:
                self.peak_kb = total
            self.most_procs = max(self.most_procs, len(pids))
            self.done.wait(0.02)


def timed(cmd: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, peak RSS in MB (ru_maxrss of this one child: the largest of it and its reaped workers), the
    largest sum of PSS over it and its workers in MB (sampled) and stdout of ``cmd``; exits when it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=bench_env())
        sampler = TreeMemory(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here: its own rusage, not the children's maximum
        wall = time.perf_counter() - t0
        sampler.done.set()
        sampler.join()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0:
            sys.exit(f"{' '.join(cmd[:4])} ... failed ({code}): {err.read().decode(errors='replace')[-2000:]}")
        return wall, usage.ru_maxrss / 1024, sampler.peak_kb / 1024, out.read().decode(errors="replace")


def measure(label: str, what: str, reads: tuple[str, ...], runs: list[Path], cases: int,
            subject: list[str], fresh: Path, rounds: int, target: float | None, rss_target: float | None,
            check=None) -> list[Figure]:
    """Alternating rounds of the plain read and ``subject`` (``fresh`` emptied before each of its rounds)."""
    plain = [sys.executable, "-c", PLAIN_READ, os.pathsep.join(map(str, runs)), ",".join(reads)]

    def base(_r: int) -> tuple[float, float, float]:
        wall, mb, tree, out = timed(plain)
        assert int(out.strip()) == cases, (out, cases)
        return wall, mb, tree

    def subj(_r: int) -> tuple[float, float, float]:
        shutil.rmtree(fresh, ignore_errors=True)
        wall, mb, tree, out = timed(subject)
        if check is not None:
            check(fresh, out)
        return wall, mb, tree

    b, s = alternate(base, subj, rounds)
    bw, sw = Spread.of(x[0] for x in b), Spread.of(x[0] for x in s)
    bm, sm = Spread.of(x[1] for x in b), Spread.of(x[1] for x in s)
    bt, st = Spread.of(x[2] for x in b), Spread.of(x[2] for x in s)
    print(f"{label} ({cases} cases, {rounds} round(s), load {load1():.2f}): {what} {sw.show('s', 2)}; plain read "
          f"{bw.show('s', 2)}; peak RSS {sm.show('MB', 0)} (plain {bm.show('MB', 0)}); PSS of it and its workers "
          f"{st.show('MB', 0)} (plain {bt.show('MB', 0)})", file=sys.stderr)
    # the ratio pair by pair, then its median (as harness_overhead.py): the machine's speed drifts between rounds,
    # and a ratio of two medians taken from different rounds mixes them
    pairs = [x[0] / y[0] for x, y in zip(s, b)]
    r = Spread.of(pairs).median
    print(f"{label}: per round {', '.join(f'{p:.3f}' for p in pairs)}", file=sys.stderr)
    return [Figure(f"{label}_ratio", r, "x", target=target, baseline=bw.median, ratio=r,
                   what=f"{what}, median {sw.median:.2f} s against a plain json.loads of the same files, "
                        f"median of the {rounds} rounds' ratios"),
            Figure(f"{label}_s", sw.median, "s", baseline=bw.median, ratio=r, what=f"{what}, median wall"),
            Figure(f"{label}_peak_rss", sm.max, "MB", target=rss_target, baseline=bm.max, ratio=sm.max / bm.max if bm.max else None,
                   what=f"{what}, largest peak RSS of the rounds (its largest process)"),
            Figure(f"{label}_tree_pss", st.max, "MB", target=rss_target, baseline=bt.max, ratio=st.max / bt.max if bt.max else None,
                   what=f"{what}, largest sum of PSS over the command and its worker processes (sampled every "
                        f"20 ms)")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=5, quick_rounds=1)
    ap.add_argument("--cases", type=int, default=None, help="aggregate's cases (default 10000, 2000 with --quick)")
    ap.add_argument("--per-run", type=int, default=None, help="cases of each compared/exported run (default 504, "
                                                              "100 with --quick; the export run holds twice as many)")
    ap.add_argument("--setup-into", type=Path, help=argparse.SUPPRESS)  # the setup, run in a child of its own
    args = ap.parse_args(argv)
    rounds = rounds_of(args)
    cases = args.cases or (2000 if args.quick else 10_000)
    per_run = args.per_run or (100 if args.quick else 504)
    cli = gripprobe_cli()
    n_runs = 20
    sizes = [cases // n_runs + (1 if i < cases % n_runs else 0) for i in range(n_runs)]
    agg_ids = [(f"20260101T{i:02d}0000Z", n) for i, n in enumerate(sizes)]
    pair_ids = [("20260102T000000Z", per_run), ("20260102T010000Z", per_run)]
    one_ids = [("20260103T000000Z", 2 * per_run)]
    if args.setup_into is not None:
        tmp = args.setup_into
        case = real_case(tmp)
        generate(case, tmp / "agg", agg_ids)
        generate(case, tmp / "cmp", pair_ids, seed=8)
        generate(case, tmp / "exp", one_ids, seed=9)
        mb = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file()) / 2**20
        print(f"setup: {mb:.0f} MB of case files", file=sys.stderr)
        return 0

    with tempfile.TemporaryDirectory(prefix="gp-aggscale-") as tmp_s:
        tmp = Path(tmp_s)
        t0 = time.perf_counter()
        # the setup runs in a child: a child's ru_maxrss starts at its parent's size, so this process stays small
        subprocess.run([sys.executable, __file__, "--setup-into", str(tmp), "--cases", str(cases), "--per-run",
                        str(per_run)], check=True)
        agg_runs = [tmp / "agg" / "runs" / r for r, _ in agg_ids]
        pair = [tmp / "cmp" / "runs" / r for r, _ in pair_ids]
        one = tmp / "exp" / "runs" / one_ids[0][0]
        print(f"setup: {cases} + {2 * per_run} + {2 * per_run} cases cloned from a real one in "
              f"{time.perf_counter() - t0:.1f} s (not timed)", file=sys.stderr)
        out = tmp / "out"

        def aggregate_ok(folder: Path, _stdout: str) -> None:
            data = json.loads((folder / "aggregate.json").read_text())
            seen = sum(sum(r["counts"].values()) for r in data["rows"])
            assert seen == cases and data["unreadable"] == 0, (seen, data["unreadable"])
            assert any(r["fidelity"]["A_vs_truth"]["cases"] for r in data["rows"]), "no fidelity was read"

        def files_ok(n: int):
            def check(folder: Path, _stdout: str) -> None:
                assert sum(1 for _ in folder.rglob("*.json")) >= n, f"expected {n} files in {folder}"
            return check

        def junit_ok(folder: Path, _stdout: str) -> None:
            assert (folder / "junit.xml").read_bytes().count(b"<testcase ") == 2 * per_run

        figures = measure("aggregate_10k" if cases == 10_000 else f"aggregate_{cases}", "aggregate-reports",
                          READS["aggregate"], agg_runs, cases,
                          [*cli, "aggregate-reports", "--runs-root", str(tmp / "agg"), "--output", str(out)],
                          out, rounds, RATIO_TARGET, RSS_TARGET_MB, aggregate_ok)
        figures += measure("compare_1k", "compare", READS["compare"], pair, 2 * per_run,
                           [*cli, "compare", str(pair[0]), str(pair[1]), "--output", str(out)], out, rounds, None,
                           None, files_ok(1))
        figures += measure("export_junit_1k", "export --format junit", READS["junit"], [one], 2 * per_run,
                           [*cli, "export", str(one), "--format", "junit", "--out", str(out / "junit.xml")], out,
                           rounds, None, None, junit_ok)
        figures += measure("export_atif_1k", "export --format atif", READS["atif"], [one], 2 * per_run,
                           [*cli, "export", str(one), "--format", "atif", "--out", str(out)], out, rounds, None,
                           None, files_ok(2 * per_run))
    report(figures)
    return 1 if any(f.target is not None and verdict(f.value, f.target) == "MISSED" for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
