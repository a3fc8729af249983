"""Both stages of bench's checks for one configuration (:func:`validate`): the rules the
configuration alone decides (:mod:`bench.checks.config`), then what this machine allows it
(:mod:`bench.checks.host`), their problems said topic by topic
(:func:`bench.checks.config.said`) in one :class:`~bench.core.config.ConfigError`, each
naming its field.  A sweep runs the two stages
once per distinct configuration (:func:`bench.sweep.jobs.check_all`); a job on a node of
its own (a Slurm array) and ``bench reproduce`` run :func:`validate`.
"""

from __future__ import annotations

from bench.checks import config, host
from bench.core.config import BenchConfig, ConfigError


def validate(cfg: BenchConfig) -> None:
    """Raise :class:`ConfigError` listing every problem in ``cfg``; return if none."""
    ruled = config.rules(cfg)
    problems = config.said(ruled, host.probes(cfg, ruled))
    if problems:
        raise ConfigError(problems)
