"""Process lifetimes: a child dies with its parent, and a stopped trial leaves nothing behind.

- :func:`die_with_parent` (first thing in every child) and :func:`pdeathsig` (between fork and
  exec): Linux sends SIGKILL to the child when its parent dies (``PR_SET_PDEATHSIG``);
- :func:`become_subreaper`: orphaned descendants are re-parented to this process, so that
  they can still be found and stopped;
- :func:`stop_group`: SIGTERM a child's whole process group, SIGKILL it after a grace period;
- :func:`stop_tree`: the same for every descendant of this process, in whatever session or
  group it put itself;
- :func:`stop_marked`: every process that still carries a trial's mark in its environment
  (:data:`ENV_TRIAL_MARK`), such as a daemon that left the trial's session (fork, setsid,
  fork) and ignores SIGTERM, killed when the trial ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import NoReturn

import psutil

# The parent's pid, set by a host for the child it starts: a child that finds another parent
# (its own was already gone when it started) exits at once.
ENV_PARENT_PID = "BENCH_PARENT_PID"
# A mark the process launcher puts in a trial's environment, unique to the trial: every
# process the trial starts inherits it, wherever it moves in the process tree.
ENV_TRIAL_MARK = "BENCH_TRIAL_MARK"
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def pdeathsig() -> None:
    """SIGKILL this process when its parent dies (a ``preexec_fn``: kept across exec)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies; exit at once if it already has (the
    parent is not the one ``BENCH_PARENT_PID`` names, or changed while this was set up)."""
    parent = os.getppid()
    pdeathsig()
    expected = os.environ.get(ENV_PARENT_PID)
    if (expected and parent != int(expected)) or os.getppid() != parent:
        os._exit(1)


def owner_label(pid: int | None = None) -> str:
    """``host/pid/start time`` of a process (this one by default): it names the process
    uniquely, even after its pid is reused."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{pid}/{psutil.Process(pid).create_time():.2f}"


def owner_alive(owner: str) -> bool:
    """Whether the process an :func:`owner_label` names still runs; a process on another
    machine is taken to run (not ours to judge)."""
    host, _, rest = owner.partition("/")
    if host != socket.gethostname():
        return True
    try:
        return owner_label(int(rest.partition("/")[0])) == owner
    except (ValueError, psutil.Error):
        return False


# How many interrupts (Ctrl-C, SIGTERM) bench's own handler has received in this process.
# Python swallows one raised inside a finaliser or a callback (a store's connection closed
# by the garbage collector: "Exception ignored in ..."); a sweep compares this count with
# the one it started with before each trial and at its end, so none is lost.
_INTERRUPTS = [0]


def note_interrupt() -> None:
    """Count an interrupt (first thing in bench's SIGINT/SIGTERM handler)."""
    _INTERRUPTS[0] += 1


def interrupts() -> int:
    """How many interrupts :func:`note_interrupt` has counted in this process."""
    return _INTERRUPTS[0]


def exit_with(code: int | str | None) -> NoReturn:
    """``sys.exit(code)``, where 130 (an interrupt bench has handled) stays 130 under
    ``python -m`` too.

    CPython notes a KeyboardInterrupt that ends a nested evaluation (``PyRun_*``, which C
    extensions call while they load, e.g. pybind11's ``py::exec``) as unhandled, whatever
    catches it afterwards; ``python -m`` then kills itself with SIGINT once the interpreter
    has finished: status -2, not bench's 130 (about one Ctrl-C in five within the first
    seconds of a sweep, while the frameworks load).  An interrupt bench has handled clears
    that note (a no-op where this CPython has none)."""
    if code == 130:
        try:
            ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
        except (AttributeError, ValueError):
            pass
    sys.exit(code)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Ctrl-C and SIGTERM are ignored for the block (in the main thread): a second Ctrl-C
    while a stopped trial is being cleaned up and recorded must not cut that short, which
    would leave processes or an open run behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def become_subreaper() -> None:
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def describe(code: int) -> str:
    """A process's exit status in words."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


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


def marked(mark: str) -> list[psutil.Process]:
    """The processes (other than this one) whose environment has ``ENV_TRIAL_MARK=mark``."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(ENV_TRIAL_MARK) == mark and _alive(proc):
                found.append(proc)
        except psutil.Error:  # gone, or another user's
            continue
    return found


def stop_marked(mark: str) -> list[int]:
    """SIGKILL every process still carrying ``mark`` (called once the trial's own group has
    had its grace: what is left ignored it or left the group) and wait for them; their pids."""
    left = marked(mark)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=5)
    return [proc.pid for proc in left]


def descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_tree(popens: Iterable[subprocess.Popen[bytes]], grace_s: float) -> None:
    """SIGTERM the given processes and every descendant of this one, SIGKILL what is left
    after ``grace_s``, and reap them."""
    popens = list(popens)
    ours = {p.pid for p in popens}
    targets = {p.pid: p for p in descendants()}
    for popen in popens:
        if popen.poll() is None and popen.pid not in targets:
            try:
                targets[popen.pid] = psutil.Process(popen.pid)
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
        targets.update({p.pid: p for p in descendants()})  # anything started meanwhile
    for popen in popens:
        try:
            popen.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL was sent
            pass
    for pid in set(targets) - ours:  # orphans re-parented to us: reap their zombies
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
