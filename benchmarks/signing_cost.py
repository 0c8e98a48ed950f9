"""Signing cost: what signing a case and verifying a run add, against writing the case unsigned.

Makes a real run first (untimed): the reference agent × oracle-perfect, oracle-lazy × the sanity tests, two
trials (24 cases; ``--quick``: oracle-perfect, one trial, 6 cases), with a key of its own. Then, in alternating
rounds, whole processes timed from outside (this script's helper role, each on its own copy of that run;
each reads the run's cases once, then repeats its work ``--passes`` times over every case: 20, so that the
work outweighs the process's start):

* **none**: only that (the process's start, its imports, reading the cases): subtracted from the others;
* **unsigned**: every case written as the harness writes it (``write_case``: the summary files, the sha256 of
  every evidence file, case.json) with no key: the baseline;
* **signed**: the same with the run's key (the evidence statement with the walk of the case's folders, the
  case statement over the derived files, two Ed25519 signatures), then the run's seal re-signed, as at the
  end of a run;
* **verify**: ``verify_run`` over the whole run (every file of every case hashed, every signature checked);
* ``gripprobe verify RUN`` (the real command, Python's start included) against ``gripprobe --version``.

Per case: signing = (signed − unsigned) / (passes × cases), verifying = (verify − none) / (passes × cases),
both against the unsigned write = (unsigned − none) / (passes × cases); per round, median over rounds. Writes
skip the flush (``durable=False``; ``--durable`` includes it): it is the same with or without a key, and a
``syncfs`` costs what the whole filesystem holds unwritten, others' writes included. After the rounds the
signed copy must verify with every case signed again, and the unsigned copy must hold the signatures the run
wrote (each arm did its own work). No targets.

    .venv/bin/python benchmarks/signing_cost.py [--quick] [--rounds 3] [--passes 20] [--durable]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (ROOT, Figure, Spread, add_contract_args, bench_env, gripprobe_cli, load1,  # noqa: E402
                    report, rounds_of)

ARMS = ("none", "unsigned", "signed", "verify")


def helper(mode: str, run: Path, passes: int, durable: bool) -> dict:
    """The helper role: read every case of ``run`` once, then ``passes`` times do ``mode``'s work."""
    from gripprobe_core.integrity.check import verify_run
    from gripprobe_core.integrity.keys import load_signer
    from gripprobe_core.integrity.seal import reseal_run
    from gripprobe_core.runner.case import write_case
    from gripprobe_core.store import read_case

    signer = load_signer(create=False)
    if signer is None:
        raise SystemExit("no harness key in XDG_CONFIG_HOME")
    cases = sorted(p for p in (run / "cases").iterdir())
    results = [read_case(case / "case.json") for case in cases]
    if any(r is None for r in results):
        raise SystemExit(f"a case of {run} cannot be read")
    t0 = time.perf_counter()
    for _ in range(passes if mode != "none" else 0):
        if mode == "verify":
            rc = verify_run(run)
            if rc.status != "verified":
                raise SystemExit(f"{run} does not verify: {rc.as_json()}")
            continue
        for case, res in zip(cases, results):
            write_case(case, res, durable=durable, signer=signer if mode == "signed" else None)
        if mode == "signed":
            reseal_run(run, signer, wrote=[run / "manifest.json"], cases=[c.name for c in cases])
    return {"mode": mode, "cases": len(cases), "loop_s": time.perf_counter() - t0}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stdout) of a command that must succeed."""
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} … failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return wall, res.stdout


def make_run(base: Path, env: dict[str, str], quick: bool, tests: str) -> tuple[Path, float]:
    models = ["-m", "oracle-perfect"] if quick else ["-m", "oracle-perfect", "-m", "oracle-lazy"]
    trials = "1" if quick else "2"
    wall, out = timed([*gripprobe_cli(), "run", "-a", "reference", *models, "-t", tests, "--trials", trials,
                       "--jobs", "2", "--results", str(base / "results")], env)
    return Path(out.strip().splitlines()[-1]), wall


def verifies(run: Path, env: dict[str, str]) -> bool:
    return subprocess.run([*gripprobe_cli(), "verify", str(run)], cwd=ROOT, env=env, capture_output=True,
                          stdin=subprocess.DEVNULL).returncode == 0


def resigned(run: Path, copy: Path) -> int:
    """How many cases of ``copy`` hold a case statement written after the copy was made (``copytree`` keeps
    the run's mtimes; signing writes a new file)."""
    return sum(1 for sig in copy.glob("cases/*/case.sig.json")
               if sig.stat().st_mtime_ns != (run / sig.relative_to(copy)).stat().st_mtime_ns)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_contract_args(ap, rounds=3, quick_rounds=1)
    ap.add_argument("--passes", type=int, default=20, help="times each helper repeats its work over every case")
    ap.add_argument("--durable", action="store_true", help="flush each case as a run does (syncfs)")
    ap.add_argument("--tests", default="tag:sanity", help="the run's tests (a -t selector; default tag:sanity)")
    ap.add_argument("--role", choices=["bench", "helper"], default="bench", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=ARMS, default="none", help=argparse.SUPPRESS)
    ap.add_argument("--run", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "helper":
        print(json.dumps(helper(args.mode, Path(args.run), args.passes, args.durable)))
        return 0

    rounds, passes = rounds_of(args), max(1, args.passes)
    with tempfile.TemporaryDirectory(prefix="gp-signing-") as tmp:
        base = Path(tmp)
        env = bench_env({"XDG_CONFIG_HOME": str(base / "config")})
        run, run_s = make_run(base, env, args.quick, args.tests)
        n = len(list(run.glob("cases/*/case.json")))
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        print(f"run: {n} cases, {size / 1024:.0f} KiB stored, {run_s:.1f} s for the whole run; {rounds} round(s), "
              f"{passes} passes per helper; load {load1():.2f}", flush=True)
        walls: dict[str, list[float]] = {arm: [] for arm in (*ARMS, "version", "verify_cmd")}
        loops: dict[str, list[float]] = {arm: [] for arm in ARMS}
        copies: dict[str, Path] = {}
        for r in range(rounds):
            for arm in ARMS:  # alternating: the same order every round, the baseline before what it is subtracted from
                copy = base / f"{arm}-{r}" / run.name
                shutil.copytree(run, copy, symlinks=True)
                copies[arm] = copy
                wall, out = timed([sys.executable, __file__, "--role", "helper", "--mode", arm, "--run", str(copy),
                                   "--passes", str(passes), *(["--durable"] if args.durable else [])], env)
                walls[arm].append(wall)
                loops[arm].append(json.loads(out.strip().splitlines()[-1])["loop_s"])
            walls["version"].append(timed([*gripprobe_cli(), "--version"], env)[0])
            walls["verify_cmd"].append(timed([*gripprobe_cli(), "verify", str(run)], env)[0])
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in walls.items())
                  + f"; load {load1():.2f}", flush=True)
        if not verifies(copies["signed"], env) or resigned(run, copies["signed"]) != n \
                or resigned(run, copies["unsigned"]) != 0:
            raise SystemExit("after the rounds the signed copy must verify with every case signed again, and the "
                             "unsigned copy must hold its cases' signatures as the run wrote them")

    k = passes * n
    per = {arm: [(w - none) * 1000 / k for w, none in zip(walls[arm], walls["none"])] for arm in ARMS[1:]}
    write = Spread.of(per["unsigned"])
    sign = Spread.of(s - u for s, u in zip(per["signed"], per["unsigned"]))
    verify = Spread.of(per["verify"])
    cmd, version = Spread.of(w * 1000 for w in walls["verify_cmd"]), Spread.of(w * 1000 for w in walls["version"])
    inside = {arm: Spread.of(v * 1000 / k for v in loops[arm]) for arm in ARMS[1:]}
    print(f"per case, from outside ({rounds} round(s) of {passes} passes × {n} cases): write unsigned "
          f"{write.show('ms', 2)}; signing adds {sign.show('ms', 2)}; verify {verify.show('ms', 2)}")
    print("  (timed inside the helpers, for comparison: "
          + ", ".join(f"{a} {s.show('ms', 2)}" for a, s in inside.items()) + ")")
    print(f"gripprobe verify of {n} cases {cmd.show('ms', 0)}; gripprobe --version {version.show('ms', 0)}")
    figs = [Figure("signing_sign_per_case", sign.median, "ms", None, write.median,
                   sign.median / write.median if write.median > 0 else None,
                   what="signing a case and re-sealing the run, per case, against writing it unsigned"),
            Figure("signing_verify_per_case", verify.median, "ms", None, write.median,
                   verify.median / write.median if write.median > 0 else None,
                   what="verify_run over the whole run, per case, against writing a case unsigned"),
            Figure("signing_verify_cmd", cmd.median, "ms", None, version.median,
                   cmd.median / version.median if version.median else None,
                   what=f"gripprobe verify of a {n}-case run against gripprobe --version")]
    report(figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
