"""Run each trial in a fresh Python process (the default).

The child runs :mod:`bench.worker` with the framework's interpreter
(:func:`bench.interpreters.python_for`: MXNet has an environment of its own) in its own
session, so Ctrl-C reaches only the host, which then stops the child's whole process group;
the child also dies if the host does.
Its output (framework log noise included) goes to ``WORKDIR/worker.log``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from bench.config import BenchConfig, to_dict
from bench.interpreters import python_for
from bench.launchers.base import TimeLimitReached, TrialInterrupted
from bench.result import ERROR, KILLED, OOM, TIMEOUT, EpochRecord, TrialResult
from bench.trial import EpochCallback
from bench.worker import CONFIG, EVENTS, RESULT, write_json_atomic

POLL_S = 0.2
LOG = "worker.log"


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the child's process group, then SIGKILL whatever is left after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; make sure none of its children outlive it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        break


def _limit_memory(limit_mb: int) -> Callable[[], None] | None:
    if limit_mb <= 0:
        return None
    limit = limit_mb * 2**20

    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    return apply


def _interrupted(exc: KeyboardInterrupt) -> tuple[str, str]:
    if isinstance(exc, TimeLimitReached):
        return TIMEOUT, "stopped at the scheduler's time limit (its warning signal arrived)"
    return KILLED, "interrupted (Ctrl-C or SIGTERM)"


def _died(code: int, cfg: BenchConfig, log: Path) -> tuple[str, str]:
    """Status and message for a worker that ended without writing its result."""
    status = ERROR
    if code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
        if cfg.launcher.memory_limit_mb and -code in (
            signal.SIGSEGV,
            signal.SIGABRT,
            signal.SIGBUS,
        ):
            # Native code that cannot allocate under the cap crashes instead of raising.
            status = OOM
            how += f" under launcher.memory_limit_mb={cfg.launcher.memory_limit_mb}"
            how += "; counted as out of memory"
        elif -code == signal.SIGKILL:
            how += " (possibly the kernel's out-of-memory killer)"
        elif -code in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            status = KILLED  # stopped from outside: a scheduler, a user, a shutdown
    else:
        how = f"exited with code {code}"
    return status, f"the trial process {how} without writing a result; its last output:\n" + tail(
        log
    )


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class _EventReader:
    def __init__(self, path: Path, on_epoch: EpochCallback) -> None:
        self.path, self.on_epoch, self.offset = path, on_epoch, 0
        self.epochs: list[EpochRecord] = []

    def poll(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        complete = chunk[: chunk.rfind("\n") + 1]
        self.offset += len(complete.encode())
        for line in complete.splitlines():
            record = EpochRecord(**json.loads(line))
            self.epochs.append(record)
            self.on_epoch(record)


class Launcher:
    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        workdir.mkdir(parents=True, exist_ok=True)
        for name in (EVENTS, RESULT):
            (workdir / name).unlink(missing_ok=True)
        write_json_atomic(workdir / CONFIG, to_dict(cfg))
        env = dict(os.environ, BENCH_PARENT_PID=str(os.getpid()), PYTHONUNBUFFERED="1")
        events = _EventReader(workdir / EVENTS, on_epoch)
        launched = time.time()
        with open(workdir / LOG, "wb") as log:
            proc = subprocess.Popen(
                [python_for(cfg.framework.name), "-m", "bench.worker", str(workdir)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_limit_memory(cfg.launcher.memory_limit_mb),
            )
        deadline = time.monotonic() + cfg.timeout_s
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    stop_group(proc, cfg.launcher.kill_grace_s)
                    events.poll()
                    return self._partial(
                        cfg, events, TIMEOUT, f"timed out after {cfg.timeout_s:g} s (timeout_s)"
                    )
                events.poll()
                time.sleep(POLL_S)
        except KeyboardInterrupt as exc:
            stop_group(proc, cfg.launcher.kill_grace_s)
            events.poll()
            raise TrialInterrupted(self._partial(cfg, events, *_interrupted(exc))) from exc
        except BaseException:  # whatever stops the host, the trial's processes go too
            stop_group(proc, cfg.launcher.kill_grace_s)
            raise
        stop_group(proc, 0)  # reap any stray children of a finished worker
        events.poll()
        try:
            result = TrialResult.from_dict(json.loads((workdir / RESULT).read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            return self._partial(cfg, events, *_died(proc.returncode, cfg, workdir / LOG))
        result.marks["launched"] = launched
        return result

    @staticmethod
    def _partial(cfg: BenchConfig, events: _EventReader, status: str, error: str) -> TrialResult:
        return TrialResult(
            status=status,
            framework=cfg.framework.name,
            model=cfg.model.name,
            mode=cfg.mode,
            epochs=events.epochs,
            error=error,
        )
