"""The parity check's hook inside a real trial: when the trial's hooks name a parity
folder (:class:`bench.trial.runtime.hooks.TrialHooks`, which ``python -m bench.parity
--distributed`` sets up through the trial folder's ``hooks.json``), the trial trains from
the weights and on the batches found there, with dropout and the per-epoch probes off, and
each process writes back its per-step losses and its weights after the last step.  Without
the hook nothing here runs; a run with it carries the tag ``bench.hooks=parity``.

The folder holds ``init.npz`` (weights in the canonical form of :mod:`.weights`) and
``batches.npz`` (the global batch of every step); a process that steps on ``s`` samples
(:func:`bench.core.config.samples_per_step`) and whose place among the data-parallel processes
is ``index`` takes samples ``[index * s, (index + 1) * s)`` of each, so that W processes at
batch B/W see exactly the samples one process sees at batch B.  A process that steps on
several devices at once (``kvstore_device``: one host batch per device) gets its share cut
into one batch per device, in device order.  It writes ``rank<index>.npz``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.config import BenchConfig, samples_per_step
from bench.trial.data import ArrayBatches
from bench.trial.frameworks import weights


def save_tensors(path: Path, tensors: list[weights.Tensor], **extra: np.ndarray) -> None:
    arrays = {f"w{i:04d}": t.value for i, t in enumerate(tensors)}
    arrays["names"] = np.array(json.dumps([[t.name, t.kind] for t in tensors]))
    arrays.update(extra)
    np.savez(path, **arrays)  # type: ignore[arg-type]


def load_tensors(path: Path) -> tuple[list[weights.Tensor], dict[str, np.ndarray]]:
    """What :func:`save_tensors` wrote: the tensors, and the other members by name."""
    with np.load(path) as saved:
        names = json.loads(str(saved["names"]))
        tensors = [weights.Tensor(n, k, saved[f"w{i:04d}"]) for i, (n, k) in enumerate(names)]
        extra = {k: saved[k] for k in saved.files if not k.startswith("w") and k != "names"}
    return tensors, extra


def batch_arrays(b: ArrayBatches) -> dict[str, np.ndarray]:
    """Every step's batch as .npz members (``x0000``, ``y0000``, ...)."""
    arrays = {f"x{i:04d}": x for i, x in enumerate(b.images)}
    arrays.update({f"y{i:04d}": y for i, y in enumerate(b.labels)})
    return arrays


def read_batches(saved: Any) -> ArrayBatches:
    """The batches :func:`batch_arrays` wrote, from an open .npz or a dict of its members."""
    steps = len([k for k in saved if k.startswith("x")])
    return ArrayBatches(
        [saved[f"x{i:04d}"] for i in range(steps)], [saved[f"y{i:04d}"] for i in range(steps)]
    )


def batches(where: Path, cfg: BenchConfig, index: int) -> ArrayBatches:
    """This process's share of every step's global batch, one batch per device it steps."""
    b, s = cfg.batch_size, samples_per_step(cfg)
    with np.load(where / "batches.npz") as saved:
        whole = read_batches(saved)
    if (index + 1) * s > len(whole.images[0]):
        raise RuntimeError(
            f"parity: process {index} at {s} samples per step needs {(index + 1) * s}; "
            f"the global batch has {len(whole.images[0])}"
        )
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for x, y in zip(whole.images, whole.labels, strict=True):
        for start in range(index * s, (index + 1) * s, b):
            xs.append(x[start : start + b])
            ys.append(y[start : start + b])
    return ArrayBatches(xs, ys)


def start(where: Path, framework: str, session: Any) -> None:
    """Give the session's model the reference's initial weights; dropout off."""
    init, _ = load_tensors(where / "init.npz")
    weights.load(framework, session, init)
    weights.disable_dropout(framework, session)


def finish(where: Path, framework: str, session: Any, losses: list[float], index: int) -> None:
    session.sync()
    weights.settle(framework, session)
    save_tensors(
        where / f"rank{index}.npz",
        weights.export(framework, session),
        losses=np.asarray(losses, dtype=np.float64),
    )
