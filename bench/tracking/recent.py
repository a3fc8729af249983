"""The store the last sweep logged to, remembered in bench's per-user cache, so that the
commands that read a store afterwards (``bench reproduce``, ``bench ui``) look where the
sweep wrote without being told again.  The URI is kept without credentials (they go to
MLflow's variables before a store is opened) and only where a sweep opened it.  The note is
a file in bench's cache, or the file ``BENCH_LAST_STORE`` names (the test suite's own, so that
its sweeps never replace the one a user's last sweep left)."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from bench.core import paths

FILE = "last_store"


def _file() -> Path:
    named = os.environ.get("BENCH_LAST_STORE")
    return Path(named) if named else paths.cache_dir() / FILE


def _bare(uri: str) -> str:
    """``uri`` without a user or password (``http://USER:PASSWORD@HOST`` -> ``http://HOST``),
    a relative SQLite path made absolute (it is read from elsewhere later)."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):  # from here
        return f"sqlite:///{Path(uri.removeprefix('sqlite:///')).resolve()}"
    parsed = urllib.parse.urlsplit(uri)
    if "@" not in parsed.netloc:
        return uri
    return urllib.parse.urlunsplit(parsed._replace(netloc=parsed.netloc.rpartition("@")[2]))


def remember(uri: str) -> None:
    """Note ``uri`` as the store bench used last; never fails a sweep."""
    try:
        _file().parent.mkdir(parents=True, exist_ok=True)
        _file().write_text(_bare(uri) + "\n")
    except OSError:
        pass


def last_store() -> str | None:
    """The store the last sweep on this account logged to, None where none is noted."""
    try:
        uri = _file().read_text().strip()
    except OSError:
        return None
    return uri or None


def store_or_last(given: str | None, default: str) -> tuple[str, str]:
    """The store a reading command uses and why, in words: ``given`` (``--tracking-uri``),
    else the last sweep's, else ``default`` (bench's default store)."""
    if given:
        return given, "--tracking-uri"
    last = last_store()
    if last:
        return last, "the store of the last sweep"
    return default, "bench's default store"
