"""Entry point of one timed rank: ``python -m bench.distributed.rank WORKDIR``.

Reads ``WORKDIR/dist_config.json``, asks the strategy who it is, runs the single-process
timing loop (:func:`bench.trial.run_trial`) on the strategy's session with its share of the
node's threads, and writes ``WORKDIR/rank{i}/events.jsonl`` (one line per epoch) and
``WORKDIR/rank{i}/result.json``.  It exits 1 if its trial failed, so the coordinator stops
the others at once; on SIGTERM it notes ``stopped`` and exits.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from bench.config import BenchConfig, from_dict, resolved_threads
from bench.distributed import launch, load
from bench.distributed.coordinator import CONFIG, EVENTS, RESULT, STOPPED
from bench.result import OK, EpochRecord


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
    launch.die_with_parent()
    from bench.trial import run_trial  # after the parent check: imports take a while

    cfg = from_dict(BenchConfig, json.loads((workdir / CONFIG).read_text()))
    strategy = load(cfg.distributed)
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
    rank_cfg = rank_config(cfg, me.index, processes, batches)

    def prepare(adapter: Any, c: BenchConfig, data: Any) -> Any:
        return strategy.prepare(adapter, c, data, me)

    with open(mine / EVENTS, "a", buffering=1) as events:

        def on_epoch(record: EpochRecord) -> None:
            events.write(json.dumps(dataclasses.asdict(record)) + "\n")

        result = run_trial(rank_cfg, on_epoch, mine, prepare)
    tmp = mine / (RESULT + ".tmp")
    tmp.write_text(json.dumps(result.to_dict(), default=str))
    os.replace(tmp, mine / RESULT)
    return 0 if result.status == OK else 1


if __name__ == "__main__":
    code = main(Path(sys.argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip the frameworks' slow teardown (and their atexit collectives)
