"""The strategies: what each is, which frameworks have it, how it runs (assembled from each
strategy's typed config, :mod:`bench.core.strategy_configs`); the rules that decide whether
a config may use one are :mod:`bench.checks.config`'s, what it needs of this machine its own
``check`` (:mod:`bench.checks.host`).  Nothing here imports a framework."""

from __future__ import annotations

import dataclasses
import importlib

from bench.core.config import BenchConfig
from bench.core.strategy_configs import STRATEGY_CONFIGS, DistributedConfig, replicas

# What each strategy is, which frameworks have it and how it runs: the facts of its typed
# config (bench.core.strategy_configs), one class per strategy, by name.
StrategyInfo = type[DistributedConfig]
STRATEGIES: dict[str, StrategyInfo] = dict(STRATEGY_CONFIGS)
NONE = DistributedConfig.name  # no distribution: one process, one device


def distributes(name: str) -> bool:
    """Whether ``name`` is a distribution strategy (not ``none``)."""
    return name != NONE


def info(name: str) -> StrategyInfo | None:
    return STRATEGIES.get(name)


def _facts(cfg: BenchConfig) -> StrategyInfo:
    """The facts of ``cfg``'s strategy (no distribution's where the name is unknown)."""
    return STRATEGIES.get(cfg.distributed.name, DistributedConfig)


PS_STRATEGIES = tuple(n for n, s in STRATEGIES.items() if s.parameter_servers)
# Strategies that run across the nodes of a Slurm allocation (nodes > 1, see .nodes).
MULTI_NODE = tuple(n for n, s in STRATEGIES.items() if s.multi_node)


def resolve(cfg: BenchConfig) -> BenchConfig:
    """``cfg`` with what its strategy decides for unset sizes: ``ps=0`` with a strategy that
    needs parameter servers means one per node.  Applied when a job is composed, so the
    number used is what is validated, logged and hashed (``ps=0`` and ``ps=1`` on one node
    are one configuration)."""
    if _facts(cfg).parameter_servers and cfg.ps == 0:
        return dataclasses.replace(cfg, ps=max(1, cfg.nodes))
    return cfg


def strategies_for(framework: str) -> tuple[str, ...]:
    return tuple(n for n, s in STRATEGIES.items() if framework in s.frameworks)


def gpus() -> int:
    """The GPUs visible to this process (NVML)."""
    from bench.core.sysinfo import gpu_environment

    return int(gpu_environment().get("gpu_count", "0"))


def on_gpu(cfg: BenchConfig) -> bool:
    """Whether the trial's workers run on GPUs (device=cuda, or auto with a GPU visible)."""
    return cfg.device == "cuda" or (cfg.device == "auto" and gpus() > 0)


def scaling_divisor(cfg: BenchConfig) -> int:
    """What a trial's throughput is divided by, with the single-worker throughput, to give
    its scaling efficiency: the worker count for data parallelism; 1 where the model is
    split (model_parallel), whose stages all see every sample (1.0: the split costs
    nothing)."""
    return replicas(cfg.distributed.name, cfg.workers, cfg.nodes)


def scaling_baselines(cfg: BenchConfig) -> list[BenchConfig]:
    """The single-worker configs a multi-worker trial's scaling efficiency is measured
    against, in order of preference: the same strategy on one worker, then no distribution
    (same config otherwise).  Empty for a single-worker trial."""

    if cfg.workers * cfg.nodes == 1:
        return []
    same = dataclasses.replace(cfg, workers=1, nodes=1)
    plain = dataclasses.replace(cfg, distributed=DistributedConfig(), workers=1, nodes=1, ps=0)
    return [same, plain]


def load(name: str):  # noqa: ANN201 - a Strategy; typed in .base, imported lazily
    from bench.trial.distributed.base import Strategy

    strategy: Strategy = importlib.import_module(STRATEGIES[name].module).STRATEGY
    return strategy
