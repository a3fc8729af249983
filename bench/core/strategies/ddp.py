"""``distributed=ddp``: torch DistributedDataParallel by torchrun
(:mod:`bench.trial.distributed.ddp`): its settings and facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TORCH
from bench.core.strategies.base import DistributedConfig


@dataclass
class DDPConfig(DistributedConfig):
    name: str = "ddp"
    what: ClassVar[str] = "DistributedDataParallel, torchrun"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH,)
    module: ClassVar[str] = "bench.trial.distributed.ddp"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TORCH,)
    multi_node: ClassVar[bool] = True
    # The process group's backend: auto (nccl on GPUs, gloo on the CPU) | gloo | nccl.
    backend: str = "auto"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"backend": ("auto", "gloo", "nccl")}
