"""``distributed=jax_distributed``: JAX across ``workers`` processes per node (and ``nodes``
nodes of a Slurm allocation), one device each, joined by ``jax.distributed``
(:mod:`bench.trial.distributed.jax_distributed`): its facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import JAX
from bench.core.strategies.base import DistributedConfig


@dataclass
class JaxDistributedConfig(DistributedConfig):
    name: str = "jax_distributed"
    what: ClassVar[str] = "jax.distributed, one process per worker, a Mesh over all of them"
    frameworks: ClassVar[tuple[str, ...]] = (JAX,)
    module: ClassVar[str] = "bench.trial.distributed.jax_distributed"
    runner: ClassVar[str] = "coordinator"
    parity: ClassVar[tuple[str, ...]] = (JAX,)
    multi_node: ClassVar[bool] = True
    sequence_frameworks: ClassVar[tuple[str, ...]] = ()  # image models only so far
