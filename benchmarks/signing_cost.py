"""Signing cost: what signing a case and verifying a run take, next to what running a case takes.

Makes a real run first (untimed): the reference agent × oracle-perfect, oracle-lazy × the sanity tests, two
trials (24 cases), with a key of its own. Then, in this process, on a copy of that run:

- sign: every case signed again as the harness signs it when it writes the case (the evidence statement with
  the walk of its folders, the case statement over the derived files, two Ed25519 signatures; the sha256 of
  the evidence files is the digest step the run already had, timed apart), and the run's seal re-signed;
- verify: ``verify_run`` over the whole run (every file of every case hashed, every signature checked), and
  the real ``gripprobe verify`` command (Python start included).

    .venv/bin/python benchmarks/signing_cost.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args, _ = ap.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="gp-signing-") as tmp:
        base = Path(tmp)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")},
               "XDG_CONFIG_HOME": str(base / "config")}
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "run", "-a", "reference", "-m",
                              "oracle-perfect", "-m", "oracle-lazy", "-t", "tag:sanity", "--trials", "2", "--jobs", "2",
                              "--results", str(base / "results")], cwd=ROOT, env=env, capture_output=True, text=True)
        run_s = time.perf_counter() - t0
        if out.returncode != 0:
            print(out.stderr[-2000:])
            return 1
        run = Path(out.stdout.strip().splitlines()[-1])
        os.environ["XDG_CONFIG_HOME"] = env["XDG_CONFIG_HOME"]
        os.environ.pop("GRIPPROBE_SIGNING_KEY", None)
        from gripprobe_core.integrity.check import verify_run
        from gripprobe_core.integrity.keys import load_signer
        from gripprobe_core.integrity.seal import reseal_run, seal_case
        from gripprobe_core.integrity.digests import evidence_digests
        from gripprobe_core.store import read_case
        from gripprobe_core.store.layout import json_bytes

        signer = load_signer(create=False)
        assert signer is not None
        cases = sorted(p for p in (run / "cases").iterdir())
        n = len(cases)
        sign, digest, verify, reseal = [], [], [], []
        for _ in range(args.repeat):
            copy = base / "copy" / run.name
            shutil.rmtree(copy.parent, ignore_errors=True)
            shutil.copytree(run, copy)
            for case in sorted(copy.glob("cases/*")):
                res = read_case(case / "case.json")
                assert res is not None
                data = json_bytes(res.model_dump(mode="json"))
                t = time.perf_counter()
                evidence_digests(case)
                digest.append(time.perf_counter() - t)
                t = time.perf_counter()
                seal_case(case, res, data, signer, new=True)
                sign.append(time.perf_counter() - t)
            t = time.perf_counter()
            reseal_run(copy, signer, wrote=[copy / "manifest.json"], cases=[c.name for c in cases])
            reseal.append(time.perf_counter() - t)
            t = time.perf_counter()
            rc = verify_run(run)
            verify.append(time.perf_counter() - t)
            assert rc.status == "verified", rc.as_json()
        t = time.perf_counter()
        cli = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "verify", str(run)], cwd=ROOT, env=env,
                             capture_output=True, text=True)
        cli_s = time.perf_counter() - t
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        ms = lambda xs: f"median {statistics.median(xs) * 1000:.2f} ms, mean {statistics.mean(xs) * 1000:.2f} ms"  # noqa: E731
        print(f"run: {n} cases, {size / 1024:.0f} KiB stored, {run_s:.1f} s wall for the whole run "
              f"({run_s / n * 1000:.0f} ms per case)")
        print(f"sign one case (evidence + case statement): {ms(sign)} ({args.repeat} x {n} cases)")
        print(f"  for comparison, the evidence digests the run already computed: {ms(digest)}")
        print(f"re-sign the run's seal (end of a run, a rebuild): {ms(reseal)} for {n} cases")
        per_case = [v / n for v in verify]
        print(f"verify the whole run in-process: {ms(verify)} -> per case {ms(per_case)}")
        print(f"`gripprobe verify RUN` (exit {cli.returncode}), Python start included: {cli_s * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
