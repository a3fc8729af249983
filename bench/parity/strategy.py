"""Strategy parity: a synchronous data-parallel strategy, run as a real trial
(``python -m bench``) at W workers x (batch / W), against the framework's undistributed
session at the full batch, from the same initial weights and on the same samples (the
hook in the trial, :mod:`bench.frameworks.parity_hook`, hands each worker its share)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench import data
from bench.frameworks.weights import Tensor
from bench.parity import side as sides
from bench.parity.check import DEFAULT_TOLERANCE, Outcome, compare, horizon, norm

# Synchronous data-parallel strategies the check runs through a real trial, by framework.
COVERED = {
    "ddp": ("torch",),
    "horovod": ("torch", "tf"),
    "mirrored": ("tf",),
    "multiworker": ("tf",),
    "kvstore_sync": ("mxnet",),
}


def trial_overrides(spec: sides.Spec, framework: str) -> list[str]:
    """``python -m bench`` overrides for a trial that takes exactly the check's steps: one
    step per epoch (so that each epoch's loss is that step's), no warm-up, no telemetry."""
    return [
        f"framework={framework}",
        f"model={spec.model}",
        f"image_size={spec.image_size}",
        f"num_classes={spec.num_classes}",
        f"optimizer.name={spec.optimizer}",
        f"optimizer.lr={spec.lr}",
        f"optimizer.momentum={spec.momentum}",
        f"optimizer.weight_decay={spec.weight_decay}",
        f"epochs={spec.steps}",
        "steps_per_epoch=1",
        "warmup_steps=0",
        f"data.num_batches={spec.steps}",
        "telemetry.enabled=false",
        "device=cpu",
        f"seed={spec.seed}",
        "force=true",
    ]


def run_trial_side(
    framework: str,
    spec: sides.Spec,
    init: list[Tensor],
    b: data.HostBatches,
    overrides: list[str],
    label: str,
) -> tuple[sides.Side, float]:
    """A real trial (``python -m bench``, its own store) with the parity hook: the mean of
    its processes' losses per step, process 0's weights, and how far the other processes'
    weights are from process 0's (0 for one process)."""
    from bench.frameworks import parity_hook

    with tempfile.TemporaryDirectory(prefix="bench-parity-") as tmp:
        where = Path(tmp, "parity")
        where.mkdir()
        parity_hook.save_tensors(where / "init.npz", init)
        np.savez(where / "batches.npz", **parity_hook.batch_arrays(b))  # type: ignore[arg-type]
        repo = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=path, **{parity_hook.VARIABLE: str(where)})
        command = [
            sys.executable, "-m", "bench", *trial_overrides(spec, framework), *overrides,
            f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"hydra.run.dir={tmp}/run",
        ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=1800, cwd=tmp
        )
        ranks = sorted(where.glob("rank*.npz"), key=lambda p: int(p.stem[4:]))
        if done.returncode != 0 or not ranks:
            raise RuntimeError(
                f"the {label} trial failed (exit {done.returncode}):\n"
                f"{(done.stdout + done.stderr)[-3000:]}"
            )
        loaded = [parity_hook.load_tensors(p) for p in ranks]
    losses = np.mean([extra["losses"] for _, extra in loaded], axis=0)
    first = loaded[0][0]
    apart = 0.0
    for tensors, _ in loaded[1:]:
        for a, t in zip(first, tensors, strict=True):
            apart = max(apart, norm([t.value - a.value]) / max(norm([a.value]), 1e-30))
    return sides.Side(label, [float(v) for v in losses], first), apart


def check_strategy(
    spec: sides.Spec,
    framework: str,
    strategy: str,
    workers: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Outcome:
    """``strategy`` at ``workers`` x (batch / workers), run as a real trial, against the
    framework's undistributed session at the full batch, from the same start."""
    import time

    started = time.perf_counter()
    run_spec, reference, floor, init, b = horizon(spec, framework, tolerance)
    overrides = [
        f"distributed={strategy}",
        f"workers={workers}",
        f"batch_size={spec.batch_size // workers}",
    ]
    label = f"{strategy} {workers}x{spec.batch_size // workers}"
    reference.framework = f"{framework} 1x{spec.batch_size}"
    other, apart = run_trial_side(framework, run_spec, init, b, overrides, label)
    deviation = compare(reference, other, init)
    return Outcome(
        run_spec,
        [reference, other],
        [deviation],
        tolerance,
        time.perf_counter() - started,
        floor,
        spec.steps,
        strategy,
        workers,
        apart,
    )
