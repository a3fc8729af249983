"""Faults the convergence check injects into one framework's trials (the ``fault`` trial
hook, :mod:`bench.trial.runtime.hooks`), to prove that it sees a framework that does not train
alike (:mod:`bench.parity.convergence`; docs/accuracy.md).  Never in a normal trial: only a
hooks file names one, and a run with one is tagged ``bench.hooks=fault=<name>``.

* ``half_lr``: the optimizer's learning rate halved (a mis-scaled learning rate).
* ``label_smoothing``: the training loss smooths its targets by 0.1 (one framework's loss
  with a default the others lack); torch sessions only.
* ``broken_augmentation``: the training images reach the model transposed, height and
  width swapped (an augmentation that reads NHWC as NWHC); the held-out split is untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.core.config import BenchConfig
from bench.trial.data import LabelledData

FAULTS = ("half_lr", "label_smoothing", "broken_augmentation")
SMOOTHING = 0.1


def check(fault: str) -> None:
    if fault and fault not in FAULTS:
        raise ValueError(f"fault: {fault!r} is not one of {', '.join(FAULTS)}")


def config(fault: str, cfg: BenchConfig) -> BenchConfig:
    """The trial's config under ``fault`` (before the framework builds anything)."""
    check(fault)
    if fault == "half_lr":
        return dataclasses.replace(
            cfg, optimizer=dataclasses.replace(cfg.optimizer, lr=cfg.optimizer.lr / 2)
        )
    return cfg


def data(fault: str, host: Any) -> Any:
    """The trial's host data under ``fault``."""
    if fault == "broken_augmentation":
        if not isinstance(host, LabelledData):
            raise TypeError("fault broken_augmentation: needs a labelled data set")
        swapped = host.train_x.transpose(0, 2, 1, 3).copy()
        return dataclasses.replace(host, train_x=swapped)
    return host


def session(fault: str, built: Any) -> None:
    """Change the built session under ``fault`` (before its first step)."""
    if fault != "label_smoothing":
        return
    if not type(getattr(built, "loss_fn", None)).__module__.startswith("torch."):
        raise ValueError("fault label_smoothing: injected in torch sessions only")
    import torch

    built.loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=SMOOTHING)
