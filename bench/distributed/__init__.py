"""Data-parallel strategies (``distributed=...``): one module per strategy.

A strategy that needs several processes implements ``run(cfg, on_epoch, workdir)``: it
starts them from inside the trial's own process (so a timeout, Ctrl-C or the death of that
process takes them all down with it), each worker running :func:`bench.trial.run_local`, and
merges their results into one :class:`~bench.result.TrialResult` whose per-epoch
``samples_per_s`` is global (every worker's samples), with ``worker{rank}_samples_per_s``
beside it.  A strategy that runs in one process (``kvstore_device``) lives in its framework's
adapter and needs nothing here.

- ``kvstore_sync``, ``kvstore_async``: MXNet's parameter server (:mod:`.kvstore`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from bench.config import BenchConfig
from bench.result import TrialResult
from bench.trial import EpochCallback

_MODULES = {
    "kvstore_sync": "bench.distributed.kvstore",
    "kvstore_async": "bench.distributed.kvstore",
}


def launches_processes(cfg: BenchConfig) -> bool:
    """Whether ``cfg``'s strategy runs its workers as processes of their own."""
    return cfg.distributed in _MODULES


def run(cfg: BenchConfig, on_epoch: EpochCallback | None, workdir: Path | None) -> TrialResult:
    result: TrialResult = importlib.import_module(_MODULES[cfg.distributed]).run(
        cfg, on_epoch, workdir
    )
    return result
