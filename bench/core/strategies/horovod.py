"""``distributed=horovod``: Horovod 0.28.1 by horovodrun (:mod:`bench.trial.distributed.horovod`):
its facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TF, TORCH
from bench.core.strategies.base import DistributedConfig


@dataclass
class HorovodConfig(DistributedConfig):
    name: str = "horovod"
    what: ClassVar[str] = "Horovod, horovodrun"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH, TF)
    module: ClassVar[str] = "bench.trial.distributed.horovod"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TORCH, TF)
    pinned_version_only: ClassVar[bool] = True
    built_by_setup: ClassVar[str] = "horovod"  # bench setup horovod: about 13 min on 2 cores
    multi_node: ClassVar[bool] = True
