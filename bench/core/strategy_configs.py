"""The options of the config group ``distributed``: one typed config per training strategy,
each holding that strategy's own settings (rules only: :func:`bench.core.config.check` checks
their choices, :mod:`bench.distributed.registry` the rest; the implementations live in
:mod:`bench.distributed`).  Part of the core config: the trial side reads its strategy's
facts here (``per_device``, ``kvstore``) and never imports bench.distributed.  This module
imports nothing of bench."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass
class DistributedConfig:
    """``distributed=NAME``: the training strategy, a config group with one typed config per
    strategy (below), each holding that strategy's own settings (``distributed.backend=gloo``
    with ``distributed=ddp``).  The sizes every strategy shares stay top-level keys
    (``workers``, ``nodes``, ``ps``).  What a strategy is and how it runs:
    :mod:`bench.distributed.registry`; its rules: that registry's ``check``."""

    name: str = "none"
    # Facts of the strategy (not settings: not composed, not logged), for the trial side,
    # which imports nothing of bench.distributed.
    per_device: ClassVar[bool] = False  # the workers are devices of one process
    kvstore: ClassVar[str] = ""  # the MXNet kvstore type it trains through ("": none)

    def settings(self) -> dict[str, Any]:
        """The strategy's own settings (every field but ``name``)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}


@dataclass
class DataParallelConfig(DistributedConfig):
    name: str = "dp"


@dataclass
class DDPConfig(DistributedConfig):
    name: str = "ddp"
    # The process group's backend: auto (nccl on GPUs, gloo on the CPU) | gloo | nccl.
    backend: str = "auto"


@dataclass
class MirroredConfig(DistributedConfig):
    name: str = "mirrored"
    # How the replicas' gradients are summed: auto (NCCL on GPUs, one device on the CPU) |
    # nccl | hierarchical_copy (GPUs) | one_device (reduce on one device, broadcast).
    all_reduce: str = "auto"


@dataclass
class MultiWorkerConfig(DistributedConfig):
    name: str = "multiworker"
    # The collectives' implementation: auto (NCCL on GPUs, ring on the CPU) | ring | nccl.
    communication: str = "auto"


@dataclass
class ParameterServerConfig(DistributedConfig):
    name: str = "ps_async"


@dataclass
class HorovodConfig(DistributedConfig):
    name: str = "horovod"


@dataclass
class ModelParallelConfig(DistributedConfig):
    name: str = "model_parallel"


@dataclass
class KvstoreSyncConfig(DistributedConfig):
    name: str = "kvstore_sync"
    kvstore: ClassVar[str] = "dist_sync"


@dataclass
class KvstoreAsyncConfig(DistributedConfig):
    name: str = "kvstore_async"
    kvstore: ClassVar[str] = "dist_async"


@dataclass
class KvstoreDeviceConfig(DistributedConfig):
    name: str = "kvstore_device"
    per_device: ClassVar[bool] = True
    kvstore: ClassVar[str] = "device"


# The options of the ``distributed`` group (bench.cli registers them), by name.
STRATEGY_CONFIGS: dict[str, type[DistributedConfig]] = {
    cls().name: cls
    for cls in (
        DistributedConfig, DataParallelConfig, DDPConfig, MirroredConfig, MultiWorkerConfig,
        ParameterServerConfig, HorovodConfig, ModelParallelConfig, KvstoreSyncConfig,
        KvstoreAsyncConfig, KvstoreDeviceConfig,
    )
}  # fmt: skip
# Each setting's allowed values (checked by :func:`check`).
STRATEGY_CHOICES: dict[str, tuple[str, ...]] = {
    "backend": ("auto", "gloo", "nccl"),
    "all_reduce": ("auto", "nccl", "hierarchical_copy", "one_device"),
    "communication": ("auto", "ring", "nccl"),
}
