"""Does ``bench report --baseline`` catch a real slowdown, and leave an idle machine alone?

Three sweeps of one configuration (torch LeNet-5, one thread, timed windows of at least
1 s, 4 repeats): two on the machine as it is, the third while a CPU load (two busy
processes per core, each in a session of its own, as a real load is) slows it down.  Then
the report against the first sweep, for the second (expected: no change, or a drift below
the gate) and for the third (expected: a significant regression, exit status 1).  Prints
each sweep's mean time per sample and the report's lines.  Run on an otherwise idle
machine:

    .venv/bin/python scripts/measure/bench_baseline_regression.py [--gate 20] [--keep DIR]

(A timed check, so it is a script and not a test: the test suite checks the comparison on
constructed runs, tests/unit/test_versions.py, and the command end to end on real runs,
tests/e2e/test_version_sweeps.py.)
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SWEEP = [
    "-m", "framework=torch", "model=lenet5", "epochs=1", "steps_per_epoch=-1",
    "min_window_s=1.0", "batch_size=16", "repeats=4", "threads=1", "force=true",
]  # fmt: skip


def _burn(stop: float) -> None:  # a busy core
    os.setsid()
    while time.time() < stop:
        pass


def _bench(root: Path, uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args, f"tracking.uri={uri}",
         "tracking.experiment=baseline", f"hydra.sweep.dir={root}/multirun"],
        capture_output=True, text=True, cwd=root, timeout=1800,
    )  # fmt: skip


def _sweeps(uri: str) -> list[tuple[str, float]]:
    """(sweep run id, mean ms per sample of its ok trials), oldest first."""
    sys.path.insert(0, str(REPO))
    from mlflow.tracking import MlflowClient

    from bench.tracking import load_runs

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("baseline")
    runs = client.search_runs([exp.experiment_id], "tags.`bench.sweep` = 'true'")
    out = []
    for parent in sorted(runs, key=lambda r: r.info.start_time):
        trials = load_runs(uri, "baseline", sweep=parent.info.run_id).records
        rates = [t.metrics["trial_samples_per_s"] for t in trials
                 if "trial_samples_per_s" in t.metrics]  # fmt: skip
        mean = 1000 / (sum(rates) / len(rates)) if rates else float("nan")
        out.append((parent.info.run_id, mean))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--gate", type=float, default=20.0, help="--fail-on-regression for the idle pair"
    )
    parser.add_argument("--keep", default="", help="keep the store in this directory")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-baseline-"))
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root}/mlflow.db"
    started = time.monotonic()
    for label in ("idle 1", "idle 2"):
        done = _bench(root, uri, *SWEEP)
        print(f"sweep {label}: exit {done.returncode}", flush=True)
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:])
            return 1
    load = [
        multiprocessing.get_context("spawn").Process(target=_burn, args=(time.time() + 900,))
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    for p in load:
        p.start()
    try:
        done = _bench(root, uri, *SWEEP)
    finally:
        for p in load:
            p.kill()
    print(f"sweep under load: exit {done.returncode}", flush=True)
    (first, ms1), (second, ms2), (third, ms3) = _sweeps(uri)[-3:]
    print(f"\n{'sweep':<18}{'ms per sample':>14}{'vs idle 1':>11}")
    for label, ms in (("idle 1", ms1), ("idle 2", ms2), ("under CPU load", ms3)):
        print(f"{label:<18}{ms:>14.3f}{ms / ms1:>10.2f}x")
    for label, sweep, gate in (("idle 2", second, args.gate), ("under CPU load", third, 5.0)):
        report = subprocess.run(
            [sys.executable, "-m", "bench.report", "--uri", uri, "--no-log", "--sweep", sweep,
             "--baseline", first, "--fail-on-regression", str(gate), "--out", str(root / label)],
            capture_output=True, text=True, cwd=root,
        )  # fmt: skip
        lines = [line for line in report.stdout.splitlines()
                 if "lenet5" in line or "regression" in line]  # fmt: skip
        print(f"\nreport of {label} against idle 1 (gate {gate:g}%): exit {report.returncode}")
        for line in lines[:6]:
            print(f"  {line.strip()}")
    print(f"\n{time.monotonic() - started:.0f} s in all; store: {uri}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
