"""The training parity check: the same model, initial weights, batches and optimizer in each
framework, N steps, and how far each framework's losses and weights end from the
reference's (the first framework named).

Deviations, each relative to the size of what is compared, over the whole model or one
layer, never one tensor alone (a tensor of near-zero values, a BatchNorm bias, would
divide rounding noise by almost nothing):

- ``loss``: the largest |loss - reference loss| / |reference loss| over the steps;
- ``update``: ||dw - dw_ref|| / ||dw_ref|| over all trained parameters, dw = w - w0 each
  from its own start: how far the distance the weights travelled differs, in length and
  direction (a gradient scaled by 0.9 under SGD gives 0.1);
- ``scale``: |1 - <dw, dw_ref> / ||dw_ref||^2|: how much longer or shorter the update is
  along the reference's.  A wrong gradient scale, learning rate, momentum or weight decay
  moves it as much as ``update``; rounding that tips a ReLU or a sign over moves the update's
  direction, hardly its length (see :data:`FLOOR_MULTIPLE`);
- ``weights``: the largest ||W - W_ref|| / ||W_ref|| of one layer (its trained tensors
  together: a kernel and its bias, BatchNorm's scale and shift), after the last step;
- ``BN stats``: the same for BatchNorm's running mean and variance of one layer together
  (not trained: reported, and part of the verdict, since inference after training reads
  them).

Each figure passes within the tolerance, or within :data:`FLOOR_MULTIPLE` times the
rounding floor where that is larger: the reference against itself from initial weights one
float32 ulp away, measured in the same run on the same machine.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.core.frameworks import NAMES, TORCH
from bench.core.tables import text_table
from bench.envs import interpreters
from bench.trial import data
from bench.trial import parity as sides
from bench.trial.frameworks.weights import BUFFER, PARAM, Tensor

# float32 arithmetic done in another order (oneDNN, Eigen and MXNet's kernels reduce
# differently) drifts by about 1e-6 relative per step in the loss and stays below 1e-4 in
# the update over 20 steps of lenet5; a wrong gradient scale of 0.9 is 1e-1.  Where rounding
# alone does more (a chaotic model: ResNet-18), the floor decides (FLOOR_MULTIPLE).
DEFAULT_TOLERANCE = 1e-2
FRAMEWORKS = NAMES
# The figures of a Deviation, in the table's order, with their column titles.
FIGURES = {
    "loss": "loss",
    "update": "update",
    "scale": "scale",
    "weights": "weights",
    "buffers": "BN stats",
}
# A side passes a figure within the tolerance or within this multiple of the rounding
# floor's figure, whichever is larger.  Another framework's rounding differs in every
# operation, not only in the initial weights: at the first step of ResNet-18 its deviations
# were up to 2 times the one-ulp floor's where no ReLU tipped over, and up to 1.05 times
# where one did (12 data seeds, SGD and Adam).  Faults stay well beyond: a 0.9x gradient or
# step size is 0.1 in ``scale``, whose floor is at most 9e-3 there (Adam, 1 step).
FLOOR_MULTIPLE = 4.0


@dataclass
class Deviation:
    framework: str
    loss: float
    update: float
    scale: float
    weights: float
    buffers: float | None
    worst: str  # the layer with the largest weight deviation

    def figures(self) -> dict[str, float]:
        """Each figure by name (``FIGURES``), BN stats only where the model has them."""
        found = {name: getattr(self, name) for name in FIGURES}
        return {k: v for k, v in found.items() if v is not None}

    def passed(self, limits: float | Mapping[str, float]) -> bool:
        """Every figure finite and within its limit (one for all, or one per figure)."""
        return all(
            np.isfinite(v) and v <= (limits[k] if isinstance(limits, Mapping) else limits)
            for k, v in self.figures().items()
        )


def initial_weights(spec: sides.Spec) -> list[Tensor]:
    """PyTorch's seeded initialization of the model, in canonical form: every side starts
    from it."""
    import torch

    from bench.trial import models
    from bench.trial.frameworks.weights import torch_model_weights

    torch.manual_seed(spec.seed)
    return torch_model_weights(models.build(TORCH, spec.model, spec.num_classes, spec.image_size))


def batches(spec: sides.Spec) -> data.ArrayBatches:
    """``spec.steps`` distinct batches, one per step, the same for every side."""
    return data.synthetic(spec.config(TORCH))


def run_side(
    framework: str, spec: sides.Spec, init: list[Tensor], b: data.ArrayBatches
) -> sides.Side:
    """One framework's side: in this process, or in a child process (the framework's own
    environment, or a setting fixed when the framework is imported)."""
    if not _in_child(framework):
        return sides.run(framework, spec, init, b)
    return run_sides(framework, spec, [init], b)[0]


def _in_child(side_label: str) -> bool:
    base = sides.split(side_label)[0]
    return base in interpreters.OWN_ENVIRONMENTS or sides.in_child(side_label)


def run_sides(
    framework: str, spec: sides.Spec, starts: list[list[Tensor]], b: data.ArrayBatches
) -> list[sides.Side]:
    """``framework``'s side from each of ``starts``: one after another in this process, or
    in one child process of the framework's own environment, which pays its start-up
    (seconds for MXNet) once."""
    if not _in_child(framework):
        return [run_side(framework, spec, start, b) for start in starts]
    base = sides.split(framework)[0]
    own = base in interpreters.OWN_ENVIRONMENTS
    problem = interpreters.problem(base) if own else ""
    if problem:
        raise RuntimeError(problem)
    with tempfile.TemporaryDirectory(prefix="bench-parity-") as tmp:
        files = []
        for i, start in enumerate(starts):
            request, result = str(Path(tmp, f"request{i}.npz")), str(Path(tmp, f"result{i}.npz"))
            sides.write_request(request, framework, spec, start, b)
            files += [request, result]
        env = interpreters.child_env()
        done = subprocess.run(
            [
                interpreters.python_for(base) if own else sys.executable,
                "-m",
                "bench.trial.parity",
                *files,
            ],  # fmt: skip
            capture_output=True,
            text=True,
            env=env,
            timeout=1800 * len(starts),
        )
        if done.returncode != 0:
            raise RuntimeError(f"{framework}'s side failed:\n{done.stderr[-3000:]}")
        return [sides.read_result(result, framework) for result in files[1::2]]


def norm(arrays: list[np.ndarray]) -> float:
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def layer_of(name: str) -> str:
    """The layer (module) a canonical tensor name belongs to: ``4.bn1.bias`` -> ``4.bn1``."""
    return name.rpartition(".")[0]


def layer_deviation(
    reference: list[Tensor], other: list[Tensor], kind: str
) -> tuple[float | None, str]:
    """The largest ||W - W_ref|| / ||W_ref|| over the layers, each layer's tensors of
    ``kind`` taken together, and that layer's name; (None, "") where there are none.

    A layer, not a tensor: the tensors of a layer act together (BatchNorm's output is
    scale * x_hat + shift, x_hat of unit variance; a dense layer's bias adds to W x), so an
    error in one of them matters against the size of the layer's values, not its own.  A
    BatchNorm shift starts at 0 and moves little: against its own size, rounding noise in
    its update reads as a deviation of 2% to 25% after one ResNet-18 step."""
    layers: dict[str, list[int]] = {}
    for i, t in enumerate(reference):
        if t.kind == kind:
            layers.setdefault(layer_of(t.name), []).append(i)
    worst, where = None, ""
    for layer, index in layers.items():
        d = norm([other[i].value - reference[i].value for i in index]) / max(
            norm([reference[i].value for i in index]), 1e-30
        )
        if worst is None or d > worst or not np.isfinite(d):
            worst, where = d, layer
    return worst, where


def compare(
    reference: sides.Side,
    other: sides.Side,
    init: list[Tensor],
    start: list[Tensor] | None = None,
) -> Deviation:
    """``other`` against ``reference``, both trained from ``init`` (``other`` from ``start``
    where given: the rounding floor's shaken weights, so that its update is the distance it
    travelled itself, not the shake)."""
    start = init if start is None else start
    ref_losses, losses = np.asarray(reference.losses), np.asarray(other.losses)
    loss = float(np.max(np.abs(losses - ref_losses) / np.maximum(np.abs(ref_losses), 1e-12)))
    params = [i for i, t in enumerate(reference.weights) if t.kind == PARAM]
    travelled = [reference.weights[i].value - init[i].value for i in params]
    own = [other.weights[i].value - start[i].value for i in params]
    length = max(norm(travelled), 1e-30)
    update = norm([o - r for o, r in zip(own, travelled, strict=True)]) / length
    along = sum(
        float(np.sum(o.astype(np.float64) * r)) for o, r in zip(own, travelled, strict=True)
    )
    scale = abs(1.0 - along / length**2)
    weights, worst = layer_deviation(reference.weights, other.weights, PARAM)
    buffers, _ = layer_deviation(reference.weights, other.weights, BUFFER)
    return Deviation(other.framework, loss, update, scale, weights or 0.0, buffers, worst)


def limits(floor: Deviation, tolerance: float) -> dict[str, float]:
    """Each figure's limit: the tolerance, or ``FLOOR_MULTIPLE`` times the floor's figure
    where that is larger."""
    return {k: max(tolerance, FLOOR_MULTIPLE * v) for k, v in floor.figures().items()}


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
    shakes: int = 1  # how many one-ulp shakes the floor is the worst of

    @property
    def limits(self) -> dict[str, float]:
        return limits(self.floor, self.tolerance)

    @property
    def rounding_dominates(self) -> list[str]:
        """The figures in which rounding alone (the floor) exceeds the tolerance."""
        return [k for k, v in self.floor.figures().items() if not v <= self.tolerance]

    @property
    def passed(self) -> bool:
        ok = all(d.passed(self.limits) for d in self.deviations)
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
# At the steps compared the floor is also the verdict's yardstick, so it is sampled more:
# the worst of this many shakes, in opposite pairs, and, before any side is called FAILED,
# of MAX_SHAKES.  One step of ResNet-18 has a few ReLU inputs within rounding of
# zero; a shake that tips one over moves the whole backward pass (the update by 1e-3 to 2e-2
# under SGD, 7e-3 to 0.13 under Adam, whose first step is about lr * sign(gradient)), one
# that does not by 6e-6 (SGD; 1e-3 under Adam).  A shake and its opposite move such an
# input in opposite directions, so one of a pair tips it where either can; of 6 random
# pairs, 3 tipped one.
# Another framework's rounding tips one or not in the same way: the more pairs the floor
# takes, the less likely that it tips one the floor missed.
ROUNDING_SHAKES = 4
MAX_SHAKES = 12


def shaken(init: list[Tensor], seed: int, shake: int = 0) -> list[Tensor]:
    """``init`` with each value moved by one float32 ulp up or down, at random: shakes
    ``2k`` and ``2k + 1`` are opposite (each value moved the other way)."""
    rng = np.random.default_rng(seed + 1 + shake // 2)
    out = []
    for t in init:
        up = (rng.random(t.value.shape) < 0.5) ^ bool(shake % 2)
        toward = np.where(up, np.float32(np.inf), np.float32(-np.inf))
        out.append(Tensor(t.name, t.kind, np.nextafter(t.value, toward).astype(np.float32)))
    return out


def check(spec: sides.Spec, frameworks: list[str], tolerance: float = DEFAULT_TOLERANCE) -> Outcome:
    """Run every framework's side from the same start; compare each with the first.

    First the reference runs again from weights one rounding step away (the floor): where
    that alone moves its trajectory by more than ``FLOOR_SHARE * tolerance`` (deep networks
    with BatchNorm on random data are chaotic: ResNet-18 is, within 10 steps), the
    comparison is made over the longest prefix of steps where it does not, and says so.  At
    the steps compared the floor is the worst of ``ROUNDING_SHAKES`` shakes (more before a
    side fails: :func:`settle`), and a side passes within the tolerance or
    ``FLOOR_MULTIPLE`` times the floor.
    """
    import time

    started = time.perf_counter()
    run_spec, reference, floor, shakes, init, run_batches = horizon(spec, frameworks[0], tolerance)
    done = [reference] + [run_side(fw, run_spec, init, run_batches) for fw in frameworks[1:]]
    deviations = [compare(reference, other, init) for other in done[1:]]
    floor, shakes = settle(
        frameworks[0], run_spec, reference, init, run_batches, floor, shakes, deviations, tolerance
    )
    return Outcome(
        run_spec,
        done,
        deviations,
        tolerance,
        time.perf_counter() - started,
        floor,
        spec.steps,
        shakes=shakes,
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


def _figures(d: Deviation) -> list[str]:
    return ["-" if getattr(d, name) is None else f"{getattr(d, name):.2e}" for name in FIGURES]


def _verdict(d: Deviation, outcome: Outcome) -> str:
    if not d.passed(outcome.limits):
        return "FAILED"
    return "passed" if d.passed(outcome.tolerance) else "passed, at the floor"


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
    limits, dominated = outcome.limits, outcome.rounding_dominates
    if dominated:
        which = ", ".join(f"{FIGURES[k]} {getattr(outcome.floor, k):.2e}" for k in dominated)
        lines.append(
            f"rounding dominates at this tolerance on this machine: {names[0]} against itself "
            f"from initial weights one float32 ulp away (the worst of {outcome.shakes} such "
            f"shakes) already deviates by more than {outcome.tolerance:g} ({which}); those "
            f"figures are compared with {FLOOR_MULTIPLE:g} times the floor instead (see the "
            "'limit' row)"
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
    rows = [[f"{names[0]} vs itself, 1 ulp off", *_figures(outcome.floor), "rounding"]]
    raised = [k for k, v in limits.items() if v > outcome.tolerance]
    if raised:
        rows.append(
            [
                f"limit ({FLOOR_MULTIPLE:g}x floor, at least {outcome.tolerance:g})",
                *[f"{limits[k]:.2e}" if k in limits else "-" for k in FIGURES],
                "",
            ]
        )
    for d in outcome.deviations:
        rows.append([f"{d.framework} vs {names[0]}", *_figures(d), _verdict(d, outcome)])
    if outcome.replicas_apart is not None:
        apart = outcome.replicas_apart
        ok = apart <= outcome.tolerance
        rows.append(["workers' weights apart", "-", "-", "-", f"{apart:.2e}", "-",
                     "passed" if ok else "FAILED"])  # fmt: skip
    header = ["relative deviation", *FIGURES.values(), ""]
    lines.append(text_table(header, rows))
    verdict = "passed" if outcome.passed else "FAILED"
    rule = f"every deviation must be at most {outcome.tolerance:g}"
    if raised:
        rule += (
            f", or {FLOOR_MULTIPLE:g} times the rounding floor where that is larger ("
            + ", ".join(f"{FIGURES[k]} {limits[k]:.2e}" for k in raised)
            + ")"
        )
    lines.append("")
    lines.append(f"{verdict}: {rule} ({outcome.seconds:.1f} s)")
    return "\n".join(lines)


def worse(a: Deviation, b: Deviation) -> Deviation:
    """Each figure the larger of ``a``'s and ``b``'s."""
    buffers = None if a.buffers is None or b.buffers is None else max(a.buffers, b.buffers)
    return Deviation(
        a.framework,
        max(a.loss, b.loss),
        max(a.update, b.update),
        max(a.scale, b.scale),
        max(a.weights, b.weights),
        buffers,
        a.worst if a.weights >= b.weights else b.worst,
    )


def _shakes(
    framework: str,
    spec: sides.Spec,
    reference: sides.Side,
    init: list[Tensor],
    b: data.ArrayBatches,
    shakes: range,
    stop_above: float | None = None,
) -> list[tuple[Deviation, sides.Side]]:
    """``reference``'s framework run again from each of ``shakes`` (:func:`shaken`), each
    compared with ``reference``: all at once, or one at a time until the worst exceeds
    ``stop_above``."""
    starts = [shaken(init, spec.seed, k) for k in shakes]
    if stop_above is None:
        done = run_sides(framework, spec, starts, b)
        return [(compare(reference, a, init, s), a) for s, a in zip(starts, done, strict=True)]
    runs: list[tuple[Deviation, sides.Side]] = []
    for start in starts:
        if runs and not _worst(runs).passed(stop_above):
            break
        again = run_side(framework, spec, start, b)
        runs.append((compare(reference, again, init, start), again))
    return runs


def _worst(runs: list[tuple[Deviation, sides.Side]]) -> Deviation:
    return functools.reduce(worse, [d for d, _ in runs])


def settle(
    framework: str,
    spec: sides.Spec,
    reference: sides.Side,
    init: list[Tensor],
    b: data.ArrayBatches,
    floor: Deviation,
    shakes: int,
    deviations: list[Deviation],
    tolerance: float,
) -> tuple[Deviation, int]:
    """The floor and its number of shakes; where a side is beyond its limits, the worst of
    ``MAX_SHAKES`` instead: before a side is called FAILED, the floor has had every chance to
    show that rounding explains it."""
    if shakes >= MAX_SHAKES or all(d.passed(limits(floor, tolerance)) for d in deviations):
        return floor, shakes
    runs = _shakes(framework, spec, reference, init, b, range(shakes, MAX_SHAKES))
    return functools.reduce(worse, [d for d, _ in runs], floor), shakes + len(runs)


def horizon(
    spec: sides.Spec, framework: str, tolerance: float
) -> tuple[sides.Spec, sides.Side, Deviation, int, list[Tensor], data.ArrayBatches]:
    """The reference side over the longest prefix of ``spec.steps`` that rounding does not
    decide (see :func:`check`), with its floor, the number of shakes the floor is the worst
    of, the initial weights and the batches."""
    import dataclasses

    init, b = initial_weights(spec), batches(spec)
    limit = FLOOR_SHARE * tolerance
    steps = spec.steps
    while True:
        run_spec = dataclasses.replace(spec, steps=steps)
        run_batches = data.ArrayBatches(b.images[:steps], b.labels[:steps])
        reference = run_side(framework, run_spec, init, run_batches)
        runs = _shakes(framework, run_spec, reference, init, run_batches, range(SHAKES), limit)
        passed = _worst(runs).passed(limit)
        if passed or steps == 1:
            more = range(len(runs), ROUNDING_SHAKES)  # the verdict's yardstick: see above
            runs += _shakes(framework, run_spec, reference, init, run_batches, more)
            return run_spec, reference, _worst(runs), len(runs), init, run_batches
        off = [
            abs(a - r) / max(abs(r), 1e-12)
            for a, r in zip(runs[0][1].losses, reference.losses, strict=True)
        ]
        within = next((i for i, d in enumerate(off) if d > limit), len(off))
        steps = max(1, min(within, steps // 2))  # each try costs its steps: halve
