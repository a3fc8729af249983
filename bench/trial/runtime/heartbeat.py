"""A heartbeat file between the host and a trial that runs where the host's death is not
seen (a container: PR_SET_PDEATHSIG does not cross into it).

The host touches the file every second (:class:`Beat`, a thread, so a slow tracking server
never delays it); the trial watches it (:func:`watch_from_env`, started by the worker when
``BENCH_HEARTBEAT`` names the file) and exits when it is older than
``BENCH_HEARTBEAT_TIMEOUT_S`` seconds, so that a killed or crashed host leaves no trial
running.  Both sides run on one kernel, so the file's mtime and ``time.time()`` agree.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

ENV_PATH, ENV_TIMEOUT = "BENCH_HEARTBEAT", "BENCH_HEARTBEAT_TIMEOUT_S"
INTERVAL_S = 1.0
# The worker's exit status when it stops itself for want of a heartbeat.
EXIT_NO_HEARTBEAT = 75


class Beat:
    """Touch ``path`` every :data:`INTERVAL_S` seconds until :meth:`stop`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.touch()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                os.utime(self.path)
            except OSError:
                self.path.touch()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)


def stale_for(path: Path) -> float:
    """Seconds since ``path`` was last touched (infinite if it is gone)."""
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def watch_from_env() -> None:
    """Start the watchdog thread if ``BENCH_HEARTBEAT`` is set; a no-op otherwise."""
    where = os.environ.get(ENV_PATH)
    if not where:
        return
    timeout_s = float(os.environ.get(ENV_TIMEOUT, "15"))
    path = Path(where)

    def watch() -> None:
        while True:
            time.sleep(INTERVAL_S)
            age = stale_for(path)
            if age > timeout_s:
                print(
                    f"bench.trial.worker: no heartbeat from the host for {age:.0f} s "
                    f"(> {timeout_s:g} s); the host is gone, stopping",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(EXIT_NO_HEARTBEAT)

    threading.Thread(target=watch, name="bench-heartbeat-watch", daemon=True).start()
