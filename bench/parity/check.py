"""The training parity check: the same model, initial weights, batches and optimizer in each
framework, N steps, and how far each framework's losses and weights end from the
reference's (the first framework named).

Deviations, each relative to the reference:

- ``loss``: the largest |loss - reference loss| / |reference loss| over the steps;
- ``update``: ||(w - w0) - (w_ref - w0)|| / ||w_ref - w0|| over all trained parameters: how
  far the distance the weights travelled differs.  The weights themselves barely move in
  20 steps, so this is the figure that a wrong gradient scale, learning rate, momentum or
  weight decay moves (a gradient scaled by 0.9 under SGD gives about 0.1);
- ``weights``: the largest ||w - w_ref|| / ||w_ref|| of one tensor, after the last step;
- ``BN stats``: the same for BatchNorm's running statistics (not trained: reported, and
  part of the verdict, since inference after training reads them).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import data, interpreters
from bench.frameworks.weights import BUFFER, PARAM, Tensor
from bench.parity import side as sides
from bench.tables import text_table

# float32 arithmetic done in another order (oneDNN, Eigen and MXNet's kernels reduce
# differently) drifts by about 1e-6 relative per step in the loss and stays below 1e-3 in
# the update over 20 steps of the covered models; a wrong gradient scale of 0.9 is 1e-1.
DEFAULT_TOLERANCE = 1e-2
FRAMEWORKS = ("torch", "tf", "mxnet")


@dataclass
class Deviation:
    framework: str
    loss: float
    update: float
    weights: float
    buffers: float | None
    worst: str  # the tensor with the largest weight deviation

    def passed(self, tolerance: float) -> bool:
        figures = [self.loss, self.update, self.weights]
        if self.buffers is not None:
            figures.append(self.buffers)
        return all(np.isfinite(f) and f <= tolerance for f in figures)


def initial_weights(spec: sides.Spec) -> list[Tensor]:
    """PyTorch's seeded initialization of the model, in canonical form: every side starts
    from it."""
    import torch

    from bench import models
    from bench.frameworks.weights import torch_model_weights

    torch.manual_seed(spec.seed)
    return torch_model_weights(models.build("torch", spec.model, spec.num_classes, spec.image_size))


def batches(spec: sides.Spec) -> data.HostBatches:
    """``spec.steps`` distinct batches, one per step, the same for every side."""
    return data.synthetic(spec.config("torch"))


def run_side(
    framework: str, spec: sides.Spec, init: list[Tensor], b: data.HostBatches
) -> sides.Side:
    """One framework's side: in this process, or in the framework's own environment."""
    if framework not in interpreters.OWN_ENVIRONMENTS:
        return sides.run(framework, spec, init, b)
    problem = interpreters.problem(framework)
    if problem:
        raise RuntimeError(problem)
    with tempfile.TemporaryDirectory(prefix="bench-parity-") as tmp:
        request, result = str(Path(tmp, "request.npz")), str(Path(tmp, "result.npz"))
        sides.write_request(request, framework, spec, init, b)
        env = interpreters.child_env()
        done = subprocess.run(
            [interpreters.python_for(framework), "-m", "bench.parity.side", request, result],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{framework}'s side failed:\n{done.stderr[-3000:]}")
        return sides.read_result(result, framework)


def norm(arrays: list[np.ndarray]) -> float:
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def compare(reference: sides.Side, other: sides.Side, init: list[Tensor]) -> Deviation:
    ref_losses, losses = np.asarray(reference.losses), np.asarray(other.losses)
    loss = float(np.max(np.abs(losses - ref_losses) / np.maximum(np.abs(ref_losses), 1e-12)))
    params = [
        (i, r.value, o.value)
        for i, (r, o) in enumerate(zip(reference.weights, other.weights, strict=True))
        if r.kind == PARAM
    ]
    travelled = [r - init[i].value for i, r, _ in params]
    differ = [o - r for _, r, o in params]
    update = norm(differ) / max(norm(travelled), 1e-30)
    weights, worst = 0.0, ""
    buffers: float | None = None
    for r, o in zip(reference.weights, other.weights, strict=True):
        d = norm([o.value - r.value]) / max(norm([r.value]), 1e-30)
        if r.kind == BUFFER:
            buffers = max(buffers or 0.0, d)
        elif d > weights:
            weights, worst = d, r.name
    return Deviation(other.framework, loss, update, weights, buffers, worst)


@dataclass
class Outcome:
    spec: sides.Spec  # as run: its steps may be fewer than asked (see ``horizon``)
    sides: list[sides.Side]
    deviations: list[Deviation]
    tolerance: float
    seconds: float
    floor: Deviation  # the reference against itself from rounding-level different weights
    asked_steps: int = 0
    strategy: str = ""  # a strategy check (bench.parity.strategy): the strategy, its workers
    workers: int = 1
    # How far the worker processes' weights end from process 0's (None: one process).
    replicas_apart: float | None = None
    setup: str = ""  # a strategy check: what was run against what, in words

    @property
    def passed(self) -> bool:
        ok = all(d.passed(self.tolerance) for d in self.deviations)
        return ok and (self.replicas_apart or 0.0) <= self.tolerance


# How much a rounding-level change of the initial weights (one float32 ulp, about 1.2e-7
# relative) may move the reference's own trajectory before a comparison over those steps
# says nothing: a hundredth of the tolerance, measured as the worse of two such changes.
# One change is a noisy yardstick: on ResNet-18 (batch 32, 32 px, SGD with momentum) its
# effect after 3 steps ranged from 4.7e-4 to 2.6e-2 with its direction and the thread
# count, and another framework's rounding differs in every operation of every step, not
# only in the initial weights (TensorFlow was 2 to 100 times the one-change figure).  With
# a tenth, a low draw let such a run be compared over 3 steps and fail at 4.7e-2.
FLOOR_SHARE = 0.01
SHAKES = 2


def shaken(init: list[Tensor], seed: int) -> list[Tensor]:
    """``init`` with each value moved by one float32 ulp up or down, at random."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for t in init:
        up = rng.random(t.value.shape) < 0.5
        toward = np.where(up, np.float32(np.inf), np.float32(-np.inf))
        out.append(Tensor(t.name, t.kind, np.nextafter(t.value, toward).astype(np.float32)))
    return out


def check(spec: sides.Spec, frameworks: list[str], tolerance: float = DEFAULT_TOLERANCE) -> Outcome:
    """Run every framework's side from the same start; compare each with the first.

    First the reference runs twice, the second time from weights one rounding step away:
    where that alone moves its trajectory by more than ``FLOOR_SHARE * tolerance`` (deep
    networks with BatchNorm on random data are chaotic: ResNet-18 is, within 10 steps),
    the comparison is made over the longest prefix of steps where it does not, and says so.
    """
    import time

    started = time.perf_counter()
    run_spec, reference, floor, init, run_batches = horizon(spec, frameworks[0], tolerance)
    done = [reference] + [run_side(fw, run_spec, init, run_batches) for fw in frameworks[1:]]
    deviations = [compare(reference, other, init) for other in done[1:]]
    return Outcome(
        run_spec, done, deviations, tolerance, time.perf_counter() - started, floor, spec.steps
    )


def describe(spec: sides.Spec) -> str:
    opt = f"{spec.optimizer} (lr {spec.lr:g}"
    if spec.optimizer == "sgd":
        opt += f", momentum {spec.momentum:g}"
    opt += f", weight decay {spec.weight_decay:g})"
    return (
        f"{spec.model}, {opt}, batch {spec.batch_size}, {spec.image_size} px, "
        f"{spec.num_classes} classes, {spec.steps} steps, fp32 on the CPU"
    )


def format_outcome(outcome: Outcome, show_steps: bool = True) -> str:
    spec, done = outcome.spec, outcome.sides
    names = [s.framework for s in done]
    lines = [f"parity: {describe(spec)}"]
    lines.append(
        f"every side starts from {names[0]}'s seeded initial weights (copied into "
        f"{', '.join(names[1:]) or 'no other'}) and takes the same {spec.steps} batches in "
        "the same order, through its own trial session"
    )
    if outcome.asked_steps and outcome.asked_steps != spec.steps:
        lines.append(
            f"compared over the first {spec.steps} of {outcome.asked_steps} steps: beyond them "
            f"{names[0]}'s own trajectory moves by more than {FLOOR_SHARE:g} of the tolerance "
            "when its initial weights move by one float32 rounding step (this model's "
            "training amplifies rounding; see the 'rounding' row)"
        )
    if outcome.strategy:
        lines.append(outcome.setup)
        if any(t.kind == BUFFER for t in done[0].weights):
            lines.append(
                "note: this model has BatchNorm, whose per-replica batch statistics "
                "legitimately differ from the full batch's; use a model without it (lenet5)"
            )
    dropped = max(s.dropout_layers for s in done)
    if dropped:
        lines.append(f"dropout: {dropped} layer(s) set to the identity on every side")
    if show_steps:
        lines.append("")
        lines.append(
            text_table(
                ["step", *[f"loss {n}" for n in names]],
                [[str(i + 1), *[f"{s.losses[i]:.6f}" for s in done]] for i in range(spec.steps)],
            )
        )
    lines.append("")
    f = outcome.floor
    rows = [
        [
            f"{names[0]} vs itself, 1 ulp off",
            f"{f.loss:.2e}",
            f"{f.update:.2e}",
            f"{f.weights:.2e}",
            "-" if f.buffers is None else f"{f.buffers:.2e}",
            "rounding",
        ]
    ]
    for d in outcome.deviations:
        rows.append(
            [
                f"{d.framework} vs {names[0]}",
                f"{d.loss:.2e}",
                f"{d.update:.2e}",
                f"{d.weights:.2e}",
                "-" if d.buffers is None else f"{d.buffers:.2e}",
                "passed" if d.passed(outcome.tolerance) else "FAILED",
            ]
        )
    if outcome.replicas_apart is not None:
        apart = outcome.replicas_apart
        ok = apart <= outcome.tolerance
        rows.append(["workers' weights apart", "-", "-", f"{apart:.2e}", "-",
                     "passed" if ok else "FAILED"])  # fmt: skip
    header = ["relative deviation", "loss", "update", "weights", "BN stats", ""]
    lines.append(text_table(header, rows))
    verdict = "passed" if outcome.passed else "FAILED"
    lines.append("")
    lines.append(
        f"{verdict}: every deviation must be at most {outcome.tolerance:g} "
        f"({outcome.seconds:.1f} s)"
    )
    return "\n".join(lines)


def worse(a: Deviation, b: Deviation) -> Deviation:
    """Each figure the larger of ``a``'s and ``b``'s."""
    buffers = None if a.buffers is None or b.buffers is None else max(a.buffers, b.buffers)
    return Deviation(
        a.framework,
        max(a.loss, b.loss),
        max(a.update, b.update),
        max(a.weights, b.weights),
        buffers,
        a.worst if a.weights >= b.weights else b.worst,
    )


def horizon(
    spec: sides.Spec, framework: str, tolerance: float
) -> tuple[sides.Spec, sides.Side, Deviation, list[Tensor], data.HostBatches]:
    """The reference side over the longest prefix of ``spec.steps`` that rounding does not
    decide (see :func:`check`), with its floor, initial weights and batches."""
    import dataclasses

    init, b = initial_weights(spec), batches(spec)
    limit = FLOOR_SHARE * tolerance
    steps = spec.steps
    while True:
        run_spec = dataclasses.replace(spec, steps=steps)
        run_batches = data.HostBatches(b.images[:steps], b.labels[:steps])
        reference = run_side(framework, run_spec, init, run_batches)
        again = run_side(framework, run_spec, shaken(init, spec.seed), run_batches)
        floor = compare(reference, again, init)
        for shake in range(1, SHAKES):  # another shake only while the floor passes
            if not floor.passed(limit):
                break
            other = run_side(framework, run_spec, shaken(init, spec.seed + shake), run_batches)
            floor = worse(floor, compare(reference, other, init))
        if floor.passed(limit) or steps == 1:
            return run_spec, reference, floor, init, run_batches
        off = [
            abs(a - r) / max(abs(r), 1e-12)
            for a, r in zip(again.losses, reference.losses, strict=True)
        ]
        within = next((i for i, d in enumerate(off) if d > limit), len(off))
        steps = max(1, min(within, steps // 2))  # each try costs its steps: halve
