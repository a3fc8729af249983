"""What every strategy's typed config has: its name, the facts it states (class variables,
not settings: not composed, logged nor hashed) and their defaults, which are those of
``distributed=none`` (one process, no distribution)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from bench.core.frameworks import NAMES


@dataclass
class DistributedConfig:
    """``distributed=NAME``: the training strategy, a config group with one typed config per
    strategy (each in its module of bench.core.strategies), holding that strategy's own
    settings (``distributed.backend=gloo`` with ``distributed=ddp``).  The sizes every
    strategy shares stay top-level keys (``workers``, ``nodes``, ``ps``).  What a strategy is
    and how it runs: :mod:`bench.trial.distributed.registry`; its rules: that registry's
    ``check``.  This class holds the facts of ``distributed=none`` too: no distribution."""

    name: str = "none"
    # Facts of the strategy (not settings: not composed, not logged, not hashed).
    what: ClassVar[str] = "one process, no distribution"
    frameworks: ClassVar[tuple[str, ...]] = NAMES  # the frameworks that have it
    # Its implementation (bench.trial.distributed's module with its STRATEGY; '': none).
    module: ClassVar[str] = ""
    # How the trial runs: "coordinator" (rank processes, bench.trial.distributed.coordinator),
    # "kvstore" (MXNet's scheduler, servers and workers, bench.trial.distributed.kvstore) or
    # "local" (one process).
    runner: ClassVar[str] = "local"
    # Frameworks whose implementation of it needs CUDA devices (at least 2): a cell that
    # asks for it where there are fewer cannot run on that machine (bench.checks).
    gpu_only: ClassVar[tuple[str, ...]] = ()
    # Every worker (stage) sees the whole batch: the model is split, not the data; its
    # stages (the workers it needs: 0, any number).
    whole_batch: ClassVar[bool] = False
    stages: ClassVar[int] = 0
    # Each worker's update is applied on its own, from possibly stale weights.
    asynchronous: ClassVar[bool] = False
    # Frameworks in which the training parity check runs it on the CPU (bench.parity).
    parity: ClassVar[tuple[str, ...]] = ()
    # Built against the pinned framework version only (Horovod's build).
    pinned_version_only: ClassVar[bool] = False
    # The package it needs that ``bench setup NAME`` builds on demand ("": none): a study's
    # cell that needs it where it is not built is listed as not run here (bench.checks).
    built_by_setup: ClassVar[str] = ""
    # It trains through parameter servers (``ps``: 0 means one per node).
    parameter_servers: ClassVar[bool] = False
    # It runs across the nodes of a Slurm allocation (nodes > 1, bench.trial.distributed.nodes).
    multi_node: ClassVar[bool] = False
    per_device: ClassVar[bool] = False  # the workers are devices of one process
    # The frameworks it trains the zoo's sequence models in (bench.checks.config refuses
    # the others' before any trial).
    sequence_frameworks: ClassVar[tuple[str, ...]] = NAMES
    kvstore: ClassVar[str] = ""  # the MXNet kvstore type it trains through ("": none)
    # Each of its settings' allowed values (bench.checks.rules.check checks them).
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}

    def settings(self) -> dict[str, Any]:
        """The strategy's own settings (every field but ``name``)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "name"}
