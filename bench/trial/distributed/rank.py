"""Entry point of one timed rank: ``python -m bench.trial.distributed.rank WORKDIR``.

Reads ``WORKDIR/dist_config.json`` (and ``WORKDIR/hooks.json``, the hooks the coordinator
passes on: :mod:`bench.trial.runtime.hooks`), asks the strategy who it is, runs the single-process
timing loop (:func:`bench.trial.loop.run_trial`) on the strategy's session with its share of the
node's threads, and writes ``WORKDIR/rank{i}/events.jsonl`` (one line per epoch) and
``WORKDIR/rank{i}/result.json``.  It exits 1 if its trial failed, so the coordinator stops
the others at once; on SIGTERM it notes ``stopped`` and exits.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from bench.core.config import BenchConfig, resolved_threads
from bench.core.result import OK
from bench.trial.distributed.base import CONFIG, collective_timeout_s
from bench.trial.distributed.registry import load
from bench.trial.runtime import child
from bench.trial.runtime.agree import agree_max
from bench.trial.runtime.hooks import TrialHooks
from bench.trial.runtime.protocol import STOPPED, read_config


def rank_config(cfg: BenchConfig, index: int, processes: int, batches: int) -> BenchConfig:
    """This rank's config: its share of the node's threads; telemetry on worker 0 only; a
    batch of ``batches`` workers' batches where one step of this process covers several
    (mirrored replicas, the ps_async coordinator), so that its samples are the job's."""
    mine = dataclasses.replace(
        cfg,
        threads=max(1, resolved_threads(cfg) // processes),
        batch_size=cfg.batch_size * batches,
    )
    mine.telemetry = dataclasses.replace(cfg.telemetry, enabled=cfg.telemetry.enabled and not index)
    return mine


def main(workdir: Path) -> int:
    child.start()
    from bench.trial.loop import run_trial  # after the parent check: imports take a while

    cfg = read_config(workdir / CONFIG)
    hooks = TrialHooks.read(workdir)
    strategy = load(cfg.distributed.name)
    me = strategy.rank(cfg)
    mine = me.workdir(workdir)
    mine.mkdir(exist_ok=True)

    def stopped(signum: int, frame: FrameType | None) -> None:
        (mine / STOPPED).touch()
        faulthandler.dump_traceback(sys.stderr)  # where a hung rank was, into its log
        sys.stderr.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    processes = int(getattr(strategy, "compute_processes", lambda c: c.workers)(cfg))
    batches = int(getattr(strategy, "step_batches", lambda c: 1)(cfg))

    def prepare(adapter: Any, c: BenchConfig, data: Any) -> Any:
        return strategy.prepare(adapter, c, data, me)

    def agree(steps: int) -> int:  # every rank times the same number of steps
        return agree_max(workdir / "auto_steps", me.world, steps, collective_timeout_s(cfg))

    result = child.serve(
        rank_config(cfg, me.index, processes, batches),
        mine,
        lambda c, on_epoch, out: run_trial(c, on_epoch, out, prepare, me.index, agree, hooks),
    )
    return 0 if result.status == OK else 1


if __name__ == "__main__":
    child.exit_now(main(Path(sys.argv[1])))
