"""How steady is samples/s against the timed window's length?  The figure behind the
default of ``min_window_s``.

One sweep through ``python -m bench`` per model: ``framework`` x ``min_window_s`` (with
``steps_per_epoch=-1``, auto) x ``repeats`` interleaved, into a temporary store; printed
per model, framework and window: the median timed window (s), the steps it took and the
coefficient of variation of the trials' samples/s over the repeats, the figure the
comparison report calls a side unstable by (10% or more).

    .venv/bin/python scripts/measure/bench_window_cv.py [--models lenet5,resnet18]
        [--frameworks torch,tf,mxnet] [--windows 0.05,0.2,0.5,1,2] [--repeats 4]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="lenet5,resnet18")
    parser.add_argument("--frameworks", default="torch,tf,mxnet")
    parser.add_argument("--windows", default="0.05,0.2,0.5,1,2", help="min_window_s values")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from mlflow.tracking import MlflowClient

    print("| model | framework | min_window_s | median window (s) | steps | CV of samples/s |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/cv.db"
        for model in args.models.split(","):
            started = time.time()
            command = [
                sys.executable, "-m", "bench", "-m", f"model={model}",
                f"framework={args.frameworks}", f"min_window_s={args.windows}",
                f"repeats={args.repeats}", f"batch_size={args.batch_size}", "epochs=2",
                "steps_per_epoch=-1", "telemetry.enabled=false", "device=cpu",
                f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/multirun",
            ]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
            if done.returncode != 0:
                sys.exit(f"the {model} sweep failed:\n{(done.stdout + done.stderr)[-3000:]}")
            client = MlflowClient(tracking_uri=uri)
            experiment = client.get_experiment_by_name("bench")
            assert experiment is not None
            runs = client.search_runs(
                [experiment.experiment_id],
                filter_string=f"params.`model.name` = '{model}'",
                max_results=5000,
            )
            rates: dict[tuple[str, float], list[float]] = defaultdict(list)
            windows: dict[tuple[str, float], list[float]] = defaultdict(list)
            steps: dict[tuple[str, float], list[float]] = defaultdict(list)
            for run in runs:
                if "mlflow.parentRunId" not in run.data.tags:
                    continue
                key = (run.data.params["framework.name"], float(run.data.params["min_window_s"]))
                rates[key].append(run.data.metrics["trial_samples_per_s"])
                steps[key].append(run.data.metrics["steps_per_epoch_used"])
                history = client.get_metric_history(run.info.run_id, "epoch_time_s")
                windows[key] += [m.value for m in history]
            for fw, window in sorted(rates):
                values = rates[fw, window]
                cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0
                print(
                    f"| {model} | {fw} | {window:g} | {statistics.median(windows[fw, window]):.3f} "
                    f"| {statistics.median(steps[fw, window]):.0f} | {100 * cv:.1f}% |",
                    flush=True,
                )
            print(f"<!-- {model}: {time.time() - started:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
