"""Where bench's own files are.  In a source checkout (and its editable install) ``conf/``,
``docker/``, ``patches/`` and the set-up scripts sit beside the package; an installed wheel
carries copies of them inside the package (``bench/_data/``, put there by setup.py's build
step), so that ``bench`` runs from any directory."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
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
