"""Scheduling overhead per trial through Slurm (submitit) against launcher=process.

Runs the same one-trial sweep both ways, alternately, several times, each as a whole
`python -m bench -m ...` command against a fresh sqlite store, and prints the wall times
and their difference.  Needs the cluster of scripts/slurm_cluster.sh (or any Slurm).

    .venv/bin/python scripts/measure/bench_slurm_overhead.py [--repeats 3]

``--nodes`` instead compares, through Slurm, a 2-worker ddp trial on one node against the
same 2 workers spread over two nodes (partition ``multi`` of the test cluster, whose two
nodes share this host): the cost of the cross-node start-up (the srun step, the node
agents meeting) and the throughput each logs.  Each worker gets one thread (``threads=1``):
the test cluster's two nodes each claim the host's cores, so without it the two-node trial
would run twice the threads on the same cores.
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

REPO = Path(__file__).resolve().parents[2]
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


def spread(root: Path, nodes: int) -> tuple[float, float]:
    """Wall time of a one-trial 2-worker ddp sweep on ``nodes`` nodes, and its samples/s."""
    import sqlite3

    workers = 2 // nodes
    args = [
        sys.executable, "-m", "bench", "-m", "hydra/launcher=submitit_slurm", "+slurm=local",
        "hydra.launcher.partition=multi", "distributed=ddp", f"workers={workers}",
        f"nodes={nodes}", "framework=torch", "model=lenet5", "batch_size=32", "epochs=2",
        "steps_per_epoch=20", "warmup_steps=2", "threads=1", "force=true",
        f"tracking.uri=sqlite:///{root}/m.db", f"hydra.sweep.dir={root}/multirun-{nodes}",
    ]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(
        args, cwd=root, check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )
    wall = time.perf_counter() - start
    with sqlite3.connect(f"file:{root}/m.db?mode=ro", uri=True) as db:
        (rate,) = db.execute(
            "SELECT value FROM latest_metrics WHERE key='global_samples_per_s' AND run_uuid IN "
            "(SELECT run_uuid FROM params WHERE key='nodes' AND value=?) "
            "ORDER BY timestamp DESC LIMIT 1",
            (str(nodes),),
        ).fetchone()
    return wall, float(rate)


def main_nodes(repeats: int) -> None:
    got: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            root = Path(tmp, str(i))
            root.mkdir()
            for nodes in (1, 2):
                got[nodes].append(spread(root, nodes))
    print("ddp, 2 workers in all (torch lenet5, batch 32/worker, 1 thread each), through Slurm")
    for nodes, runs in got.items():
        walls, rates = [w for w, _ in runs], [r for _, r in runs]
        print(
            f"  {2 // nodes} worker(s) x {nodes} node(s): wall median "
            f"{statistics.median(walls):6.2f} s {[round(w, 2) for w in walls]}, "
            f"global samples/s median {statistics.median(rates):8.1f} "
            f"{[round(r) for r in rates]}"
        )
    extra = statistics.median(w for w, _ in got[2]) - statistics.median(w for w, _ in got[1])
    print(f"  two nodes cost {extra:+.2f} s of wall time per trial against one")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nodes", action="store_true", help="one node against two (see above)")
    args = parser.parse_args()
    if args.nodes:
        main_nodes(args.repeats)
        return
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
