"""``distributed=dp``: torch.nn.DataParallel, one process splitting each batch over GPUs.

It needs at least 2 CUDA devices and is refused on the CPU before any process starts (use
``ddp`` for CPU processes).  One step trains ``workers x batch_size`` samples, scattered
over ``workers`` GPUs; each GPU's rate is the process's rate split evenly (lockstep).
"""

from __future__ import annotations

from typing import Any

from bench.core.config import BenchConfig
from bench.trial.distributed import common
from bench.trial.distributed.base import OneProcess, Rank


class DP(OneProcess):
    name = "dp"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        if not gpu or gpus < 2:
            where = "the CPU" if not gpu else f"{gpus} GPU"
            return [
                f"distributed: dp (DataParallel) splits each batch over GPUs in one process and "
                f"needs at least 2 CUDA devices; this trial would run on {where}. Use "
                "distributed=ddp for CPU worker processes"
            ]
        if cfg.workers > gpus:
            return [f"workers: dp uses one GPU per worker; {gpus} visible, got {cfg.workers}"]
        return []

    def step_batches(self, cfg: BenchConfig) -> int:
        return cfg.workers

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import torch

        session = adapter.prepare(cfg, data)
        session.forward = torch.nn.DataParallel(session.model, list(range(cfg.workers)))
        return common.Lockstep(session, cfg.workers, cfg.batch_size // cfg.workers)


STRATEGY = DP()
