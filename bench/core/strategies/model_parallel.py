"""``distributed=model_parallel``: the model split into two stages on two devices
(:mod:`bench.trial.distributed.model_parallel`): its facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TF, TORCH
from bench.core.strategies.base import DistributedConfig


@dataclass
class ModelParallelConfig(DistributedConfig):
    name: str = "model_parallel"
    what: ClassVar[str] = "two model stages on two devices"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH, TF)
    module: ClassVar[str] = "bench.trial.distributed.model_parallel"
    runner: ClassVar[str] = "coordinator"
    gpu_only: ClassVar[tuple[str, ...]] = (TORCH,)
    whole_batch: ClassVar[bool] = True
    stages: ClassVar[int] = 2
    parity: ClassVar[tuple[str, ...]] = (TF,)
