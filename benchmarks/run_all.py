"""Run every benchmark in this folder (each prints its figures and baselines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    rc = 0
    for script in sorted(HERE.glob("*.py")):
        if script.name == "run_all.py":
            continue
        print(f"== {script.name}", flush=True)
        rc |= subprocess.call([sys.executable, str(script), *sys.argv[1:]])
    return rc


if __name__ == "__main__":
    sys.exit(main())
