"""``distributed=jax_dp``: JAX data parallelism over the XLA devices of one process
(:mod:`bench.trial.distributed.jax_dp`): its facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import JAX
from bench.core.strategies.base import DistributedConfig


@dataclass
class JaxDataParallelConfig(DistributedConfig):
    name: str = "jax_dp"
    what: ClassVar[str] = "jax.sharding data parallelism over one process's XLA devices"
    frameworks: ClassVar[tuple[str, ...]] = (JAX,)
    module: ClassVar[str] = "bench.trial.distributed.jax_dp"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (JAX,)
