"""``distributed=multiworker``: tf MultiWorkerMirroredStrategy, one process per worker.

Each process is told its place by ``TF_CONFIG`` (a cluster of ``workers`` tasks on loopback
ports; across nodes, ``workers`` tasks on each node's address); gradients are all-reduced by
TensorFlow's collectives (ring on the CPU, NCCL on GPUs) with a timeout well below the
trial's, so a dead or hung peer fails the others. Each worker trains ``batch_size`` samples
per step on its own shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.config import BenchConfig
from bench.core.strategies.multiworker import MultiWorkerConfig
from bench.trial.distributed.base import (
    ENV_RANK,
    Proc,
    Rank,
    env_rank,
    local_rank,
    node_ranks,
    per_rank,
)
from bench.trial.distributed.common import tf_config
from bench.trial.runtime.processes import free_port

if TYPE_CHECKING:
    from bench.trial.distributed.base import Cluster


class MultiWorker:
    name = "multiworker"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        from bench.trial.distributed.common import tf_checks

        problems = tf_checks(cfg)
        if gpu and cfg.workers > gpus:
            problems.append(
                f"workers: multiworker on GPUs runs one worker per GPU; {gpus} visible, "
                f"got workers={cfg.workers}"
            )
        assert isinstance(cfg.distributed, MultiWorkerConfig)
        if cfg.distributed.communication == "nccl" and not gpu:
            problems.append(
                "distributed.communication: nccl needs CUDA devices; use ring (or auto) on the CPU"
            )
        return problems

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(cfg.workers)]}
        procs = per_rank(cfg, cfg.workers)
        for i, p in enumerate(procs):
            p.env["TF_CONFIG"] = tf_config(cluster, "worker", i)
        return procs

    def ports_per_node(self, cfg: BenchConfig, node: int) -> int:
        return cfg.workers

    def node_processes(
        self, cfg: BenchConfig, workdir: Path, cluster: Cluster, node: int
    ) -> list[Proc]:
        workers = {"worker": cluster.endpoints(cfg.workers)}
        procs = node_ranks(cfg, node)
        for p in procs:
            p.env["TF_CONFIG"] = tf_config(workers, "worker", int(p.env[ENV_RANK]))
        return procs

    def rank(self, cfg: BenchConfig) -> Rank:
        return env_rank()

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import tensorflow as tf

        from bench.trial.distributed.base import collective_timeout_s
        from bench.trial.distributed.tf_common import WorkerSession

        gpus = tf.config.list_physical_devices("GPU")
        gpu = bool(gpus) and cfg.device != "cpu"
        if gpu:
            tf.config.set_visible_devices(gpus[local_rank(rank)], "GPU")
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=_communication(cfg, gpu),
            timeout_seconds=collective_timeout_s(cfg),
        )
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        return WorkerSession(strategy, cfg, data, cfg.batch_size, rank.index, rank.world, gpu)


def _communication(cfg: BenchConfig, gpu: bool) -> Any:
    """The collectives' implementation of ``distributed.communication``: auto is NCCL on GPUs
    and ring on the CPU."""
    import tensorflow as tf

    assert isinstance(cfg.distributed, MultiWorkerConfig)
    chosen = cfg.distributed.communication
    if chosen == "auto":
        chosen = "nccl" if gpu else "ring"
    impl = tf.distribute.experimental.CommunicationImplementation
    return impl.NCCL if chosen == "nccl" else impl.RING


STRATEGY = MultiWorker()
