"""Input-pipeline cost: the share of each epoch spent waiting for data, CIFAR-10, per framework.

Writes a CIFAR-10 archive in the real python-version format (random pixels: the pipeline's
work does not depend on what the pictures show) into a temporary folder, then runs one
sweep through ``python -m bench``: ``framework=torch,tf`` x ``data.cache=true,false``,
``resnet18`` on the CPU, each epoch one full pass over the training set.  Printed per trial
and epoch: ``data_wait_pct`` (time waiting for the next batch over the epoch's timed window)
and samples/s.  Epoch 1 fills the cache; later epochs read from it.

    .venv/bin/python scripts/measure/bench_data_wait.py [--images-per-file 64] [--epochs 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--images-per-file", type=int, default=64, help="5 training files")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="0: bench's default")
    args = parser.parse_args()

    from mlflow.tracking import MlflowClient

    from tests.cifar_fixture import write_cifar_archive

    train = 5 * args.images_per_file
    steps = train // args.batch_size
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_cifar_archive(root / "data", "cifar10", per_member=args.images_per_file)
        uri = f"sqlite:///{root}/mlflow.db"
        overrides = [
            "-m",
            "framework=torch,tf",
            "data.cache=true,false",
            f"model={args.model}",
            "data=cifar10",
            f"data.root={root}/data",
            "data.evaluate=false",
            "device=cpu",
            f"batch_size={args.batch_size}",
            f"epochs={args.epochs}",
            f"steps_per_epoch={steps}",
            "warmup_steps=1",
            f"tracking.uri={uri}",
            f"hydra.sweep.dir={root}/multirun",
        ]
        if args.threads:
            overrides.append(f"threads={args.threads}")
        print(f"{train} training images, {steps} steps of {args.batch_size} per epoch")
        subprocess.run(
            [sys.executable, "-m", "bench", *overrides], cwd=root, check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("bench")
        assert exp is not None
        rows = []
        for run in client.search_runs([exp.experiment_id]):
            if "mlflow.parentRunId" not in run.data.tags:
                continue
            wait = client.get_metric_history(run.info.run_id, "data_wait_pct")
            rate = client.get_metric_history(run.info.run_id, "samples_per_s")
            rows.append(
                (
                    run.data.tags["bench.framework"],
                    run.data.params["data.cache"],
                    sorted((m.step, m.value) for m in wait),
                    sorted((m.step, m.value) for m in rate),
                    run.data.tags.get("bench.status", ""),
                )
            )
    print(f"{'framework':<10} {'cache':<6} {'epoch':>5} {'data wait %':>12} {'samples/s':>10}")
    for framework, cache, wait, rate, status in sorted(rows):
        if status != "ok":
            print(f"{framework:<10} {cache:<6} {status}")
        for (epoch, pct), (_, sps) in zip(wait, rate, strict=True):
            print(f"{framework:<10} {cache:<6} {epoch:>5} {pct:>12.1f} {sps:>10.1f}")


if __name__ == "__main__":
    main()
