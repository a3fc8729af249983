"""How long the comparison report takes for an experiment of many runs, and how much memory.

Writes synthetic but realistically shaped runs (the params, tags, whole-trial metrics and
per-epoch histories a real trial logs, telemetry and test accuracy on half of them) as one
sweep to a sqlite store that MLflow made (its schema), straight into its tables (a bulk
writer: logging 100,000 runs through MLflow's client takes hours), then times the report
of that sweep in a fresh interpreter: reading the runs (load), building the report (build,
figures included), writing it (write), the whole (total, the interpreter's start and
imports included), and the peak resident memory of that process.  With ``--http`` the
same store is read again through a local ``mlflow server``.

    .venv/bin/python scripts/measure/bench_report.py [--runs 2000] [--keep DIR]
        [--http [--workers N]] [--reader bulk|client] [--code DIR]

``--keep DIR`` keeps the store (``DIR/runs-N.db``) and reuses it on the next call with the
same ``--runs``; ``--workers N`` runs the server with N worker processes (1 by default;
MLflow's own default is 4); ``--reader client`` reads through MLflow's client run by run (the path
before the bulk reader); ``--code DIR`` times another checkout's ``bench`` (e.g. an
earlier commit exported with ``git archive``) on the same store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = {"torch": 1.0, "tf": 1.1}
MODELS = {"resnet50": (23_520_842, 1.0), "vgg16": (14_728_266, 1.6), "lenet5": (61_706, 0.05)}
MODELS.update({"mobilenet_v2": (2_236_682, 0.4), "alexnet": (57_044_810, 0.8)})
BATCHES = (8, 16, 32, 64, 128)
MODES = ("train", "infer")
EPOCHS = 3
EXPERIMENT = "bench_report"


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
        "tracking.experiment": EXPERIMENT,
        "num_parameters": MODELS[model][0],
    }


def _run(parent: str, index: int, spec: tuple) -> tuple[dict, dict, dict, list]:
    """One synthetic trial run: (params, tags, whole-trial metrics, [(key, value, step)])."""
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
    history = [(k, float(v), 0) for k, v in metrics.items()]
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
        history += [(k, float(v), epoch) for k, v in per_epoch.items()]
    params = {k: str(v) for k, v in _config_params(*spec).items()}
    return params, tags, metrics, history


def generate(path: Path, runs: int) -> str:
    """Write ``runs`` synthetic trial runs as one sweep into a new store at ``path``, straight
    into MLflow's tables (the store and its schema made by MLflow); return the sweep's id."""
    from bench import tracking

    uri = f"sqlite:///{path}"
    store = tracking.MlflowStore(uri, EXPERIMENT)
    sweep_id = store.start_sweep("synthetic", {})
    store.end_sweep(sweep_id, ok=True, killed=False, summary="synthetic")
    experiment_id = int(store.experiment_id)
    artifacts = store.client.get_run(sweep_id).info.artifact_uri.rsplit("/", 2)[0]
    configs = [
        (f, m, mode, b) for f in FRAMEWORKS for m in MODELS for mode in MODES for b in BATCHES
    ]
    start = int(time.time() * 1000)
    db = sqlite3.connect(path)
    for first in range(0, runs, 5000):
        rows: dict[str, list[tuple]] = {"runs": [], "params": [], "tags": [], "lm": [], "m": []}
        for index in range(first, min(runs, first + 5000)):
            spec = (*configs[index % len(configs)], index // len(configs))
            params, tags, metrics, history = _run(sweep_id, index, spec)
            run_id = uuid.UUID(int=random.Random(-index - 1).getrandbits(128)).hex
            name = f"{spec[0]} {spec[1]} {spec[3]} r{spec[4]}"
            at = start + index
            rows["runs"].append((run_id, name, "UNKNOWN", "", "", "bench", "FINISHED", at,
                                 at + 1, "", "active", f"{artifacts}/{run_id}/artifacts",
                                 experiment_id))  # fmt: skip
            rows["params"] += [(k, v, run_id) for k, v in params.items()]
            tags["mlflow.runName"] = name
            rows["tags"] += [(k, v, run_id) for k, v in tags.items()]
            latest = {k: (v, step) for k, v, step in history}  # the last step of each key
            rows["lm"] += [(k, v, at, step, 0, run_id) for k, (v, step) in latest.items()]
            rows["m"] += [(k, v, at, run_id, step, 0) for k, v, step in history]
        with db:
            db.executemany(
                "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name,"
                " user_id, status, start_time, end_time, source_version, lifecycle_stage,"
                " artifact_uri, experiment_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows["runs"],
            )
            db.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?,?,?)",
                           rows["params"])  # fmt: skip
            db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?,?,?)", rows["tags"])
            db.executemany(
                "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid)"
                " VALUES (?,?,?,?,?,?)",
                rows["lm"],
            )
            db.executemany(
                "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan)"
                " VALUES (?,?,?,?,?,?)",
                rows["m"],
            )
    db.close()
    return sweep_id


# The timed process: one report of the sweep, its phases and its peak memory, as JSON.
_CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from bench import tracking
from bench.report import HISTORY_KEYS, build, write
uri, sweep, out, reader = sys.argv[1:5]
EXPERIMENT = sys.argv[6]
kwargs = {"reader": reader} if reader != "-" else {}
t1 = time.perf_counter()
import bench.report as _report
imported = getattr(_report, "warm_imports", lambda: None)()  # as `bench report` does
runs = tracking.load_runs(uri, sweep=sweep, history_keys=HISTORY_KEYS, **kwargs)
if imported:  # (older checkouts: no warm_imports, or one that returns nothing to wait on)
    imported()
t2 = time.perf_counter()
report = build(runs)
t3 = time.perf_counter()
write(report, __import__("pathlib").Path(out))
t4 = time.perf_counter()
found = {"runs": len(runs.records), "imports": t1 - t0, "load": t2 - t1, "build": t3 - t2,
         "write": t4 - t3, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if sys.argv[5] == "baseline":  # the gate's read of the experiment, against one model's runs
    from bench.report import baseline
    from bench.cli.report import _baseline_runs
    from bench.report.trials import to_trial
    now = [to_trial(r) for r in runs.records if r.params.get("model.name") == "lenet5"]
    for name, only in (("whole", None), ("only", baseline.needed(now))):
        t = time.perf_counter()
        old = _baseline_runs(uri, EXPERIMENT, only)
        found[f"baseline_{name}"] = (time.perf_counter() - t, len(old.records))
print(json.dumps(found))
"""


def time_report(
    uri: str, sweep: str, out: Path, reader: str, code: Path, gate: bool = False
) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    t0 = time.perf_counter()
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            uri,
            sweep,
            str(out),
            reader,
            "baseline" if gate else "-",
            EXPERIMENT,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=code,
    )
    wall = time.perf_counter() - t0
    if child.returncode != 0:
        raise RuntimeError(child.stdout + child.stderr)
    found = json.loads(child.stdout.strip().splitlines()[-1])
    found["total"] = wall - sum(found.get(f"baseline_{k}", (0, 0))[0] for k in ("whole", "only"))
    found["said"] = child.stderr.strip()
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(path: Path, root: Path, workers: int = 1) -> tuple[subprocess.Popen, str]:
    """A local ``mlflow server --workers N`` on the store at ``path``; (process, its URI) once
    it answers."""
    import urllib.request

    port = _free_port()
    log = (root / f"server-{port}.log").open("w")
    mlflow = Path(sys.executable).with_name("mlflow")
    server = subprocess.Popen(
        [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{path}", "--host",
         "127.0.0.1", "--port", str(port), "--workers", str(workers),
         "--default-artifact-root", str(root / "server-artifacts")],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return server, uri
        except OSError:
            if server.poll() is not None:
                break
            time.sleep(1)
    server.terminate()
    raise RuntimeError(f"mlflow server did not answer; see {log.name}")


def _line(where: str, n: int, r: dict) -> str:
    line = (
        f"{where:<9} {n:>7} runs  load {r['load']:6.1f} s  build {r['build']:5.1f} s  "
        f"write {r['write']:4.1f} s  total {r['total']:6.1f} s  peak {r['peak_mb']:5.0f} MB"
    )
    if "baseline_only" in r:
        (whole, n_whole), (only, n_only) = r["baseline_whole"], r["baseline_only"]
        line += (
            f"\n  --baseline {EXPERIMENT} of lenet5's runs: {n_only} runs in {only:.1f} s "
            f"(the whole experiment: {n_whole} runs in {whole:.1f} s)"
        )
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the store in this directory")
    parser.add_argument("--http", action="store_true", help="also through a local mlflow server")
    parser.add_argument("--no-sqlite", action="store_true", help="only through the server")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="the server's worker processes (mlflow's own default: 4)",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also time the baseline gate's read of the experiment for lenet5's runs only",
    )
    parser.add_argument("--reader", default="bulk", help="bulk, client, or - (the code's own)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose bench is timed")
    args = parser.parse_args()
    root = (args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"runs-{args.runs}.db"
    marker = path.with_suffix(".sweep")
    if not (path.exists() and marker.exists()):
        for stale in (path, marker):
            stale.unlink(missing_ok=True)
        t0 = time.perf_counter()
        marker.write_text(generate(path, args.runs))
        print(f"wrote {args.runs} synthetic runs in {time.perf_counter() - t0:.1f} s ({path})")
    sweep = marker.read_text().strip()
    worst = 0.0
    if not args.no_sqlite:
        found = time_report(
            f"sqlite:///{path}", sweep, root / "report", args.reader, args.code, args.baseline
        )
        print(
            _line("sqlite", found["runs"], found) + (f"\n  {found['said']}" * bool(found["said"]))
        )
        worst = max(worst, found["total"])
    if args.http:
        server, uri = serve(path, root, args.workers)
        try:
            found = time_report(
                uri, sweep, root / "report-http", args.reader, args.code, args.baseline
            )
        finally:
            os.killpg(server.pid, 15)
            server.wait(30)
        where = f"http w{args.workers}"
        print(_line(where, found["runs"], found) + (f"\n  {found['said']}" * bool(found["said"])))
        worst = max(worst, found["total"])
    target = 30 if args.runs <= 10_000 else 300
    print(f"target < {target} s at {args.runs} runs: {'met' if worst < target else 'MISSED'}")
    return 0 if worst < target else 1


if __name__ == "__main__":
    sys.exit(main())
