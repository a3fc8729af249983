"""``distributed=kvstore_sync`` / ``kvstore_async`` / ``kvstore_device``: MXNet's kvstore
(:mod:`bench.trial.distributed.kvstore`: scheduler, servers and workers; ``device``: one
process reducing over devices): their facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench.core.frameworks import MXNET
from bench.core.strategies.base import DistributedConfig


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
