"""The jobs bench's sweeper runs for a composed config (``return_hydra_config=True``): its
own parsing of params, grid and the command line (``BenchSweeper.overrides``), the driver's
repeats (``sweep_repeats``) and expansion (``expand``), as ``run_sweep`` calls them."""

from __future__ import annotations

from omegaconf import DictConfig

from bench.sweep.driver import sweep_repeats
from bench.sweep.jobs import expand
from hydra_plugins.bench_sweeper.bench_sweeper import BenchSweeper


def sweeper_jobs(config: DictConfig) -> list[list[str]]:
    settings = config.hydra.sweeper
    sweeper = BenchSweeper(params=settings.get("params"), grid=settings.get("grid"))
    given, blocks = sweeper.overrides([str(o) for o in config.hydra.overrides.task or []])
    return expand(given, sweep_repeats(config)[1], blocks)
