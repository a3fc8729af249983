"""Where bench's own files are.  In a source checkout (and its editable install) ``conf/``,
``docker/``, ``patches/`` and the set-up scripts sit beside the package; an installed wheel
carries copies of them inside the package (``bench/_data/``, put there by setup.py's build
step), so that ``bench`` runs from any directory."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import stat
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # bench/, this file being bench/core/paths.py
# The trial side is a folder: bench/trial/ (the worker, the loop, the runtime, the frameworks,
# models, data, monitors, profilers, strategies and search) and bench/core/ (the typed config
# and the facts both sides read) hold everything that runs inside a trial's own interpreter
# (the worker, a distributed rank, a parity side, a framework version's environment, a
# container image), where there is no Hydra, OmegaConf, MLflow nor Docker SDK; every other
# package and module of bench is the host's.  A framework image carries these two (and the
# package's __init__) and its content hash covers nothing else of bench, so a change on the
# host side rebuilds no image.  pyproject.toml's import contracts name the same two
# (tests/unit/test_trial_side.py checks it, and that a trial's entry points import nothing
# outside them).
TRIAL_SIDE = ("bench.core", "bench.trial")
# A file each folder must hold, so that an unrelated conf/ beside site-packages is not taken.
_MARKERS = {
    "conf": "config.yaml",
    "docker": "torch.Dockerfile",
    "patches": "horovod-0.28.1.patch",
    "scripts": "setup_mxnet.sh",
}


def data(name: str) -> Path:
    """bench's ``conf``, ``docker``, ``patches`` or ``scripts`` folder."""
    beside = PACKAGE.parent / name
    if (beside / _MARKERS[name]).is_file():
        return beside
    return PACKAGE / "_data" / name


def cache_dir() -> Path:
    """bench's per-user cache: device answers, the package index's answers, the
    environments of framework versions (``BENCH_CACHE``, else ``$XDG_CACHE_HOME/bench``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("BENCH_CACHE") or Path(base) / "bench")


def checkout() -> bool:
    """Whether bench runs from a source checkout (or its editable install), not a wheel."""
    return (PACKAGE.parent / "pyproject.toml").is_file() and data("conf") == PACKAGE.parent / "conf"


def source_root() -> Path:
    """A folder whose only import is ``bench``: what another environment (MXNet's, a
    framework version's) puts on its path to run bench's worker side.  The checkout in a
    checkout; for a wheel, a folder in the cache holding a link to the installed package
    (its site-packages folder would bring the host's numpy and torch along)."""
    if checkout():
        return PACKAGE.parent
    root = cache_dir() / "source"
    link = root / "bench"
    if not (link.is_symlink() and link.resolve() == PACKAGE):
        root.mkdir(parents=True, exist_ok=True)
        spare = root / f".bench-{os.getpid()}"
        spare.unlink(missing_ok=True)
        spare.symlink_to(PACKAGE, target_is_directory=True)
        spare.replace(link)  # atomic: a concurrent reader sees the old link or the new
    return root


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can enter (0700), made with its parents if
    missing; one an older bench made open to others is closed.  For folders holding run
    data (the spool, cached answers), never for environments, which others may run."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def write_private(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole, readable and writable by its owner only (0600): a reader sees
    the old file or the new one, never a part; a link at its name is replaced, not
    followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def writable_by_others(st: os.stat_result) -> bool:
    """Whether a file or folder of this user, by its ``st``, can be written by another
    user: writable by all, or by a group that is not the user's own private group (the
    user private groups of Debian and Ubuntu, where the default umask 002 makes every new
    folder group-writable and the group holds the user alone)."""
    if st.st_mode & 0o002:
        return True
    return bool(st.st_mode & 0o020) and not _private_group(st.st_gid)


@functools.lru_cache(maxsize=8)
def _private_group(gid: int) -> bool:
    """Whether ``gid`` is this user's primary group and no other user is in it, by name or
    as their own primary group."""
    import grp
    import pwd

    try:
        me = pwd.getpwuid(os.getuid())
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return False
    if gid != me.pw_gid or members - {me.pw_name}:
        return False
    return all(p.pw_gid != gid or p.pw_uid == me.pw_uid for p in pwd.getpwall())


def owned_private(path: Path) -> bool:
    """Whether ``path`` is a regular file of this user that no one else can write: what a
    cached answer must be before bench believes it (a shared cache folder may hold another
    user's)."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not writable_by_others(st)


@contextlib.contextmanager
def locked(path: Path, *, best_effort: bool = False) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created, with its folder, if missing)
    for the block: the one file lock of bench's shared stores and caches.  With
    ``best_effort``, go ahead without it where the file cannot be created (a read-only
    store)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115 - closed below
    except OSError:
        if not best_effort:
            raise
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
