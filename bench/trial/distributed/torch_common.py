"""PyTorch pieces shared by ddp, horovod and dp: a communication-free reference step."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from bench.trial.frameworks.torch_adapter import TorchSession


def local_step(session: TorchSession) -> Callable[[Any], None]:
    """A training step on a private copy of the session's model and optimizer: the same
    arithmetic as the distributed step with no communication.  Make it before the model
    or optimizer is wrapped (the wrappers' gradient hooks would follow a shared model)."""
    model = copy.deepcopy(session.model)
    optimizer = type(session.optimizer)(model.parameters(), **session.optimizer.defaults)
    loss_fn = session.loss_fn

    def step(batch: Any) -> None:
        x, y = batch
        optimizer.zero_grad(set_to_none=True)
        with session._autocast():
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        session.sync()

    return step


def cuda_device(gpu: bool, local_rank: int) -> None:
    if gpu:
        torch.cuda.set_device(local_rank)
