"""The ``bench`` sweeper: every job of a sweep composed and validated before the first trial
starts, repeats interleaved, one parent run, one summary.

Selected in conf/config.yaml (``override hydra/sweeper: bench``).  The work is
:func:`bench.sweep.driver.run_sweep`'s; this class is its seat in Hydra.  Its exceptions are
not swallowed as a callback's would be: any problem stops the sweep before any trial.

The sweeper makes the sweep's collaborators (:class:`bench.sweep.session.SweepContext`: the
store, the launchers) and hands them to run_sweep and, with the task function, to Hydra's
launcher, so the jobs that run in this process write through the sweep's own store.

Hydra's plugin scan runs this module before it is in ``sys.modules``, so it must not use
``from __future__ import annotations`` (dataclasses would look the module up and fail).
"""

import functools
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf


@dataclass
class BenchSweeperConf:
    _target_: str = "hydra_plugins.bench_sweeper.bench_sweeper.BenchSweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None
    # A matrix that is not one product (a study's model-dataset pairs, a strategy that only
    # one framework has): a list of blocks, each a mapping of key: values crossed with
    # params, whose products the sweep runs in turn; or a mapping of named axes, each such
    # a list, crossed (bench.sweep.jobs.grid_blocks).
    grid: Any = None
    # Compose, validate and prepare every trial (as a sweep does before its first one: the
    # environments its framework versions need are made), list them, and run none: `bench
    # plan ...` sets it.
    dry_run: bool = False


ConfigStore.instance().store(
    group="hydra/sweeper", name="bench", node=BenchSweeperConf, provider="bench"
)


class BenchSweeper(Sweeper):
    def __init__(
        self,
        max_batch_size: int | None = None,
        params: dict[str, str] | None = None,
        grid: Any = None,
        dry_run: bool = False,
    ) -> None:
        self.max_batch_size, self.dry_run = max_batch_size, dry_run
        self.params = dict(params or {})
        self.grid = (
            OmegaConf.to_container(grid) if isinstance(grid, DictConfig | ListConfig) else grid
        )
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Any = None
        self.context: Any = None  # bench.sweep.session.SweepContext, made in setup()

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from bench.sweep.session import SweepContext

        self.config, self.hydra_context = config, hydra_context
        self.context = SweepContext()
        # bench's task function (bench.cli.task) with this sweep's context; a launcher that
        # sends the job elsewhere pickles it without the open store (SweepContext).
        job = functools.partial(task_function, context=self.context)
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=job, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from bench.launchers.slurm import partition_nodes
        from bench.sweep.driver import run_sweep
        from bench.sweep.jobs import BenchExit

        assert self.config is not None and self.hydra_context is not None
        config, loader = self.config, self.hydra_context.config_loader
        given, blocks = self.overrides(arguments, loader)
        code = run_sweep(
            config,
            lambda overrides: loader.load_sweep_config(config, overrides),
            lambda batch, start: self.launcher.launch(batch, initial_job_idx=start),
            given,
            self.context,
            self.max_batch_size,
            partition_nodes,
            blocks,
            self.dry_run,
        )
        raise BenchExit(code)  # the CLI exits with it (bench.cli.run)

    def overrides(self, arguments: list[str], loader: Any = None) -> tuple[list[Any], list[Any]]:
        """The sweep's parsed overrides (its params, then the command line's) and those of
        each block of its grid (bench.sweep.jobs.grid_blocks), as run_sweep takes them."""
        from bench.core.config import ConfigError
        from bench.sweep.jobs import fail, grid_blocks

        given = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        parser = OverridesParser.create(config_loader=loader)
        try:
            blocks = grid_blocks(self.params, self.grid, list(arguments)) if self.grid else []
        except ConfigError as exc:
            fail(exc.problems)
        return parser.parse_overrides(given), [parser.parse_overrides(b) for b in blocks]
