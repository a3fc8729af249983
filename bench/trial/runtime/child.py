"""The one way a child process serves a trial directory.

What ``python -m bench.trial.worker``, a distributed rank and an MXNet kvstore worker each do:
:func:`start` first (die with the parent; watch the host's heartbeat where one is kept),
then :func:`serve`: run the trial with an epoch writer on ``events.jsonl`` and write
``result.json`` atomically, then :func:`exit_now`.  What "run the trial" means is the
caller's (a plain trial, a rank's share of one): this module imports no trial code, so the
runtime stays below everything that runs trials.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from bench.core.config import BenchConfig
from bench.core.result import EpochRecord, TrialResult
from bench.trial.runtime import heartbeat, processes
from bench.trial.runtime.protocol import EVENTS, RESULT, epoch_writer, write_json_atomic

Run = Callable[[BenchConfig, Callable[[EpochRecord], None], Path], TrialResult]


def start() -> None:
    """First thing in a child: die with the parent, and (in a container, where the parent's
    death is not seen) stop when the host's heartbeat goes stale."""
    processes.die_with_parent()
    heartbeat.watch_from_env()


def serve(cfg: BenchConfig, outdir: Path, run: Run) -> TrialResult:
    """Run ``cfg``'s trial with ``run``; stream its epochs to ``outdir/events.jsonl`` and
    write ``outdir/result.json``.  Returns the result too."""
    outdir.mkdir(parents=True, exist_ok=True)
    with epoch_writer(outdir / EVENTS) as on_epoch:
        result = run(cfg, on_epoch, outdir)
    write_json_atomic(outdir / RESULT, result.to_dict())
    return result


def exit_now(code: int) -> None:
    """Exit once everything is on disk, skipping the frameworks' slow interpreter teardown
    (over a second for TensorFlow; MXNet's exit barrier; collectives' atexit hooks)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
