"""The options of the config group ``distributed``: one typed config per training strategy,
each the one place of that strategy's facts: its own settings (fields: composed, logged,
hashed), and what it is (class variables: which frameworks have it, how it runs, whether
it needs GPUs, splits the model, updates asynchronously, which frameworks the parity check
covers).  Rules only: :func:`bench.core.config.check` checks the settings' choices,
:mod:`bench.distributed.registry` (which is assembled from these classes) the rest; the
implementations live in :mod:`bench.distributed`, named here by module.  Part of the core
config: the trial side reads its strategy's facts from ``cfg.distributed`` and never imports
bench.distributed.  This module imports nothing of bench outside the core."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.core.frameworks import MXNET, NAMES, TF, TORCH


@dataclass
class DistributedConfig:
    """``distributed=NAME``: the training strategy, a config group with one typed config per
    strategy (below), each holding that strategy's own settings (``distributed.backend=gloo``
    with ``distributed=ddp``).  The sizes every strategy shares stay top-level keys
    (``workers``, ``nodes``, ``ps``).  What a strategy is and how it runs:
    :mod:`bench.distributed.registry`; its rules: that registry's ``check``."""

    name: str = "none"
    # Facts of the strategy (not settings: not composed, not logged, not hashed).
    what: ClassVar[str] = "one process, no distribution"
    frameworks: ClassVar[tuple[str, ...]] = NAMES  # the frameworks that have it
    # Its implementation (bench.distributed's module with its STRATEGY; '': none).
    module: ClassVar[str] = ""
    # How the trial runs: "coordinator" (rank processes, bench.distributed.coordinator),
    # "kvstore" (MXNet's scheduler, servers and workers, bench.distributed.kvstore) or
    # "local" (one process).
    runner: ClassVar[str] = "local"
    # Frameworks whose implementation of it needs CUDA devices (at least 2): a cell that
    # asks for it where there are fewer cannot run on that machine (bench.checks).
    gpu_only: ClassVar[tuple[str, ...]] = ()
    # Every worker (stage) sees the whole batch: the model is split, not the data; its
    # stages (the workers it needs: 0, any number).
    whole_batch: ClassVar[bool] = False
    stages: ClassVar[int] = 0
    # Each worker's update is applied on its own, from possibly stale weights.
    asynchronous: ClassVar[bool] = False
    # Frameworks in which the training parity check runs it on the CPU (bench.parity).
    parity: ClassVar[tuple[str, ...]] = ()
    # Built against the pinned framework version only (Horovod's build).
    pinned_version_only: ClassVar[bool] = False
    # It trains through parameter servers (``ps``: 0 means one per node).
    parameter_servers: ClassVar[bool] = False
    # It runs across the nodes of a Slurm allocation (nodes > 1, bench.distributed.nodes).
    multi_node: ClassVar[bool] = False
    per_device: ClassVar[bool] = False  # the workers are devices of one process
    kvstore: ClassVar[str] = ""  # the MXNet kvstore type it trains through ("": none)

    def settings(self) -> dict[str, Any]:
        """The strategy's own settings (every field but ``name``)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}


@dataclass
class DataParallelConfig(DistributedConfig):
    name: str = "dp"
    what: ClassVar[str] = "torch.nn.DataParallel (GPUs)"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH,)
    module: ClassVar[str] = "bench.distributed.dp"
    runner: ClassVar[str] = "coordinator"
    gpu_only: ClassVar[tuple[str, ...]] = (TORCH,)


@dataclass
class DDPConfig(DistributedConfig):
    name: str = "ddp"
    what: ClassVar[str] = "DistributedDataParallel, torchrun"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH,)
    module: ClassVar[str] = "bench.distributed.ddp"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TORCH,)
    multi_node: ClassVar[bool] = True
    # The process group's backend: auto (nccl on GPUs, gloo on the CPU) | gloo | nccl.
    backend: str = "auto"


@dataclass
class MirroredConfig(DistributedConfig):
    name: str = "mirrored"
    what: ClassVar[str] = "tf MirroredStrategy"
    frameworks: ClassVar[tuple[str, ...]] = (TF,)
    module: ClassVar[str] = "bench.distributed.mirrored"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TF,)
    # How the replicas' gradients are summed: auto (NCCL on GPUs, one device on the CPU) |
    # nccl | hierarchical_copy (GPUs) | one_device (reduce on one device, broadcast).
    all_reduce: str = "auto"


@dataclass
class MultiWorkerConfig(DistributedConfig):
    name: str = "multiworker"
    what: ClassVar[str] = "tf MultiWorkerMirroredStrategy, TF_CONFIG"
    frameworks: ClassVar[tuple[str, ...]] = (TF,)
    module: ClassVar[str] = "bench.distributed.multiworker"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TF,)
    multi_node: ClassVar[bool] = True
    # The collectives' implementation: auto (NCCL on GPUs, ring on the CPU) | ring | nccl.
    communication: str = "auto"


@dataclass
class ParameterServerConfig(DistributedConfig):
    name: str = "ps_async"
    what: ClassVar[str] = "tf ParameterServerStrategy (asynchronous)"
    frameworks: ClassVar[tuple[str, ...]] = (TF,)
    module: ClassVar[str] = "bench.distributed.ps_async"
    runner: ClassVar[str] = "coordinator"
    asynchronous: ClassVar[bool] = True
    parameter_servers: ClassVar[bool] = True
    multi_node: ClassVar[bool] = True


@dataclass
class HorovodConfig(DistributedConfig):
    name: str = "horovod"
    what: ClassVar[str] = "Horovod, horovodrun"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH, TF)
    module: ClassVar[str] = "bench.distributed.horovod"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (TORCH, TF)
    pinned_version_only: ClassVar[bool] = True
    multi_node: ClassVar[bool] = True


@dataclass
class ModelParallelConfig(DistributedConfig):
    name: str = "model_parallel"
    what: ClassVar[str] = "two model stages on two devices"
    frameworks: ClassVar[tuple[str, ...]] = (TORCH, TF)
    module: ClassVar[str] = "bench.distributed.model_parallel"
    runner: ClassVar[str] = "coordinator"
    gpu_only: ClassVar[tuple[str, ...]] = (TORCH,)
    whole_batch: ClassVar[bool] = True
    stages: ClassVar[int] = 2
    parity: ClassVar[tuple[str, ...]] = (TF,)


@dataclass
class KvstoreSyncConfig(DistributedConfig):
    name: str = "kvstore_sync"
    what: ClassVar[str] = "MXNet kvstore dist_sync: scheduler, ps servers, workers"
    frameworks: ClassVar[tuple[str, ...]] = (MXNET,)
    runner: ClassVar[str] = "kvstore"
    parity: ClassVar[tuple[str, ...]] = (MXNET,)
    parameter_servers: ClassVar[bool] = True
    kvstore: ClassVar[str] = "dist_sync"


@dataclass
class KvstoreAsyncConfig(DistributedConfig):
    name: str = "kvstore_async"
    what: ClassVar[str] = "MXNet kvstore dist_async: scheduler, ps servers, workers"
    frameworks: ClassVar[tuple[str, ...]] = (MXNET,)
    runner: ClassVar[str] = "kvstore"
    asynchronous: ClassVar[bool] = True
    parity: ClassVar[tuple[str, ...]] = (MXNET,)
    parameter_servers: ClassVar[bool] = True
    kvstore: ClassVar[str] = "dist_async"


@dataclass
class KvstoreDeviceConfig(DistributedConfig):
    name: str = "kvstore_device"
    what: ClassVar[str] = "MXNet kvstore device: one process reducing over devices"
    frameworks: ClassVar[tuple[str, ...]] = (MXNET,)
    parity: ClassVar[tuple[str, ...]] = (MXNET,)
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
