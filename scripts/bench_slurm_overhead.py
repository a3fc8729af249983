"""Scheduling overhead per trial through Slurm (submitit) against launcher=process.

Runs the same one-trial sweep both ways, alternately, several times, each as a whole
`python -m bench -m ...` command against a fresh sqlite store, and prints the wall times
and their difference.  Needs the cluster of scripts/slurm_cluster.sh (or any Slurm).

    .venv/bin/python scripts/bench_slurm_overhead.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRIAL = [
    "framework=torch",
    "model=lenet5",
    "batch_size=4",
    "epochs=1",
    "steps_per_epoch=2",
    "warmup_steps=1",
    "force=true",
]


def sweep(root: Path, slurm: bool) -> float:
    args = [
        sys.executable,
        "-m",
        "bench",
        "-m",
        *TRIAL,
        f"tracking.uri=sqlite:///{root}/m.db",
        f"hydra.sweep.dir={root}/multirun",
    ]
    if slurm:
        args.append("hydra/launcher=submitit_slurm")
    start = time.perf_counter()
    subprocess.run(
        args, cwd=root, check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    local, slurm = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            root = Path(tmp, str(i))
            root.mkdir()
            local.append(sweep(root, slurm=False))
            slurm.append(sweep(root, slurm=True))
    lm, sm = statistics.median(local), statistics.median(slurm)
    print("one-trial sweep (torch lenet5, 2 steps), wall time of the whole command, s")
    print(f"  launcher=process            median {lm:6.2f}  {[round(v, 2) for v in local]}")
    print(f"  hydra/launcher=submitit_slurm median {sm:6.2f}  {[round(v, 2) for v in slurm]}")
    print(f"  Slurm overhead per trial:   {sm - lm:6.2f} s")


if __name__ == "__main__":
    main()
