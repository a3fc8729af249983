"""``distributed=ddp``: torch DistributedDataParallel, one process per worker, by torchrun.

gloo on the CPU, NCCL on GPUs (one GPU per worker, ``LOCAL_RANK``). Across nodes, one
torchrun per node (static rendezvous; the first node's torchrun hosts the store). The
collective timeout is :func:`~bench.trial.distributed.coordinator.collective_timeout_s`, so a dead
or hung peer makes the others fail well before the trial's deadline. Exposed communication
(``breakdown=true``): a DDP step minus the same step under ``no_sync()`` (no all-reduce).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.config import BenchConfig
from bench.core.strategies.ddp import DDPConfig
from bench.trial.distributed import common
from bench.trial.distributed.base import Proc, Rank

if TYPE_CHECKING:
    from bench.trial.distributed.base import Cluster


def _torchrun(cfg: BenchConfig, workdir: Path, *placement: str) -> list[str]:
    """torchrun starting this node's ``workers`` ranks, placed by ``placement``."""
    return [
        sys.executable, "-m", "torch.distributed.run", *placement,
        f"--nproc-per-node={cfg.workers}", "--max-restarts=0", "--monitor-interval=0.2",
        "-m", "bench.trial.distributed.rank", str(workdir),
    ]  # fmt: skip


class DDP:
    name = "ddp"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        if gpu and cfg.workers > gpus:
            return [
                f"workers: ddp on GPUs runs one worker per GPU; {gpus} visible, "
                f"got workers={cfg.workers}"
            ]
        if backend_of(cfg, gpu) == "nccl" and not gpu:
            return ["distributed.backend: nccl needs CUDA devices; use gloo (or auto) on the CPU"]
        return []

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        return [Proc("torchrun", _torchrun(cfg, workdir, "--standalone"), common.loopback_env())]

    def ports_per_node(self, cfg: BenchConfig, node: int) -> int:
        return 1 if node == 0 else 0  # torchrun's store, on the first node

    def node_processes(
        self, cfg: BenchConfig, workdir: Path, cluster: Cluster, node: int
    ) -> list[Proc]:
        master = cluster.nodes[0]
        placement = [
            f"--nnodes={cluster.size}", f"--node-rank={node}", "--rdzv-backend=static",
            f"--master-addr={master.address}", f"--master-port={master.ports[0]}",
        ]  # fmt: skip
        return [Proc("torchrun", _torchrun(cfg, workdir, *placement))]

    def rank(self, cfg: BenchConfig) -> Rank:
        return Rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import torch
        import torch.distributed as dist

        from bench.trial.distributed import torch_common
        from bench.trial.distributed.base import collective_timeout_s

        gpu = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch_common.cuda_device(gpu, local)
        backend = backend_of(cfg, gpu)
        dist.init_process_group(backend, timeout=timedelta(seconds=collective_timeout_s(cfg)))
        session = adapter.prepare(cfg, common.shard(data, rank.index, rank.world))
        alone = torch_common.local_step(session)
        ddp = torch.nn.parallel.DistributedDataParallel(
            session.model, device_ids=[local] if gpu else None
        )
        session.forward = ddp
        return _Session(session, ddp, alone, backend)


def backend_of(cfg: BenchConfig, gpu: bool) -> str:
    """The process group's backend: ``distributed.backend``, where auto is nccl on GPUs and
    gloo on the CPU."""
    assert isinstance(cfg.distributed, DDPConfig)
    chosen = cfg.distributed.backend
    return ("nccl" if gpu else "gloo") if chosen == "auto" else chosen


class _Session(common.Wrapped):
    def __init__(self, inner: Any, ddp: Any, alone: Any, backend: str) -> None:
        super().__init__(inner)
        self.ddp, self.alone, self.backend = ddp, alone, backend

    def barrier(self) -> None:
        import torch
        import torch.distributed as dist

        if self.backend == "nccl":
            dist.barrier(device_ids=[torch.cuda.current_device()])
        else:
            dist.barrier()

    def breakdown(self, cfg: BenchConfig) -> dict[str, float]:
        def dist_step() -> None:
            self.inner.step(self.inner.next_batch())
            self.inner.sync()

        def local() -> None:
            self.alone(self.inner.next_batch())

        out = common.exposed_comm(dist_step, local, common.breakdown_pairs(cfg))
        self.inner.take_mean_loss()
        return out


STRATEGY = DDP()
