"""Per-trial fixed overhead of the process launcher, on CPU.

Runs a tiny trial several times the way a sweep does (process launcher, real MLflow store in
a temporary directory) and splits the wall time outside the timed epochs into its parts:

    launch -> worker running bench code   (interpreter start, bench imports)
    framework import                       (import torch / tensorflow: excluded from the target)
    data, build, first step, warm-up       (the trial's own untimed work)
    last timed step -> run logged          (result write, process exit, MLflow logging)

Target: overhead beyond the framework import <= 5 s.

    .venv/bin/python scripts/measure/bench_overhead.py [--repeats 3] [--frameworks torch,tf]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench import launchers, tracking
from bench.core.config import BenchConfig


def measure(framework: str, root: Path, store: tracking.Store, sweep_id: str) -> dict[str, float]:
    cfg = BenchConfig(batch_size=2, epochs=1, steps_per_epoch=2, warmup_steps=1, force=True)
    cfg.framework.name, cfg.model.name = framework, "resnet50"
    workdir = Path(tempfile.mkdtemp(dir=root))
    run = store.start_trial(sweep_id, cfg, f"overhead {framework}", {})
    result = launchers.get("process").launch(cfg, workdir, run.log_epoch)
    run.finish(result, [workdir / "worker.log"])
    logged = time.time()
    assert result.status == "ok", result.error
    m, p = result.marks, result.phases
    start_to_first = m["first_timed_step"] - m["launched"]
    last_to_logged = logged - m["last_timed_step"]
    return {
        "launch_to_bench_code_s": m["trial_start"] - m["launched"],
        "framework_import_s": p["import_time_s"],
        "data_build_s": p["data_time_s"] + p["build_time_s"],
        "compile_warmup_s": p.get("compile_time_s", 0.0) + p.get("warmup_time_s", 0.0),
        "last_step_to_logged_s": last_to_logged,
        "total_fixed_s": start_to_first + last_to_logged,
        "beyond_import_s": start_to_first + last_to_logged - p["import_time_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frameworks", default="torch,tf")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = tracking.open_store(f"sqlite:///{root}/mlflow.db", "overhead")
        sweep_id = store.start_sweep("overhead", {})
        print("resnet50, batch 2, 1 warm-up step, 2 timed steps; median of", args.repeats)
        for framework in args.frameworks.split(","):
            rows = [measure(framework, root, store, sweep_id) for _ in range(args.repeats)]
            print(f"\n{framework}:")
            for key in rows[0]:
                values = [r[key] for r in rows]
                shown = " ".join(f"{v:.2f}" for v in values)
                print(f"  {key:24} {statistics.median(values):7.2f}   [{shown}]")
        store.end_sweep(sweep_id, ok=True, killed=False, summary="")


if __name__ == "__main__":
    main()
