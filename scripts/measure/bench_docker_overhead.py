"""Per-trial overhead of ``launcher=docker`` against ``launcher=process``, image already built.

Runs the same tiny trial through both launchers, alternating, and reports medians of where
the wall time from the launch call to its result goes:

    launch -> bench code running   interpreter start (docker: + container create and start)
    last timed step -> result      result write, exit (docker: + container exit and removal)
    = harness overhead             what the launcher adds around the trial
    framework import, data+build, compile+warm-up, timed epochs: the trial's own work, shown
    to check that it runs as fast in the container

Target: docker's harness overhead at most 2 s above the process launcher's.  The image is
built first if its tag is missing; that build is reported but not counted.

    .venv/bin/python scripts/measure/bench_docker_overhead.py [--repeats 5] [--framework torch]
        [--base-image bench-base:bookworm] [--ca-bundle PEM] [--wheelhouse DIR]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench import images, launchers
from bench.core.config import BenchConfig

PARTS = (
    "launch_to_bench_code_s",
    "last_step_to_result_s",
    "harness_overhead_s",
    "framework_import_s",
    "data_build_s",
    "compile_warmup_s",
    "timed_epochs_s",
    "launch_to_result_s",
)


def measure(cfg: BenchConfig, launcher: str, root: Path) -> dict[str, float]:
    cfg = copy.deepcopy(cfg)
    cfg.launcher.name = launcher
    workdir = Path(tempfile.mkdtemp(dir=root))
    started = time.time()
    result = launchers.get(launcher).launch(cfg, workdir, lambda record: None)
    ended = time.time()
    assert result.status == "ok", result.error
    m, p = result.marks, result.phases
    before, after = m["trial_start"] - started, ended - m["last_timed_step"]
    return {
        "launch_to_bench_code_s": before,
        "last_step_to_result_s": after,
        "harness_overhead_s": before + after,
        "framework_import_s": p["import_time_s"],
        "data_build_s": p["data_time_s"] + p["build_time_s"],
        "compile_warmup_s": p.get("compile_time_s", 0.0) + p.get("warmup_time_s", 0.0),
        "timed_epochs_s": result.summary["trial_time_s"],
        "launch_to_result_s": ended - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--framework", choices=("torch", "tf"), default="torch")
    parser.add_argument("--base-image", default="bench-base:bookworm")
    parser.add_argument("--ca-bundle", default=os.environ.get("PIP_CERT", ""))
    wheelhouse = os.environ.get("PIP_FIND_LINKS", "")
    parser.add_argument("--wheelhouse", default=wheelhouse if os.path.isdir(wheelhouse) else "")
    args = parser.parse_args()

    cfg = BenchConfig(batch_size=2, epochs=1, steps_per_epoch=2, warmup_steps=1, force=True)
    cfg.framework.name, cfg.model.name = args.framework, "resnet50"
    d = cfg.launcher.docker
    d.base_image, d.ca_bundle, d.wheelhouse, d.variant = (
        args.base_image,
        args.ca_bundle,
        args.wheelhouse,
        "cpu",
    )
    image = images.ensure(images.BuildSpec.from_config(cfg))
    how = f"built now in {image.build_s:.0f} s" if image.build_s else "already built"
    print(f"image {image.tag} ({image.id[:19]}, {image.size_bytes / 2**20:,.0f} MiB, {how})")
    print(f"{args.framework} resnet50, batch 2, 1 warm-up step, 2 timed steps; CPU")

    rows: dict[str, list[dict[str, float]]] = {"process": [], "docker": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for launcher in ("process", "docker"):  # untimed: page cache, first container
            measure(cfg, launcher, root)
        for i in range(args.repeats):
            order = ("process", "docker") if i % 2 == 0 else ("docker", "process")
            for launcher in order:
                rows[launcher].append(measure(cfg, launcher, root))

    print(f"\nmedian of {args.repeats} alternating repeats (seconds):")
    print(f"  {'':24} {'process':>8} {'docker':>8} {'docker-process':>15}")
    for key in PARTS:
        a = statistics.median(r[key] for r in rows["process"])
        b = statistics.median(r[key] for r in rows["docker"])
        print(f"  {key:24} {a:8.2f} {b:8.2f} {b - a:+15.2f}")
    diffs = [
        d["harness_overhead_s"] - p["harness_overhead_s"]
        for p, d in zip(rows["process"], rows["docker"], strict=True)
    ]
    pairs = ", ".join(f"{x:+.2f}" for x in diffs)
    print(
        f"\ncontainer overhead per trial (harness, docker - process): median "
        f"{statistics.median(diffs):+.2f} s (pairs: {pairs}); target <= 2 s"
    )


if __name__ == "__main__":
    main()
