"""What the host takes from a trial's folder for MLflow: copies of regular files inside it.

A trial writes its folder as it likes (a container as another user), so nothing there is
trusted (docs/security.md).  Each named entry is opened relative to the folder, never
following a link, and copied into a host-private staging folder, which is what gets
logged: a symbolic link, a hard link, a FIFO, a socket, a device or a name that leaves the
folder (absolute, ``..``) is recorded with why, and never opened or copied.  The files are
opened and checked in one step (``O_NOFOLLOW`` and ``fstat`` on the open descriptor), so a
trial still running cannot swap a checked file for a link before it is read.  What is copied
is capped in bytes and files (:class:`Caps`); what is left out over a cap is named alike.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_BLOCK = 1 << 20


@dataclass(frozen=True)
class Caps:
    """The most of a trial's files the host copies (``launcher.max_artifact_mb`` and
    ``launcher.max_artifact_files``): a file is counted at the larger of its length and its
    allocated size, so neither a sparse file nor one allocated past its end slips under."""

    bytes: int = 1 << 30
    files: int = 10_000


@dataclass
class Collected:
    files: list[Path] = field(default_factory=list)  # the copies, one per top-level entry
    refused: list[str] = field(default_factory=list)  # "name: why", one per entry not copied
    caps: Caps = field(default_factory=Caps)
    used_bytes: int = 0
    used_files: int = 0

    def over(self, size: int) -> str:
        """Why a file of ``size`` bytes is left out ('' if it fits under the caps)."""
        if self.used_files + 1 > self.caps.files:
            return f"left out: over launcher.max_artifact_files ({self.caps.files} files)"
        if self.used_bytes + size > self.caps.bytes:
            cap = self.caps.bytes / 2**20
            return f"left out: {size:,} bytes, over launcher.max_artifact_mb ({cap:g} MiB)"
        return ""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def bad_name(name: str) -> str:
    """Why ``name`` is not one plain entry of a folder ('' if it is)."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return "not a name inside the trial's folder"
    return ""


def _copy(parent_fd: int, name: str, target: Path, shown: str, out: Collected) -> bool:
    """Copy the entry ``name`` of the folder open as ``parent_fd`` to ``target``; False
    (with the reason in ``out.refused``) when it is not a regular file or folder."""
    try:
        before = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False  # named but never written: nothing to log, as before
    except OSError as exc:
        out.refused.append(f"{shown}: cannot be read ({exc.strerror or exc})")
        return False
    is_dir = stat.S_ISDIR(before.st_mode)
    if not (is_dir or stat.S_ISREG(before.st_mode)):
        out.refused.append(f"{shown}: {_kind(before.st_mode)}, not copied")
        return False
    if not is_dir and before.st_nlink > 1:
        out.refused.append(f"{shown}: a hard link ({before.st_nlink} names), not copied")
        return False
    try:
        fd = os.open(name, _OPEN | (os.O_DIRECTORY if is_dir else 0), dir_fd=parent_fd)
    except OSError as exc:  # swapped for a link or something else since the look
        out.refused.append(f"{shown}: changed while collected ({exc.strerror or exc}), not copied")
        return False
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            out.refused.append(f"{shown}: changed while collected, not copied")
            return False
        if is_dir:
            target.mkdir()  # modes as the store would give them: ``into`` keeps others out
            for entry in sorted(os.listdir(fd)):
                _copy(fd, entry, target / entry, f"{shown}/{entry}", out)
            return True
        size = max(now.st_size, now.st_blocks * 512)
        why = out.over(size)
        if why:
            out.refused.append(f"{shown}: {why}")
            return False
        copied = 0
        with open(target, "xb") as dst:
            while block := os.read(fd, _BLOCK):
                copied += len(block)
                if copied > size and out.over(copied):  # it grew while read
                    break
                dst.write(block)
        if copied > size and out.over(copied):
            target.unlink()
            out.refused.append(f"{shown}: grew while collected; {out.over(copied)}")
            return False
        out.used_bytes += max(size, copied)
        out.used_files += 1
        return True
    finally:
        os.close(fd)


def collect(workdir: Path, names: Iterable[str], into: Path, caps: Caps | None = None) -> Collected:
    """Copies of the entries ``names`` of ``workdir`` (files, or folders copied whole) in
    ``into``, which must exist and be the host's own (a private temporary folder), within
    ``caps`` (in the order named: the log first); what could not be taken, and why."""
    out = Collected(caps=caps or Caps())
    try:
        folder = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return out  # the trial never started
    try:
        for name in dict.fromkeys(names):
            why = bad_name(name)
            if why:
                out.refused.append(f"{name!r}: {why}, not copied")
            elif _copy(folder, name, into / name, name, out):
                out.files.append(into / name)
    finally:
        os.close(folder)
    return out
