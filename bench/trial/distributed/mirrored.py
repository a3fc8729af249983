"""``distributed=mirrored``: tf MirroredStrategy, ``workers`` replicas in one process.

On GPUs one replica per GPU (NCCL all-reduce); on the CPU ``workers`` logical CPU devices,
a stand-in the issue accepts as faithful for the strategy's mechanics (variables mirrored
per device, gradients all-reduced every step), though the devices share the cores.  One step
trains ``workers x batch_size`` samples; each replica's rate is the process's rate split
evenly (the replicas step in lockstep).
"""

from __future__ import annotations

from typing import Any

from bench.core.config import BenchConfig
from bench.core.strategies.mirrored import MirroredConfig
from bench.trial.distributed.base import OneProcess, Rank
from bench.trial.distributed.common import tf_checks


class Mirrored(OneProcess):
    name = "mirrored"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        problems = tf_checks(cfg)
        if gpu and cfg.workers > gpus:
            problems.append(
                f"workers: mirrored on GPUs puts one replica on each GPU; {gpus} visible, "
                f"got workers={cfg.workers}"
            )
        assert isinstance(cfg.distributed, MirroredConfig)
        if cfg.distributed.all_reduce in ("nccl", "hierarchical_copy") and not gpu:
            problems.append(
                f"distributed.all_reduce: {cfg.distributed.all_reduce} sums over GPUs; on the "
                "CPU use one_device (or auto)"
            )
        return problems

    def step_batches(self, cfg: BenchConfig) -> int:
        return cfg.workers

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import tensorflow as tf

        from bench.trial.distributed.tf_common import StrategySession

        gpu = bool(tf.config.list_physical_devices("GPU")) and cfg.device != "cpu"
        workers = cfg.workers
        per_replica = cfg.batch_size // workers  # the rank's batch_size covers every replica
        if gpu:
            devices = [f"/gpu:{i}" for i in range(workers)]
        else:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(workers)]
            )
            devices = [f"/cpu:{i}" for i in range(workers)]
        strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=_all_reduce(cfg, gpu))
        return StrategySession(strategy, cfg, data, per_replica, 0, 1, gpu)


def _all_reduce(cfg: BenchConfig, gpu: bool) -> Any:
    """The ``cross_device_ops`` of ``distributed.all_reduce``: auto is TensorFlow's own
    choice on GPUs (NCCL where it can) and one device on the CPU."""
    import tensorflow as tf

    assert isinstance(cfg.distributed, MirroredConfig)
    chosen = cfg.distributed.all_reduce
    if chosen == "auto":
        return None if gpu else tf.distribute.ReductionToOneDevice()
    return {
        "nccl": tf.distribute.NcclAllReduce,
        "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
        "one_device": tf.distribute.ReductionToOneDevice,
    }[chosen]()


STRATEGY = Mirrored()
