"""Each framework at its default and at its best on this machine (docs/tuning.md): one real
sweep, ``tuning=default,best`` with interleaved repeats and an empty tuning cache, then a
table per (model, framework): samples/s at each with a 95% t interval, the pick, the
search's wall time cold (the first repeat) and warm (the later ones, from the cache), and
the report's verdicts at defaults and at best.

    .venv/bin/python scripts/measure/bench_tuning.py [--models resnet50]
        [--frameworks torch,tf,mxnet] [--repeats 3] [--image-size 32] [--batch-size 32]
        [--store /tmp/bench-tuning]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def interval(values: list[float]) -> str:
    from scipy.stats import t

    if len(values) < 2:
        return f"{values[0]:.1f}" if values else "-"
    mean = statistics.fmean(values)
    half = t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.1f} [{mean - half:.1f}, {mean + half:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--frameworks", default="torch,tf,mxnet")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--store", default="/tmp/bench-tuning")
    parser.add_argument("--extra", default="", help="more overrides, space-separated")
    args = parser.parse_args()

    store = Path(args.store)
    store.mkdir(parents=True, exist_ok=True)
    cache = store / f"cache-{int(time.time())}"  # an empty tuning cache: cold searches
    uri = f"sqlite:///{store}/mlflow.db"
    command = [
        sys.executable, "-m", "bench", "-m", f"model={args.models}",
        f"framework={args.frameworks}", "tuning=default,best", f"repeats={args.repeats}",
        f"image_size={args.image_size}", f"batch_size={args.batch_size}", "force=true",
        "report=true", f"tracking.uri={uri}", "tracking.experiment=tuning",
        f"hydra.sweep.dir={store}/hydra", *args.extra.split(),
    ]  # fmt: skip
    started = time.time()
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "BENCH_CACHE": str(cache)})
    took = time.time() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"the sweep exited {done.returncode}")

    import mlflow

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("tuning")
    assert experiment is not None
    runs = [
        r
        for r in client.search_runs([experiment.experiment_id], max_results=5000)
        if "mlflow.parentRunId" in r.data.tags and r.info.start_time >= started * 1000 - 5000
    ]
    cells: dict[tuple[str, str, str], list] = {}
    for r in runs:
        p = r.data.params
        key = (
            p.get("model.name", "?"),
            p.get("framework.name", "?"),
            p.get("tuning.name", "default"),
        )
        cells.setdefault(key, []).append(r)
    print(f"\nsweep: {len(runs)} trials in {took:.0f} s ({uri})")
    head = ["model", "framework", "default samples/s", "best samples/s", "chosen settings",
            "search cold s", "search warm s", "compile s"]  # fmt: skip
    print(" | ".join(head))
    for model in args.models.split(","):
        for fw in args.frameworks.split(","):
            default = [r for r in cells.get((model, fw, "default"), []) if _ok(r)]
            best = [r for r in cells.get((model, fw, "best"), []) if _ok(r)]
            rate = lambda rs: [r.data.metrics["trial_samples_per_s"] for r in rs]  # noqa: E731
            picks = sorted({_pick(r) for r in best}) or ["-"]
            cold = [r.data.metrics.get("tuning_search_s", 0) for r in best
                    if r.data.tags.get("bench.tuning_source") == "search"]  # fmt: skip
            warm = [r.data.metrics.get("tuning_search_s", 0) for r in best
                    if r.data.tags.get("bench.tuning_source", "").startswith("cache")]  # fmt: skip
            compile_s = [r.data.metrics.get("compile_time_s", 0) for r in best]
            row = [model, fw, interval(rate(default)), interval(rate(best)), " | ".join(picks),
                   f"{max(cold):.1f}" if cold else "-",
                   f"{statistics.fmean(warm):.2f}" if warm else "-",
                   f"{statistics.fmean(compile_s):.1f}" if compile_s else "-"]  # fmt: skip
            print(" | ".join(row))
    print("\nThe report's section (bench report --uri ... --experiment tuning):")
    from bench.cli.report import main as report_main

    out = store / "report"
    report_main(["--uri", uri, "--sweep", "latest", "--experiment", "tuning", "--out", str(out),
                 "--no-log"])  # fmt: skip
    text = (out / "report.md").read_text()
    if "## At each framework's best" in text:
        section = text[text.index("## At each framework's best") :]
        print(section.split("\n## ", 1)[0])


def _ok(run) -> bool:  # noqa: ANN001
    return run.data.tags.get("bench.status") == "ok"


def _pick(run) -> str:  # noqa: ANN001
    from bench.trial.frameworks.spaces import DEFAULTS

    chosen = []
    for key, default in DEFAULTS.items():
        value = run.data.params.get(f"tuned.{key}", "")
        if key in ("threads", "inter_threads") or value.lower() != str(default).lower():
            chosen.append(f"{key}={value}")
    return ", ".join(chosen)


if __name__ == "__main__":
    main()
