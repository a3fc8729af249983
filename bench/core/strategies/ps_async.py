"""``distributed=ps_async``: tf ParameterServerStrategy, TensorFlow's asynchronous mode
(:mod:`bench.trial.distributed.ps_async`): its facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import TF
from bench.core.strategies.base import DistributedConfig


@dataclass
class ParameterServerConfig(DistributedConfig):
    name: str = "ps_async"
    what: ClassVar[str] = "tf ParameterServerStrategy (asynchronous)"
    frameworks: ClassVar[tuple[str, ...]] = (TF,)
    module: ClassVar[str] = "bench.trial.distributed.ps_async"
    runner: ClassVar[str] = "coordinator"
    asynchronous: ClassVar[bool] = True
    parameter_servers: ClassVar[bool] = True
    multi_node: ClassVar[bool] = True
