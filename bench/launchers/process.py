"""Run each trial in a fresh Python process (the default).

The child runs :mod:`bench.trial.worker` with the framework's interpreter
(:func:`bench.envs.interpreters.python_for`: MXNet has an environment of its own) in its own
session, so Ctrl-C reaches only the host, which then stops the child's whole process group;
the child also dies if the host does.  Every process of the trial carries a mark of its own
in its environment, and whatever still carries it when the trial is over (a daemon that
double-forked out of the group and ignores SIGTERM) is killed, named on stderr.
Its output (framework log noise included) goes to ``WORKDIR/worker.log``.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.core.config import BenchConfig, to_dict
from bench.core.result import ERROR, KILLED, OOM
from bench.envs.environments import extra_of
from bench.envs.interpreters import python_for
from bench.launchers.base import Child, WatchedLauncher
from bench.trial.runtime.processes import ENV_PARENT_PID, ENV_TRIAL_MARK, stop_group, stop_marked
from bench.trial.runtime.protocol import CONFIG, LOG, tail, write_config


def _limit_memory(limit_mb: int) -> Callable[[], None] | None:
    if limit_mb <= 0:
        return None
    limit = limit_mb * 2**20

    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    return apply


# What native code prints when it cannot allocate (thread stacks included) and exits.
ALLOCATION_FAILURES = (
    "thread creation failed",  # libgomp
    "cannot allocate memory",
    "std::bad_alloc",
    "out of memory",
)


def died(code: int, cfg: BenchConfig, log: Path) -> tuple[str, str]:
    """Status and message for a worker that ended without writing its result."""
    status = ERROR
    last = tail(log)
    capped = cfg.launcher.memory_limit_mb
    if code > 0 and capped and any(w in last.lower() for w in ALLOCATION_FAILURES):
        how = f"exited with code {code} after a failed allocation under "
        how += f"launcher.memory_limit_mb={capped}; counted as out of memory"
        return OOM, f"the trial process {how}; its last output:\n" + last
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
    return status, f"the trial process {how} without writing a result; its last output:\n" + last


class _Process(Child):
    def __init__(self, cfg: BenchConfig, workdir: Path) -> None:
        self.cfg, self.log = cfg, workdir / LOG
        self.mark = uuid.uuid4().hex
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.update({ENV_PARENT_PID: str(os.getpid()), ENV_TRIAL_MARK: self.mark})
        self.launched = time.time()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    python_for(cfg.framework.name, cfg.framework.version, extra_of(cfg)),
                    "-m",
                    "bench.trial.worker",
                    str(workdir),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_limit_memory(cfg.launcher.memory_limit_mb),
            )

    def done(self, wait_s: float) -> bool:
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, grace_s: float) -> None:
        stop_group(self.proc, grace_s)

    def finished(self) -> None:
        stop_group(self.proc, 0)  # reap any stray children of a finished worker

    def died(self) -> tuple[str, str]:
        return died(self.proc.returncode, self.cfg, self.log)

    def close(self) -> None:
        if self.proc.poll() is None:  # not stopped (an exception before the watch): now
            stop_group(self.proc, 0)
        left = stop_marked(self.mark)
        if left:
            print(
                f"bench: killed {len(left)} process(es) the trial left running outside its "
                f"process group (pids {', '.join(map(str, left))}; a daemon that ignored "
                "SIGTERM)",
                file=sys.stderr,
            )


class Launcher(WatchedLauncher):
    def start(self, cfg: BenchConfig, workdir: Path, environment: dict[str, str]) -> Child:
        write_config(workdir / CONFIG, to_dict(cfg))
        return _Process(cfg, workdir)
