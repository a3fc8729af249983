"""Entry point of a trial's own process: ``python -m bench.worker WORKDIR``.

Reads ``WORKDIR/config.json``, appends one JSON line per finished epoch to
``WORKDIR/events.jsonl`` (so the host can stream them) and writes ``WORKDIR/result.json``.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

from bench import heartbeat
from bench.config import BenchConfig, from_dict
from bench.result import EpochRecord
from bench.trial import run_trial

CONFIG, EVENTS, RESULT = "config.json", "events.jsonl", "result.json"


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process if the launching process dies first."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    expected = os.environ.get("BENCH_PARENT_PID")
    if expected and os.getppid() != int(expected):
        os._exit(1)  # the parent is already gone


def write_json_atomic(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def main(workdir: Path) -> int:
    _die_with_parent()
    heartbeat.watch_from_env()  # in a container: stop when the host is gone
    cfg = from_dict(BenchConfig, json.loads((workdir / CONFIG).read_text()))
    with open(workdir / EVENTS, "a", buffering=1) as events:

        def on_epoch(record: EpochRecord) -> None:
            events.write(json.dumps(dataclasses.asdict(record)) + "\n")

        result = run_trial(cfg, on_epoch, workdir)
    write_json_atomic(workdir / RESULT, result.to_dict())
    return 0


if __name__ == "__main__":
    code = main(Path(sys.argv[1]))
    # Everything is on disk: skip the frameworks' slow interpreter teardown (over a second
    # for TensorFlow), which would otherwise delay the host by that much per trial.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
