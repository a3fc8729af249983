"""``distributed=dp``: torch.nn.DataParallel, one process splitting each batch over GPUs.

It needs at least 2 CUDA devices and is refused on the CPU before any process starts (use
``ddp`` for CPU processes).  One step trains ``workers x batch_size`` samples, scattered
over ``workers`` GPUs; each GPU's rate is the process's rate split evenly (lockstep).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config import BenchConfig
from bench.distributed import common
from bench.distributed.base import Proc, Rank, env_rank, per_rank


class DP:
    name = "dp"
    data_parallel = True

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

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        return per_rank(cfg, 1)

    def timed_ranks(self, cfg: BenchConfig) -> int:
        return 1

    def compute_processes(self, cfg: BenchConfig) -> int:
        return 1

    def step_batches(self, cfg: BenchConfig) -> int:
        return cfg.workers

    def rank(self, cfg: BenchConfig) -> Rank:
        return env_rank()

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import torch

        session = adapter.prepare(cfg, data)
        session.forward = torch.nn.DataParallel(session.model, list(range(cfg.workers)))
        return _Session(session, cfg.workers, cfg.batch_size // cfg.workers)


class _Session(common.Wrapped):
    def __init__(self, inner: Any, gpus: int, per_gpu: int) -> None:
        super().__init__(inner)
        self.gpus, self.per_gpu, self._steps, self._last = gpus, per_gpu, 0, 0

    def step(self, batch: Any) -> None:
        self.inner.step(batch)
        self._steps += 1

    def take_mean_loss(self) -> float | None:
        self._last, self._steps = self._steps, 0
        return self.inner.take_mean_loss()

    def epoch_extra(self, elapsed_s: float) -> dict[str, float]:
        rate = self._last * self.per_gpu / elapsed_s
        return {f"worker{i}_samples_per_s": rate for i in range(self.gpus)}


STRATEGY = DP()
