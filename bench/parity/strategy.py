"""Strategy parity: a synchronous strategy, run as a real trial (``python -m bench``),
against the framework's undistributed session, from the same initial weights and on the
same samples (the trial's parity hook, :mod:`bench.trial.frameworks.parity_hook`, named in the
trial folder's ``hooks.json``, hands each worker, or each device, its share; the run is
tagged ``bench.hooks=parity``).  A data-parallel strategy runs at W workers x
(batch / W) against the full batch; ``model_parallel`` runs the split model at the full
batch against the unsplit one."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.core.strategy_configs import STRATEGY_CONFIGS, DistributedConfig
from bench.envs import interpreters
from bench.parity.check import (
    DEFAULT_TOLERANCE,
    Outcome,
    compare,
    horizon,
    layer_deviation,
    settle,
)
from bench.trial import data
from bench.trial import parity as sides
from bench.trial.distributed import registry
from bench.trial.frameworks.weights import BUFFER, PARAM, Tensor

# Synchronous strategies the check runs through a real trial on the CPU, by framework
# (dp and torch's model_parallel need GPUs): the registry's ``parity`` frameworks.
COVERED = {
    name: s.parity for name, s in registry.STRATEGIES.items() if s.parity and not s.asynchronous
}


def whole_batch(strategy: str) -> bool:
    """Every worker (stage) of ``strategy`` sees the whole batch: not data parallel."""
    found = registry.info(strategy)
    return found is not None and found.whole_batch


def worker_batch(strategy: str, batch_size: int, workers: int) -> int:
    return batch_size if whole_batch(strategy) else batch_size // workers


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
    b: data.ArrayBatches,
    overrides: list[str],
    label: str,
) -> tuple[sides.Side, float | None]:
    """A real trial (``python -m bench``, its own store) with the parity hook: the mean of
    its processes' losses per step, process 0's weights, and how far the other processes'
    weights are from process 0's (None for one process).  The hook is named in the trial
    folder's ``hooks.json`` (:mod:`bench.trial.runtime.hooks`), its files in ``parity/`` beside."""
    from bench.trial.frameworks import parity_hook
    from bench.trial.runtime.hooks import TrialHooks

    with tempfile.TemporaryDirectory(prefix="bench-parity-") as tmp:
        run = Path(tmp, "run")  # the trial's folder: hydra.run.dir
        where = run / "parity"
        where.mkdir(parents=True)
        parity_hook.save_tensors(where / "init.npz", init)
        np.savez(where / "batches.npz", **parity_hook.batch_arrays(b))  # type: ignore[arg-type]
        TrialHooks(parity=Path(where.name)).write(run)
        env = interpreters.child_env()
        command = [
            sys.executable, "-m", "bench", *trial_overrides(spec, framework), *overrides,
            f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"hydra.run.dir={run}",
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
    apart = None
    if len(loaded) > 1:
        apart = max(
            layer_deviation(first, tensors, kind)[0] or 0.0
            for tensors, _ in loaded[1:]
            for kind in (PARAM, BUFFER)
        )
    return sides.Side(label, [float(v) for v in losses], first), apart


def check_strategy(
    spec: sides.Spec,
    framework: str,
    strategy: str,
    workers: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Outcome:
    """``strategy`` at ``workers`` x (batch / workers) (``model_parallel``: the split model
    at the full batch), run as a real trial, against the framework's undistributed session
    at the full batch, from the same start."""
    import time

    started = time.perf_counter()
    run_spec, reference, floor, shakes, init, b = horizon(spec, framework, tolerance)
    per_worker = worker_batch(strategy, spec.batch_size, workers)
    overrides = [f"distributed={strategy}", f"workers={workers}", f"batch_size={per_worker}"]
    label = f"{strategy} {workers}x{per_worker}"
    reference.framework = f"{framework} 1x{spec.batch_size}"
    other, apart = run_trial_side(framework, run_spec, init, b, overrides, label)
    deviation = compare(reference, other, init)
    floor, shakes = settle(
        framework, run_spec, reference, init, b, floor, shakes, [deviation], tolerance
    )
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
        _setup(strategy, workers, spec.batch_size),
        shakes,
    )


def _setup(strategy: str, workers: int, batch: int) -> str:
    if whole_batch(strategy):
        return (
            f"{strategy}: the model split into {workers} stages at batch {batch}, run as a real "
            f"trial (python -m bench), against the unsplit model at batch {batch}"
        )
    per_device = STRATEGY_CONFIGS.get(strategy, DistributedConfig).per_device
    what = "devices of one process" if per_device else "workers"
    return (
        f"{strategy} at {workers} {what} x batch {batch // workers}, run as a real trial "
        f"(python -m bench), against the undistributed session at batch {batch}; per step, "
        f"the mean of the {what.split()[0]}' losses"
    )


# Asynchronous strategies: each worker's update is applied on its own, computed from weights
# that may miss the other workers' latest updates (stale), in an arrival order nobody fixes.
ASYNC = {name: s.parity for name, s in registry.STRATEGIES.items() if s.parity and s.asynchronous}
# Every strategy a check covers (synchronous first), by the frameworks it runs in.
CHECKED = {**COVERED, **ASYNC}
# What the looser check allows: staleness moves the trajectory by a few percent over 20
# steps of lenet5; a wrong scale of each update (every push averaged over all the workers'
# batches, or not over its own) moves it by 50% or more.
ASYNC_TOLERANCE = 0.25


def sequential(b: data.ArrayBatches, workers: int) -> data.ArrayBatches:
    """Each global batch cut into ``workers`` consecutive shares, taken one after another:
    the order in which an asynchronous strategy's updates would arrive if every worker
    waited for the one before it (no staleness)."""
    per = len(b.images[0]) // workers
    cut = [slice(i * per, (i + 1) * per) for i in range(workers)]
    return data.ArrayBatches(
        [x[s] for x in b.images for s in cut], [y[s] for y in b.labels for s in cut]
    )


def check_async(
    spec: sides.Spec,
    framework: str,
    strategy: str,
    workers: int,
    tolerance: float = ASYNC_TOLERANCE,
) -> Outcome:
    """The looser check of an asynchronous strategy: ``workers`` x (batch / workers), each
    worker ``spec.steps`` steps on its share of every global batch, against the
    undistributed session taking the same shares one after another at batch / workers
    (``workers`` x ``spec.steps`` updates, as many as the workers push), its losses averaged
    over each round of ``workers`` steps.  Staleness and arrival order make the two differ;
    the tolerance is loose enough for them and tight enough for a wrong update scale."""
    import dataclasses
    import time

    from bench.parity.check import batches, initial_weights, run_side, shaken

    started = time.perf_counter()
    per_worker = spec.batch_size // workers
    init, b = initial_weights(spec), batches(spec)
    order = sequential(b, workers)
    one_by_one = dataclasses.replace(spec, batch_size=per_worker, steps=spec.steps * workers)
    reference = _rounds(run_side(framework, one_by_one, init, order), workers)
    start = shaken(init, spec.seed)
    again = _rounds(run_side(framework, one_by_one, start, order), workers)
    floor = compare(reference, again, init, start)
    reference.framework = f"{framework} 1x{per_worker} in turn"
    overrides = [f"distributed={strategy}", f"workers={workers}", f"batch_size={per_worker}"]
    label = f"{strategy} {workers}x{per_worker}"
    other, _ = run_trial_side(framework, spec, init, b, overrides, label)
    setup = (
        f"{strategy} at {workers} workers x batch {per_worker}, run as a real trial (python -m "
        f"bench), each worker {spec.steps} steps on its share of every batch of {spec.batch_size}"
        f", against the undistributed session taking the same shares one after another "
        f"({workers * spec.steps} updates at batch {per_worker}), its losses averaged over each "
        f"round of {workers}. Asynchronous: updates may be computed from stale weights and "
        f"arrive in any order, so the check is looser (tolerance {tolerance:g}); it catches a "
        "wrong update scale, not staleness"
    )
    return Outcome(
        spec,
        [reference, other],
        [compare(reference, other, init)],
        tolerance,
        time.perf_counter() - started,
        floor,
        spec.steps,
        strategy,
        workers,
        None,  # the workers' copies differ by design until they pull the last updates
        setup,
    )


def _rounds(side: sides.Side, workers: int) -> sides.Side:
    """``side`` with its losses averaged over each run of ``workers`` steps."""
    losses = np.asarray(side.losses).reshape(-1, workers).mean(axis=1)
    return sides.Side(side.framework, [float(v) for v in losses], side.weights, side.dropout_layers)
