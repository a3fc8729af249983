"""``distributed=dp``: torch ``nn.DataParallel`` over GPUs in one process
(:mod:`bench.trial.distributed.dp`): its facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TORCH
from bench.core.strategies.base import DistributedConfig


@dataclass
class DataParallelConfig(DistributedConfig):
    name: str = "dp"
    what: ClassVar[str] = "torch.nn.DataParallel (GPUs)"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH,)
    module: ClassVar[str] = "bench.trial.distributed.dp"
    runner: ClassVar[str] = "coordinator"
    gpu_only: ClassVar[tuple[str, ...]] = (TORCH,)
