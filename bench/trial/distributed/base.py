"""The protocol a distributed strategy implements, and what it is given.

A strategy has two sides:

- the coordinator's (the trial's own process): :meth:`Strategy.processes` names the
  processes to start, each a :class:`Proc` (a command and its environment: torchrun,
  horovodrun, or one rank process per worker with ``TF_CONFIG`` set).  The coordinator starts,
  watches and stops them (:mod:`.launch`) and assembles the result (:mod:`.coordinator`);
- a rank's (``python -m bench.trial.distributed.rank WORKDIR``): :meth:`Strategy.rank` says who
  this process is, from its environment, and :meth:`Strategy.prepare` builds the
  :class:`~bench.trial.frameworks.base.Session` whose ``step`` is one distributed training step.
  The timing loop is the single-process one (:func:`bench.trial.loop.run_trial`).

A session may also have ``breakdown(cfg) -> dict`` (used by ``breakdown=true`` instead of the
framework profiler): ``time_comm_ms``, the exposed communication per step, and for
parameter servers ``ps_push_ms`` and ``ps_pull_ms``; or ``exposed_comm(cfg) -> dict``
(``time_comm_ms``, measured after the framework profiler's breakdown, beside its phases:
the JAX strategies).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.core.config import BenchConfig
from bench.trial.frameworks.base import Framework, Session

# What a rank process is told by the coordinator (set in every Proc's environment).
ENV_RANK, ENV_WORLD = "BENCH_RANK", "BENCH_WORLD_SIZE"
# The rank's index among its node's ranks (which GPU it takes); its global index if unset.
ENV_LOCAL_RANK = "BENCH_LOCAL_RANK"
# The trial's config as the coordinator hands it to its ranks and node agents.
CONFIG = "dist_config.json"
# The coordinator's deadline for its processes, as a fraction of the trial's timeout_s.
DEADLINE_FRACTION = 0.9


def deadline_s(cfg: BenchConfig) -> float:
    """Seconds the coordinator gives its processes (below the launcher's ``timeout_s``)."""
    return max(1.0, DEADLINE_FRACTION * cfg.timeout_s - 2.0)


def collective_timeout_s(cfg: BenchConfig) -> float:
    """The frameworks' collective and rendezvous timeouts: well below the deadline, so a
    dead peer makes the others fail (and say so) before the deadline stops them."""
    return max(5.0, 0.5 * cfg.timeout_s)


@dataclass(frozen=True)
class Node:
    name: str  # the Slurm node name (distinct per node, even where nodes share a host)
    address: str  # where the other nodes reach it
    ports: tuple[int, ...]  # TCP ports it reserved for the strategy's servers


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]

    @property
    def size(self) -> int:
        return len(self.nodes)

    def endpoints(self, per_node: int) -> list[str]:
        """``address:port`` of the first ``per_node`` ports of every node, node by node
        (global rank order: node k's local rank j is rank k x per_node + j)."""
        return [f"{n.address}:{p}" for n in self.nodes for p in n.ports[:per_node]]


@dataclass
class Proc:
    """One process for the coordinator to start."""

    name: str  # e.g. "rank0", "torchrun", "ps0": its log is WORKDIR/<name>.log
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # A server (a parameter server, a TF worker in ps_async) serves until it is stopped: the
    # trial does not wait for it to exit, and stops it when the others are done.
    server: bool = False


@dataclass
class Rank:
    """Who a rank process is."""

    index: int  # the worker index logged as worker{index}_*
    world: int  # worker processes in the job
    # Whether this process's timed epochs are the job's figures for this index (a server
    # process in ps_async does not time anything: the coordinator process does).
    timed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def workdir(self, root: Path) -> Path:
        return root / f"rank{self.index}"


class Strategy(Protocol):
    name: str

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        """Problems with this config on this machine (``gpu``: the trial runs on GPUs, of
        which ``gpus`` are visible), each naming its field; empty if none."""

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        """The processes that run the trial (coordinator side)."""

    def rank(self, cfg: BenchConfig) -> Rank:
        """Who this rank process is, from its environment."""

    def prepare(self, adapter: Framework, cfg: BenchConfig, data: Any, rank: Rank) -> Session:
        """A session whose ``step`` is one distributed training step (rank side)."""


def env_rank() -> Rank:
    """The identity the coordinator set (BENCH_RANK, BENCH_WORLD_SIZE)."""
    return Rank(int(os.environ[ENV_RANK]), int(os.environ[ENV_WORLD]))


def local_rank(rank: Rank) -> int:
    """This rank's index on its node (set by the coordinator or a node agent)."""
    return int(os.environ.get(ENV_LOCAL_RANK, rank.index))


def rank_command(workdir: Path) -> list[str]:
    import sys

    return [sys.executable, "-m", "bench.trial.distributed.rank", str(workdir)]


def per_rank(cfg: BenchConfig, world: int) -> list[Proc]:
    """One rank process per worker, told who it is by BENCH_RANK / BENCH_WORLD_SIZE (the
    plain launcher; strategies add their own variables, e.g. TF_CONFIG)."""
    return [Proc(f"rank{i}", [], {ENV_RANK: str(i), ENV_WORLD: str(world)}) for i in range(world)]


def node_ranks(cfg: BenchConfig, node: int) -> list[Proc]:
    """Node ``node``'s ``workers`` rank processes in a job of ``nodes`` nodes: global index
    ``node x workers + local``."""
    world = cfg.workers * cfg.nodes
    out = []
    for j in range(cfg.workers):
        i = node * cfg.workers + j
        env = {ENV_RANK: str(i), ENV_WORLD: str(world), ENV_LOCAL_RANK: str(j)}
        out.append(Proc(f"rank{i}", [], env))
    return out


class OneProcess:
    """The process side of a strategy that runs the whole job in one rank process
    (``dp``, ``mirrored``, ``model_parallel``): that process times the job and is its only
    compute process."""

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        return per_rank(cfg, 1)

    def compute_processes(self, cfg: BenchConfig) -> int:
        return 1

    def timed_ranks(self, cfg: BenchConfig) -> int:
        return 1

    def rank(self, cfg: BenchConfig) -> Rank:
        return env_rank()
