"""The options of the config group ``distributed``, by name: one typed config per training
strategy, each in its own module of :mod:`bench.core.strategies` and the one place of that
strategy's facts: its own settings (fields: composed, logged, hashed), and what it is
(class variables: which frameworks have it, how it runs, whether it needs GPUs, splits the
model, updates asynchronously, which frameworks the parity check covers).  Rules only:
:func:`bench.checks.rules.check` checks the settings' choices,
:mod:`bench.trial.distributed.registry` (assembled from this table) the rest; the
implementations live in :mod:`bench.trial.distributed`, named by module.  Part of the core
config: the trial side reads its strategy's facts from ``cfg.distributed`` and never
imports bench.trial.distributed.  This module imports nothing of bench outside the core."""

from __future__ import annotations

from bench.core.strategies.base import DistributedConfig
from bench.core.strategies.ddp import DDPConfig
from bench.core.strategies.dp import DataParallelConfig
from bench.core.strategies.horovod import HorovodConfig
from bench.core.strategies.jax_distributed import JaxDistributedConfig
from bench.core.strategies.jax_dp import JaxDataParallelConfig
from bench.core.strategies.kvstore import KvstoreAsyncConfig, KvstoreDeviceConfig, KvstoreSyncConfig
from bench.core.strategies.mirrored import MirroredConfig
from bench.core.strategies.model_parallel import ModelParallelConfig
from bench.core.strategies.multiworker import MultiWorkerConfig
from bench.core.strategies.ps_async import ParameterServerConfig

# The options of the ``distributed`` group (bench.cli registers them), by name.
STRATEGY_CONFIGS: dict[str, type[DistributedConfig]] = {
    cls().name: cls
    for cls in (
        DistributedConfig, DataParallelConfig, DDPConfig, MirroredConfig, MultiWorkerConfig,
        ParameterServerConfig, HorovodConfig, ModelParallelConfig, KvstoreSyncConfig,
        KvstoreAsyncConfig, KvstoreDeviceConfig, JaxDataParallelConfig, JaxDistributedConfig,
    )
}  # fmt: skip


def replicas(name: str, workers: int, nodes: int) -> int:
    """How many copies of the model one step of strategy ``name`` trains, each on its own
    share of the batch: every worker on every node, or 1 where each worker (stage) sees the
    whole batch (the model split, not the data); an unknown name is no distribution's."""
    whole = STRATEGY_CONFIGS.get(name, DistributedConfig).whole_batch
    return 1 if whole else max(workers, 1) * max(nodes, 1)


# Each setting's allowed values (checked by :func:`bench.checks.rules.check`), from the
# strategies that have it.
STRATEGY_CHOICES: dict[str, tuple[str, ...]] = {
    key: values for cls in STRATEGY_CONFIGS.values() for key, values in cls.choices.items()
}
