"""``distributed=multiworker``: tf MultiWorkerMirroredStrategy, one process per worker
(:mod:`bench.trial.distributed.multiworker`): its settings and facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TF
from bench.core.strategies.base import DistributedConfig


@dataclass
class MultiWorkerConfig(DistributedConfig):
    name: str = "multiworker"
    what: ClassVar[str] = "tf MultiWorkerMirroredStrategy, TF_CONFIG"
    frameworks: ClassVar[tuple[str, ...]] = (TF,)
    module: ClassVar[str] = "bench.trial.distributed.multiworker"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TF,)
    multi_node: ClassVar[bool] = True
    # The collectives' implementation: auto (NCCL on GPUs, ring on the CPU) | ring | nccl.
    communication: str = "auto"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"communication": ("auto", "ring", "nccl")}
