"""The trial-directory protocol between a host process and a child that runs a trial.

The host writes ``config.json`` (the trial's :class:`~bench.core.config.BenchConfig` as a dict);
the child appends one JSON line per finished epoch to ``events.jsonl`` (so the host streams
them as they come) and writes ``result.json`` once, atomically, when the trial is done.
Its output goes to ``worker.log``.  A child stopped by its coordinator leaves ``stopped``.
A check harness may add ``hooks.json`` (:mod:`bench.trial.runtime.hooks`).

The host reads these files without following links, and only as regular files
(:func:`read_regular`): a trial, a container above all, may have left anything there.

One reader serves every host side (the launchers, the distributed coordinator, MXNet's
kvstore job): :class:`EventReader` reads what was appended since its last poll and never
returns a line that is still being written.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.core.config import BenchConfig, from_dict
from bench.core.result import EpochRecord, TrialResult

CONFIG, EVENTS, RESULT, LOG, STOPPED = (
    "config.json",
    "events.jsonl",
    "result.json",
    "worker.log",
    "stopped",
)


# The most a trial's file (its result, its events since the last read, a spooled record)
# may hold before the host refuses to read it: a trial that writes gigabytes must not take
# the host's memory with it.  Real results are kilobytes; a long trial's events, megabytes.
MAX_READ = 64 << 20


def read_regular(
    path: Path, offset: int = 0, limit: int | None = None, last: int | None = None
) -> bytes:
    """The bytes of ``path`` from ``offset`` (or its ``last`` bytes), opened without
    following a link (in its last component) and only if it is a regular file: a link to a
    host file or a FIFO left by a trial raises OSError rather than being read or blocking,
    and so does a file with more than ``limit`` (:data:`MAX_READ`) bytes to read."""
    limit = MAX_READ if limit is None else limit
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if last is not None:
            offset = max(info.st_size - last, 0)
        if info.st_size - offset > limit:
            raise OSError(errno.EFBIG, f"more than {limit} bytes to read", str(path))
        os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: object) -> None:
    """Write ``data`` as JSON so that a reader sees the old file or the whole new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def write_config(path: Path, data: dict[str, Any]) -> None:
    write_json_atomic(path, data)


def read_config(path: Path) -> BenchConfig:
    return from_dict(BenchConfig, json.loads(path.read_text()))


def read_result(path: Path) -> TrialResult | None:
    """The result a child wrote, or None if it wrote none (or an unreadable one)."""
    try:
        return TrialResult.from_dict(json.loads(read_regular(path)))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def clear(workdir: Path, *names: str) -> None:
    """Remove the outputs of an earlier run of the same directory."""
    for name in names:
        (workdir / name).unlink(missing_ok=True)


@contextmanager
def epoch_writer(path: Path) -> Iterator[Callable[[EpochRecord], None]]:
    """A callback that appends each epoch record to ``path`` as one line."""
    with open(path, "a", buffering=1) as out:

        def write(record: EpochRecord) -> None:
            out.write(json.dumps(dataclasses.asdict(record)) + "\n")

        yield write


class EventReader:
    """The epoch records a child appends to its events file, read as they arrive.

    :meth:`poll` reads what was appended since the last poll, up to the last complete line,
    adds the records to :attr:`epochs` and hands each to ``on_epoch``."""

    def __init__(self, path: Path, on_epoch: Callable[[EpochRecord], None] | None = None) -> None:
        self.path, self.on_epoch, self.offset = path, on_epoch, 0
        self.epochs: list[EpochRecord] = []

    def poll(self) -> list[EpochRecord]:
        """The records new since the last poll."""
        try:
            chunk = read_regular(self.path, self.offset)
        except OSError:  # not there yet, or not a regular file: no epochs from it
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        new = [EpochRecord(**json.loads(line)) for line in complete.decode().splitlines()]
        for record in new:
            self.epochs.append(record)
            if self.on_epoch is not None:
                self.on_epoch(record)
        return new


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log ('' if it cannot be read, or is not a regular file)."""
    try:
        text = read_regular(path, last=1 << 20).decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])
    except OSError:
        return ""
