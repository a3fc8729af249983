"""Scaling efficiency: a multi-worker trial's global throughput over workers x the
throughput of its single-worker baseline (the same strategy on one worker, else no
distribution, otherwise the same config;
:func:`bench.trial.distributed.registry.scaling_baselines`), the newest ok run of it in the
experiment."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.core.result import OK, TrialResult
from bench.trial.distributed.registry import scaling_baselines, scaling_divisor

# The newest ok run of a config in the experiment: {"run_id", "metrics"}, or None.
FindOkRun = Callable[[BenchConfig], dict[str, Any] | None]


def scaling_efficiency(
    cfg: BenchConfig, result: TrialResult, find_ok_run: FindOkRun
) -> tuple[float, str] | None:
    """(efficiency, the baseline run's id), or None without an ok result or a baseline."""
    rate = result.summary.get(
        metrics.GLOBAL_SAMPLES_PER_S, result.summary.get(metrics.TRIAL_SAMPLES_PER_S)
    )
    if result.status != OK or not rate:
        return None
    for base in scaling_baselines(cfg):
        found = find_ok_run(base)
        base_rate = found["metrics"].get(metrics.TRIAL_SAMPLES_PER_S) if found else None
        if found and base_rate:
            return rate / (scaling_divisor(cfg) * base_rate), str(found["run_id"])
    return None
