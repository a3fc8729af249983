"""How long ``bench plan`` takes for a sweep of many jobs (issue 51: 10,000 jobs under 60 s).

Runs ``python -m bench plan "seed=range(0,N)"`` in a fresh interpreter in an empty
folder (a dry run: every job composed and checked, nothing started) and prints the
whole command's wall time, the time bench says it spent composing, and jobs per second.
``--burner`` runs a busy loop on one core beside it (the issue's "loaded machine");
``--code DIR`` times another checkout's ``bench`` (e.g. an earlier commit exported with
``git archive``) the same way, for a before/after figure.

    .venv/bin/python scripts/measure/bench_plan.py [--jobs 10000] [--burner] [--code DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _burn() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--burner", action="store_true", help="a busy loop on one core beside")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose bench runs")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(args.code.resolve()))
    burner = multiprocessing.Process(target=_burn, daemon=True) if args.burner else None
    if burner is not None:
        burner.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "bench", "plan", f"seed=range(0,{args.jobs})"],
                cwd=tmp, env=env, capture_output=True, text=True,
            )  # fmt: skip
            wall = time.perf_counter() - start
    finally:
        if burner is not None:
            burner.terminate()
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        return 1
    found = re.findall(r"composing the sweep's trials: \d+/\d+ in ([\d.]+) s", done.stderr)
    composing = f"{float(found[-1]):.1f} s" if found else "under 5 s (bench says no more)"
    load = os.getloadavg()[0]
    print(
        f"{args.jobs} jobs ({args.code}): {wall:.1f} s in all, composing {composing}; "
        f"{args.jobs / wall:.0f} jobs/s; load average {load:.1f} on {os.cpu_count()} CPUs"
        + (", a busy loop on one core beside" if burner else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
