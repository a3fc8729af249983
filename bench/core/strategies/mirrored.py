"""``distributed=mirrored``: tf MirroredStrategy, ``workers`` replicas in one process
(:mod:`bench.trial.distributed.mirrored`): its settings and facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TF
from bench.core.strategies.base import DistributedConfig


@dataclass
class MirroredConfig(DistributedConfig):
    name: str = "mirrored"
    what: ClassVar[str] = "tf MirroredStrategy"
    frameworks: ClassVar[tuple[str, ...]] = (TF,)
    module: ClassVar[str] = "bench.trial.distributed.mirrored"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TF,)
    # How the replicas' gradients are summed: auto (NCCL on GPUs, one device on the CPU) |
    # nccl | hierarchical_copy (GPUs) | one_device (reduce on one device, broadcast).
    all_reduce: str = "auto"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {
        "all_reduce": ("auto", "nccl", "hierarchical_copy", "one_device")
    }
