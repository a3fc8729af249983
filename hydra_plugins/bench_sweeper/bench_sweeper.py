"""The ``bench`` sweeper: Hydra's basic sweeper, plus ``repeats``.

With ``repeats=N`` (N > 1) every configuration of the sweep runs N times as separate jobs,
``repeat=0`` to ``repeat=N-1``, in rounds: all configurations once, then all again in the
reverse order, and so on, so that a drift of the machine during the sweep falls evenly on
every configuration.  The job list comes from :func:`bench.cli.expand_jobs`, which the
sweep's up-front validation uses too.  Selected in conf/config.yaml
(``override hydra/sweeper: bench``); with ``repeats=1`` it is the basic sweeper.

Hydra's plugin scan runs this module before it is in ``sys.modules``, so it must not use
``from __future__ import annotations`` (dataclasses would look the module up and fail).
"""

from dataclasses import dataclass
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore


@dataclass
class BenchSweeperConf:
    _target_: str = "hydra_plugins.bench_sweeper.bench_sweeper.BenchSweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="bench", node=BenchSweeperConf, provider="bench"
)


class BenchSweeper(BasicSweeper):
    # BasicSweeper.sweep() calls self.split_arguments(overrides, max_batch_size); this
    # instance method takes the place of its static one to add the repeats.
    def split_arguments(  # type: ignore[override]
        self, overrides: list[Any], max_batch_size: int | None
    ) -> list[list[list[str]]]:
        from bench.cli import expand_jobs

        assert self.config is not None
        jobs = expand_jobs(overrides, int(self.config.get("repeats", 1)))
        size = max_batch_size if max_batch_size and max_batch_size > 0 else max(len(jobs), 1)
        return [jobs[i : i + size] for i in range(0, len(jobs), size)]
