"""Start N processes with their environment variables, watch them, and leave none behind.

Reusable by any strategy (torchrun, horovodrun, one process per rank with ``TF_CONFIG``...).
Guarantees, whatever happens to the trial:

- each process gets ``PR_SET_PDEATHSIG=SIGKILL`` (kept across ``exec``), so it dies with the
  coordinator; ranks set it again towards their own parent (torchrun and horovodrun start
  them in sessions of their own);
- the coordinator is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a grandchild whose
  parent died is re-parented to it, so :func:`stop_all` finds and kills every descendant,
  in whatever session or process group it put itself;
- a process that ends with a non-zero status, or any process still running at the deadline,
  ends the trial at once (:class:`Outcome` names it).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.trial.distributed.base import Proc
from bench.trial.runtime.processes import become_subreaper, describe, pdeathsig, stop_tree

POLL_S = 0.1


@dataclass
class Running:
    proc: Proc
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Outcome:
    ok: bool
    # The first process that failed ("rank1 was killed by SIGKILL"), or why the wait ended.
    failed: str = ""
    codes: dict[str, int | None] = field(default_factory=dict)


def spawn(procs: list[Proc], workdir: Path, base_env: dict[str, str]) -> list[Running]:
    become_subreaper()
    running: list[Running] = []
    try:
        for p in procs:
            log = workdir / f"{p.name}.log"
            with open(log, "wb") as out:
                popen = subprocess.Popen(
                    p.argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**base_env, **p.env},
                    preexec_fn=pdeathsig,
                )
            running.append(Running(p, popen, log))
    except BaseException:
        stop_all(running, 0)
        raise
    return running


def wait(
    running: list[Running],
    deadline: float,
    tick: Callable[[], None] | None = None,
    done: Callable[[], bool] | None = None,
) -> Outcome:
    """Until every non-server process has exited 0 (ok), one fails, or ``deadline``
    (``time.monotonic()``) passes; ``tick`` is called between polls.  Processes that are all
    servers (a node that only serves) wait for ``done()`` instead (ok)."""
    servers_only = all(r.proc.server for r in running)
    while True:
        if tick is not None:
            tick()
        if servers_only and done is not None and done():
            return Outcome(True, "", {r.proc.name: r.popen.poll() for r in running})
        codes = {r.proc.name: r.popen.poll() for r in running}
        for r in running:
            code = codes[r.proc.name]
            if code is not None and (code != 0 or r.proc.server):
                what = "server " if r.proc.server else ""
                return Outcome(False, f"{what}{r.proc.name} {describe(code)}", codes)
        if not servers_only and all(
            codes[r.proc.name] is not None for r in running if not r.proc.server
        ):
            return Outcome(True, "", codes)
        if time.monotonic() > deadline:
            late = [r.proc.name for r in running if codes[r.proc.name] is None]
            return Outcome(False, f"{', '.join(late)} still running at the deadline", codes)
        time.sleep(POLL_S)


def stop_all(running: list[Running], grace_s: float) -> None:
    """SIGTERM every process started and every descendant of this one, SIGKILL what is left
    after ``grace_s``, and reap them."""
    stop_tree([r.popen for r in running], grace_s)
