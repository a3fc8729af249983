"""Cost of telemetry: samples/s with the samplers running against without, same trial.

For each framework, one process builds the trial's session once (as ``run_trial`` does),
warms it up, then runs timed epochs with bench's own loop (``bench.trial.loop._timed_epochs``)
alternately with telemetry on (``bench.trial.monitors.Telemetry`` started, its samplers running
in their background threads, per-epoch aggregation after each window: exactly what a trial
does) and off, switching which goes first on each repeat.  Adjacent epochs share the
machine's conditions.  Printed: the best (least disturbed: on a shared machine the slow
epochs are other processes' doing) and median samples/s of each, their on/off ratios, the
spread of the adjacent pairs' ratios (the noise), and the samplers' own CPU time, measured
with the trial idle, as a share of one core.  On a
machine without a GPU the GPU sampler is absent and the host sampler's cost is measured.
Target: telemetry on >= 0.99 of off.

    .venv/bin/python scripts/measure/bench_telemetry.py [--model resnet50] [--repeats 10]
        [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WORKER = """
import json, sys, time
from bench.trial import data, frameworks
from bench.core.config import BenchConfig, from_dict
from bench.trial.monitors import Telemetry
from bench.trial.loop import _timed_epochs, _warm_up

cfg = from_dict(BenchConfig, json.loads(sys.argv[1]))
repeats = int(sys.argv[2])
adapter = frameworks.load(cfg.framework.name)
adapter.configure(cfg, cfg.threads)
session = adapter.prepare(cfg, data.load(cfg))
_warm_up(session, cfg.warmup_steps)
out = {"on": [], "off": [], "gpu": ""}
for i in range(repeats):
    for on in (True, False) if i % 2 == 0 else (False, True):
        if not on:
            records, _ = _timed_epochs(session, cfg, None, None)
            out["off"].append(records[0].samples_per_s)
            continue
        telemetry = Telemetry(cfg)
        telemetry.before_device_use()
        telemetry.start(session.device)
        records, _ = _timed_epochs(session, cfg, None, telemetry.window)
        out["gpu"] = telemetry.stop(None).tags.get("gpu_telemetry", "")
        out["on"].append(records[0].samples_per_s)

# The samplers' own CPU time, with nothing else running: the process's CPU time over a
# few seconds with telemetry on, less the same without.
def cpu_per_s(on: bool, seconds: float = 4.0) -> float:
    telemetry = Telemetry(cfg) if on else None
    if telemetry is not None:
        telemetry.before_device_use()
        telemetry.start(session.device)
    time.sleep(0.5)
    cpu, wall = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    used = (time.process_time() - cpu) / (time.perf_counter() - wall)
    if telemetry is not None:
        telemetry.stop(None)
    return used

time.sleep(1.0)  # let the frameworks' worker threads go idle
idle = min(cpu_per_s(False) for _ in range(2))
out["sampler_cpu"] = min(cpu_per_s(True) for _ in range(2)) - idle
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed epoch")
    parser.add_argument("--repeats", type=int, default=10, help="epoch pairs (on, off)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.1, help="telemetry.interval_s")
    parser.add_argument("--frameworks", default="torch,tf")
    args = parser.parse_args()

    from bench.core.config import BenchConfig, to_dict

    print(
        f"model={args.model} batch={args.batch_size} threads={args.threads} "
        f"steps/epoch={args.steps} pairs={args.repeats} interval={args.interval} s, alternating"
    )
    print(
        "samples/s per epoch, best (least disturbed) and median; on/off of each; the spread\n"
        "of adjacent pairs' on/off ratios (the noise); the samplers' own CPU, idle trial"
    )
    print(
        f"{'framework':10} {'off best':>9} {'off med':>9} {'on best':>9} {'on med':>9} "
        f"{'best':>6} {'median':>7}   {'pairs min / median / max':>24} {'CPU % core':>11}"
    )
    for framework in args.frameworks.split(","):
        cfg = BenchConfig(
            batch_size=args.batch_size,
            epochs=1,
            steps_per_epoch=args.steps,
            warmup_steps=3,
            threads=args.threads,
        )
        cfg.framework.name, cfg.model.name = framework, args.model
        cfg.telemetry.interval_s = args.interval
        proc = subprocess.run(
            [sys.executable, "-c", WORKER, json.dumps(to_dict(cfg)), str(args.repeats)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            sys.exit(f"{framework}: the worker failed:\n{proc.stderr[-3000:]}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        on, off = got["on"], got["off"]
        pairs = sorted(a / b for a, b in zip(on, off, strict=True))
        best, median = max(on) / max(off), statistics.median(on) / statistics.median(off)
        print(
            f"{framework:10} {max(off):9.2f} {statistics.median(off):9.2f} {max(on):9.2f} "
            f"{statistics.median(on):9.2f} {best:6.3f} {median:7.3f}   "
            f"{pairs[0]:6.3f} / {statistics.median(pairs):.3f} / {pairs[-1]:.3f} "
            f"{100 * got['sampler_cpu']:11.2f}"
        )
        print(f"{'':10} GPU telemetry: {got['gpu']}")


if __name__ == "__main__":
    main()
