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

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.distributed.base import Proc

POLL_S = 0.1
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (call first thing in a rank)."""
    parent = os.getppid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def become_subreaper() -> None:
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def _pdeathsig() -> None:  # between fork and exec in the child
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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
                    preexec_fn=_pdeathsig,
                )
            running.append(Running(p, popen, log))
    except BaseException:
        stop_all(running, 0)
        raise
    return running


def describe(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


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


def _descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def stop_all(running: list[Running], grace_s: float) -> None:
    """SIGTERM every process started and every descendant of this one, SIGKILL what is left
    after ``grace_s``, and reap them."""
    ours = {r.popen.pid for r in running}
    targets = {p.pid: p for p in _descendants()}
    for r in running:
        if r.popen.poll() is None and r.popen.pid not in targets:
            try:
                targets[r.popen.pid] = psutil.Process(r.popen.pid)
            except psutil.Error:
                pass
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        alive = [p for p in targets.values() if _alive(p)]
        if not alive:
            break
        for p in alive:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=wait_s)
        targets.update({p.pid: p for p in _descendants()})  # anything started meanwhile
    for r in running:
        try:
            r.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL was sent
            pass
    for pid in set(targets) - ours:  # orphans re-parented to us: reap their zombies
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
