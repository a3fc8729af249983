"""Entry point of a trial's own process: ``python -m bench.worker WORKDIR``.

Serves the trial directory (:mod:`bench.runtime.child`): reads ``WORKDIR/config.json``,
appends one JSON line per finished epoch to ``WORKDIR/events.jsonl`` (so the host can stream
them) and writes ``WORKDIR/result.json``.  :func:`execute` is what runs a trial of any kind,
here and in the inline launcher: in this process, or through the runner of a strategy that
starts processes of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.config import BenchConfig
from bench.distributed.registry import STRATEGIES
from bench.result import TrialResult
from bench.runtime import child
from bench.runtime.protocol import CONFIG, read_config
from bench.trial import EpochCallback, run_trial


def execute(
    cfg: BenchConfig, on_epoch: EpochCallback | None = None, workdir: Path | None = None
) -> TrialResult:
    """Run the trial ``cfg`` describes; never raises for a failing trial."""
    runner = STRATEGIES[cfg.distributed.name].runner
    if runner == "kvstore":  # MXNet's scheduler, servers and workers
        from bench.distributed import kvstore

        return kvstore.run(cfg, on_epoch, workdir)
    if runner == "coordinator":  # rank processes started and watched from here
        from bench.distributed import coordinator

        return coordinator.run(cfg, on_epoch, workdir)
    return run_trial(cfg, on_epoch, workdir)


def main(workdir: Path) -> int:
    child.start()
    child.serve(read_config(workdir / CONFIG), workdir, execute)
    return 0


if __name__ == "__main__":
    child.exit_now(main(Path(sys.argv[1])))
