"""An MLPerf-style log of a goal=accuracy trial, written with ``mlperf-logging``'s own
``mllog`` on the host from the trial's result (docs/accuracy.md): ``:::MLLOG`` lines that
MLPerf's tools read, logged as the run's artifact ``mllog.txt`` beside its MLflow figures.

Written on the host, not in the trial: every environment a trial runs in (a container,
MXNet's) then needs nothing more, and the times come from the trial's own marks: run start
at its first timed step (initialisation and compilation before it, as MLPerf's rules
allow), each evaluation at the wall time the trial's clock gave it, run stop at the
evaluation that reached the target (status ``success``) or the last one (``aborted``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from bench.core import metrics
from bench.core.config import BenchConfig, samples_per_step
from bench.core.result import TrialResult

MLLOG = "mllog.txt"


def write(cfg: BenchConfig, result: TrialResult, folder: Path) -> Path | None:
    """Write ``folder/mllog.txt`` for a goal=accuracy trial's result; None for any other
    trial, or one without evaluations (it never started training)."""
    if cfg.goal.name != "accuracy" or not result.epochs:
        return None
    from mlperf_logging.mllog import constants as c
    from mlperf_logging.mllog.mllog import MLLogger

    path = folder / MLLOG
    logger = logging.Logger(f"bench.mllog.{id(path)}", logging.INFO)
    handler = logging.FileHandler(path, mode="w")
    logger.addHandler(handler)
    log = MLLogger(logger=logger, default_namespace="bench")
    ms = lambda wall_s: int(round(wall_s * 1000))  # noqa: E731
    started = result.marks.get("trial_start", 0.0)
    first = result.marks.get("first_timed_step", started)
    try:
        log.event(c.SUBMISSION_BENCHMARK, f"{cfg.model.name}_{cfg.data.name}", time_ms=ms(started))
        log.event(c.SUBMISSION_PLATFORM, result.framework, time_ms=ms(started))
        log.event(c.CACHE_CLEAR, True, time_ms=ms(started))
        log.start(c.INIT_START, time_ms=ms(started))
        log.event(c.SEED, cfg.seed, time_ms=ms(started))
        log.event(c.GLOBAL_BATCH_SIZE, samples_per_step(cfg), time_ms=ms(started))
        log.event(c.OPT_NAME, cfg.optimizer.name, time_ms=ms(started))
        log.event(c.OPT_BASE_LR, cfg.optimizer.lr, time_ms=ms(started))
        log.event(c.OPT_WEIGHT_DECAY, cfg.optimizer.weight_decay, time_ms=ms(started))
        if cfg.optimizer.name == "sgd":
            log.event("opt_momentum", cfg.optimizer.momentum, time_ms=ms(started))
        log.event("target_accuracy", cfg.goal.target, time_ms=ms(started))
        log.end(c.INIT_STOP, time_ms=ms(first))
        log.start(c.RUN_START, time_ms=ms(first))
        before = 0.0
        for r in result.epochs:
            at = r.extra.get(metrics.EVAL_EPOCH, float(r.epoch))
            evaluated = first + r.extra.get(metrics.EVAL_ELAPSED_S, 0.0)
            eval_start = evaluated - r.extra.get(metrics.EVAL_TIME_S, 0.0)
            block_start = eval_start - r.epoch_time_s
            meta = {"first_epoch_num": before, "epoch_count": at - before}
            log.start(c.BLOCK_START, metadata=meta, time_ms=ms(block_start))
            log.end(c.BLOCK_STOP, metadata={"first_epoch_num": before}, time_ms=ms(eval_start))
            log.start(c.EVAL_START, metadata={"epoch_num": at}, time_ms=ms(eval_start))
            accuracy = r.extra.get(metrics.TEST_ACCURACY)
            if accuracy is not None:
                log.event(
                    c.EVAL_ACCURACY, accuracy, metadata={"epoch_num": at}, time_ms=ms(evaluated)
                )
            log.end(c.EVAL_STOP, metadata={"epoch_num": at}, time_ms=ms(evaluated))
            before = at
        reached = result.summary.get(metrics.TARGET_REACHED) == 1.0
        stopped = first + result.epochs[-1].extra.get(metrics.EVAL_ELAPSED_S, 0.0)
        status = c.SUCCESS if reached else c.ABORTED
        log.end(c.RUN_STOP, metadata={"status": status}, time_ms=ms(stopped))
    finally:
        handler.close()
    return path
