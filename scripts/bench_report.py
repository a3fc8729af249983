"""How long the comparison report takes for an experiment of many runs (target: < 30 s).

Logs synthetic but realistically shaped runs (the params, tags, whole-trial metrics and
per-epoch histories a real trial logs, telemetry and test accuracy on half of them) to a
fresh sqlite store, as one sweep, then times ``python -m bench.report`` on them end to end
(interpreter start included) and, in this process, its phases.

    .venv/bin/python scripts/bench_report.py [--runs 500] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import tracking
from bench.report import HISTORY_KEYS, build, write

FRAMEWORKS = {"torch": 1.0, "tf": 1.1}
MODELS = {"resnet50": (23_520_842, 1.0), "vgg16": (14_728_266, 1.6), "lenet5": (61_706, 0.05)}
MODELS.update({"mobilenet_v2": (2_236_682, 0.4), "alexnet": (57_044_810, 0.8)})
BATCHES = (8, 16, 32, 64, 128)
MODES = ("train", "infer")
EPOCHS = 3


def _config_params(framework: str, model: str, mode: str, batch: int, repeat: int) -> dict:
    return {
        "framework.name": framework,
        "model.name": model,
        "mode": mode,
        "batch_size": batch,
        "image_size": 32,
        "num_classes": 10,
        "device": "auto",
        "epochs": EPOCHS,
        "steps_per_epoch": 20,
        "warmup_steps": 2,
        "seed": 0,
        "threads": 0,
        "precision": "fp32",
        "compile": False,
        "timeout_s": 600.0,
        "force": False,
        "repeat": repeat,
        "repeats": 5,
        "report": False,
        "breakdown": False,
        "profile": False,
        "data.name": "cifar10" if mode == "train" else "synthetic",
        "data.num_batches": 4,
        "data.root": "data",
        "data.workers": 2,
        "data.cache": False,
        "data.evaluate": True,
        "optimizer.name": "sgd",
        "optimizer.lr": 0.01,
        "optimizer.momentum": 0.9,
        "optimizer.weight_decay": 0.0,
        "launcher.name": "process",
        "launcher.kill_grace_s": 5.0,
        "launcher.memory_limit_mb": 0,
        "telemetry.enabled": True,
        "telemetry.interval_s": 0.1,
        "tracking.uri": "sqlite:///mlruns/mlflow.db",
        "tracking.experiment": "bench_report",
        "num_parameters": MODELS[model][0],
    }


def _log_run(client: Any, experiment_id: str, parent: str, index: int, spec: tuple) -> None:
    from mlflow.entities import Metric, Param, RunTag

    framework, model, mode, batch, repeat = spec
    rng = random.Random(index)
    device = "cuda:0" if mode == "train" else "cpu"
    tags = {
        "mlflow.parentRunId": parent,
        "bench.framework": framework,
        "bench.model": model,
        "bench.mode": mode,
        "bench.status": "ok",
        "bench.device": device,
        "bench.repeat": str(repeat),
        "bench.sweep_index": str(index + 1),
        "bench.config_hash": "-".join(str(x) for x in spec[:4]),
        "bench.launcher": "process",
        "bench.python_version": "3.11.7",
        "bench.os": "Linux-6.1-x86_64",
        "bench.cpu_model": "Synthetic CPU @ 2.0GHz",
        "bench.gpu_names": "Synthetic GPU",
        "bench.gpu_driver": "550.0",
        "bench.git_commit": "0" * 40,
        "bench.git_dirty": "false",
        f"bench.{'torch' if framework == 'torch' else 'tensorflow'}_version": "2.x",
    }
    rate = 2000 * batch**0.5 / MODELS[model][1] / FRAMEWORKS[framework] * rng.gauss(1, 0.03)
    seconds = EPOCHS * 20 * batch / rate
    now = int(time.time() * 1000)
    metrics = {
        "trial_samples_per_s": rate,
        "trial_time_s": seconds,
        "trial_step_time_p50_ms": 1000 * batch / rate,
        "trial_step_time_p90_ms": 1100 * batch / rate,
        "trial_step_time_p99_ms": 1200 * batch / rate,
        "peak_host_rss_mb": 2000 + rng.random() * 100,
        "import_time_s": 2.0,
        "data_time_s": 0.5,
        "build_time_s": 1.0,
        "compile_time_s": 0.8,
        "warmup_time_s": 0.1,
        "epochs_completed": float(EPOCHS),
    }
    if mode == "train":
        metrics["trial_energy_j"] = seconds * rng.gauss(180, 5)
        metrics["final_loss"] = 1.0
    batch_metrics = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    for epoch in range(1, EPOCHS + 1):
        per_epoch = {
            "epoch_time_s": seconds / EPOCHS,
            "samples_per_s": rate,
            "step_time_p50_ms": 1000 * batch / rate,
            "step_time_p90_ms": 1100 * batch / rate,
            "step_time_p99_ms": 1200 * batch / rate,
        }
        if mode == "train":
            per_epoch.update(
                loss=2.0 / epoch,
                test_accuracy=0.4 + 0.1 * epoch + rng.random() * 0.02,
                test_loss=1.5 / epoch,
                gpu_util_pct=rng.gauss(50, 3),
                gpu_mem_mb=4000.0,
                power_w=rng.gauss(180, 5),
                energy_per_sample_j=180 / rate,
            )
        batch_metrics += [Metric(k, float(v), now, epoch) for k, v in per_epoch.items()]
    run = client.create_run(experiment_id, run_name=f"{framework} {model} {batch} r{repeat}")
    run_id = run.info.run_id
    client.log_batch(
        run_id,
        metrics=batch_metrics,
        params=[Param(k, str(v)) for k, v in _config_params(*spec).items()],
        tags=[RunTag(k, v) for k, v in tags.items()],
    )
    client.set_terminated(run_id, "FINISHED")


def generate(uri: str, runs: int) -> str:
    """Log ``runs`` synthetic trial runs as one sweep; return the sweep's run id."""
    store = tracking.MlflowStore(uri, "bench_report")
    sweep_id = store.start_sweep("synthetic", {})
    configs = [
        (f, m, mode, b) for f in FRAMEWORKS for m in MODELS for mode in MODES for b in BATCHES
    ]
    specs = [(*configs[i % len(configs)], i // len(configs)) for i in range(runs)]
    for index, spec in enumerate(specs):
        _log_run(store.client, store.experiment_id, sweep_id, index, spec)
    store.end_sweep(sweep_id, ok=True, killed=False, summary="synthetic")
    return sweep_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--keep", type=Path, help="keep the store and reports in this directory")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root.resolve()}/mlflow.db"

    t0 = time.perf_counter()
    sweep_id = generate(uri, args.runs)
    print(f"logged {args.runs} synthetic runs in {time.perf_counter() - t0:.1f} s ({uri})")

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.report",
            "--uri",
            uri,
            "--sweep",
            sweep_id,
            "--out",
            str(root / "report"),
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if cli.returncode != 0:
        print(cli.stdout + cli.stderr, file=sys.stderr)
        return 1
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    print(
        f"python -m bench.report, {args.runs} runs (load, build, write, log): {wall:.1f} s "
        f"wall, {cpu:.1f} s CPU"
    )

    t0 = time.perf_counter()
    loaded = tracking.load_runs(uri, sweep=sweep_id, history_keys=HISTORY_KEYS)
    t1 = time.perf_counter()
    report = build(loaded)
    t2 = time.perf_counter()
    write(report, root / "report-in-process")
    t3 = time.perf_counter()
    print(
        f"  in-process phases: load {t1 - t0:.1f} s, build {t2 - t1:.1f} s "
        f"(figures included), write {t3 - t2:.1f} s"
    )
    target = "met" if wall < 30 else "MISSED"
    print(f"target < 30 s: {target}")
    return 0 if wall < 30 else 1


if __name__ == "__main__":
    sys.exit(main())
