"""Scaling from 1 to 2 workers on this machine, per strategy and framework, side by side.

Runs the sweeps through ``python -m bench`` into one MLflow store, then prints a table:
global and per-worker samples/s, scaling efficiency (global / (workers x the same strategy's
one-worker rate); in brackets against the undistributed trial; for model_parallel, its
rate over the undistributed one) and exposed communication
per step (``time_comm_ms`` from ``breakdown=true``; push+pull for ps_async).

    .venv/bin/python scripts/measure/bench_scaling.py [--model lenet5] [--steps 20] [--batch 32]
        [--frameworks torch,tf,jax]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STRATEGIES = {
    "torch": ["ddp", "horovod"],
    "tf": ["mirrored", "multiworker", "ps_async", "horovod", "model_parallel"],
    "jax": ["jax_dp", "jax_distributed"],
}


def sweep(root: Path, common: list[str], *overrides: str) -> None:
    cmd = [sys.executable, "-m", "bench", "-m", *overrides, *common]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        print(done.stderr[-3000:], file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--frameworks", default="torch,tf")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    uri = f"sqlite:///{root}/mlflow.db"
    common = [
        f"model={args.model}", f"batch_size={args.batch}", f"steps_per_epoch={args.steps}",
        "epochs=2", "warmup_steps=3", "breakdown=true", "device=cpu", f"tracking.uri={uri}",
        f"hydra.sweep.dir={root}/multirun",
    ]  # fmt: skip
    horovod = importlib.util.find_spec("horovod") is not None
    for framework in args.frameworks.split(","):
        sweep(root, common, f"framework={framework}", "distributed=none")
        for strategy in STRATEGIES[framework]:
            if strategy == "horovod" and not horovod:
                continue
            ps = ["ps=1"] if strategy == "ps_async" else []
            # model_parallel is 2 stages by definition; its baseline is the undistributed run
            workers = "workers=2" if strategy == "model_parallel" else "workers=1,2"
            sweep(
                root,
                common,
                f"framework={framework}",
                f"distributed={strategy}",
                workers,
                *ps,
            )

    sys.path.insert(0, str(REPO))
    from bench.tracking import load_runs

    runs = [r for r in load_runs(uri, experiment="bench").records if r.status == "ok"]
    rate: dict[tuple[str, str, int], float] = {}
    for r in runs:
        key = (r.tags["bench.framework"], r.params["distributed"], int(r.params["workers"]))
        rate[key] = r.metrics["trial_samples_per_s"]
    header = (
        "framework", "strategy", "workers", "global samples/s", "per-worker samples/s",
        "efficiency % (vs none)", "comm ms/step",
    )  # fmt: skip
    rows = []
    for r in sorted(
        runs,
        key=lambda r: (r.tags["bench.framework"], r.params["distributed"], r.params["workers"]),
    ):
        fw, strategy, workers = (
            r.tags["bench.framework"],
            r.params["distributed"],
            int(r.params["workers"]),
        )
        per_worker = [
            v
            for k, v in r.metrics.items()
            if k.startswith("worker") and k.endswith("_trial_samples_per_s")
        ]
        if not per_worker:
            per_worker = [
                v
                for k, v in r.metrics.items()
                if k.startswith("worker") and k.endswith("_samples_per_s")
            ]
        mine = rate[(fw, strategy, workers)]
        base, plain = rate.get((fw, strategy, 1)), rate.get((fw, "none", 1))
        # model_parallel's stages both see every sample: its rate over one device's
        divisor = 1 if strategy == "model_parallel" else workers
        eff = f"{100 * mine / (divisor * base):.0f}" if base else "-"
        eff += f" ({100 * mine / (divisor * plain):.0f})" if plain else ""
        comm = r.metrics.get("time_comm_ms")
        rows.append((
            fw, strategy, str(workers), f"{mine:,.0f}",
            f"{statistics.fmean(per_worker):,.0f}" if per_worker else f"{mine:,.0f}",
            eff, f"{comm:.2f}" if comm is not None else "-",
        ))  # fmt: skip
    widths = [max(len(x[i]) for x in (header, *rows)) for i in range(len(header))]
    for line in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)))
    print(f"\n(model={args.model}, batch_size={args.batch} per worker; store: {uri})")


if __name__ == "__main__":
    main()
