"""MXNet against PyTorch and TensorFlow on this machine: training samples/s of LeNet-5 and
ResNet-18 on CIFAR-shaped data (32x32x3, 10 classes, synthetic), one worker, and two
workers with MXNet's synchronous and asynchronous parameter server (one server).

Runs two sweeps through ``python -m bench`` into one MLflow experiment (a temporary store
unless ``--uri`` is given) and prints one table from it:

    .venv/bin/python scripts/measure/bench_mxnet.py [--batch-size 32] [--steps 10] [--epochs 3]

Two-worker rows: every worker trains on ``--batch-size`` samples per step; samples/s is
global (the sum of the workers' rates), and each worker gets half the cores.  PyTorch DDP
and TensorFlow's multi-worker strategy are on the distributed-training branch, not here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sweep(uri: str, outdir: Path, overrides: list[str]) -> None:
    cmd = [sys.executable, "-m", "bench", "-m", *overrides, f"tracking.uri={uri}"]
    cmd += ["tracking.experiment=bench_mxnet", f"hydra.sweep.dir={outdir}", "force=true"]
    print("$", " ".join(cmd[1:]), flush=True)
    proc = subprocess.run(cmd, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.returncode)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--models", default="lenet5,resnet18")
    parser.add_argument("--uri", default="", help="MLflow store (default: a temporary one)")
    parser.add_argument(
        "--table-only", action="store_true", help="print the table from --uri; run nothing"
    )
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-mxnet-")
    uri = args.uri or f"sqlite:///{tmp}/mlflow.db"
    common = [
        f"model={args.models}",
        f"batch_size={args.batch_size}",
        f"epochs={args.epochs}",
        f"steps_per_epoch={args.steps}",
        "warmup_steps=3",
        "image_size=32",
        "num_classes=10",
        "device=cpu",
    ]
    if not args.table_only:
        sweep(uri, Path(tmp) / "one", ["framework=mxnet,torch,tf", *common])
        two = ["framework=mxnet", "distributed=kvstore_sync,kvstore_async", "workers=2", "ps=1"]
        sweep(uri, Path(tmp) / "two", [*two, *common])

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("bench_mxnet")
    assert exp is not None
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for run in client.search_runs([exp.experiment_id], max_results=1000):
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        if "bench.framework" not in tags:
            continue  # a sweep's parent run
        strategy = params.get("distributed", "none")
        column = {"none": "1 worker", "kvstore_sync": "2 workers, kvstore_sync",
                  "kvstore_async": "2 workers, kvstore_async"}[strategy]  # fmt: skip
        value = metrics.get("trial_samples_per_s")
        cell = f"{value:,.0f}" if tags.get("bench.status") == "ok" and value else "failed"
        if strategy != "none":
            per = [metrics.get(f"worker{i}_trial_samples_per_s", 0.0) for i in range(2)]
            cell += f" ({' + '.join(f'{p:,.0f}' for p in per)})"
        rows.setdefault((tags["bench.model"], tags["bench.framework"]), {})[column] = cell
    columns = ["1 worker", "2 workers, kvstore_sync", "2 workers, kvstore_async"]
    print(f"\nTraining samples/s, batch {args.batch_size} per worker, 32x32x3, 10 classes, "
          f"{args.epochs} epochs x {args.steps} steps, CPU ({os.cpu_count()} cores)\n")  # fmt: skip
    print("| model | framework | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for model in args.models.split(","):
        for framework in ("mxnet", "torch", "tf"):
            cells = rows.get((model, framework), {})
            values = [cells.get(c, "n/a") for c in columns]
            print(f"| {model} | {framework} | " + " | ".join(values) + " |")
    print(f"\nStore: {uri} (experiment bench_mxnet)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
