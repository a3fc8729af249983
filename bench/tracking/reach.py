"""Whether a tracking store can be reached and written, said in one line."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path


def reachable(uri: str, timeout_s: float = 5.0) -> str | None:
    """None if an http(s) tracking server answers, else why not."""
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # it answered; an older server may lack /health
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def one_line(exc: BaseException) -> str:
    """An exception in one line: the database's own words where MLflow wraps SQLAlchemy
    wraps sqlite3 (their messages carry the SQL and a link on further lines)."""
    cause: BaseException | None = exc
    while cause is not None:
        lines = [line.strip() for line in str(cause).strip().splitlines() if line.strip()]
        if lines:
            named = [line for line in lines if "Error)" in line or "rror:" in line]
            return (named or lines)[0][:300]
        cause = cause.__cause__
    return type(exc).__name__


def why_unavailable(uri: str, exc: BaseException) -> str:
    """One line on why ``uri`` failed: the database's own words, with the free space where
    the store is a local file on a full disk."""
    words = one_line(exc)
    line = f"the tracking store {uri} cannot be written ({words})"
    local = local_path(uri)
    if local is not None and ("disk is full" in words or "No space left" in words):
        try:
            free = f"{shutil.disk_usage(local).free // 1024} KiB free in {local}"
        except OSError:
            free = f"{local} is full"
        line += f"; {free}: free some space or pick another tracking.uri"
    return line


def local_path(uri: str) -> Path | None:
    """The directory of a local store (a sqlite file's folder, a ``file:`` store)."""
    parsed = urllib.parse.urlparse(uri)
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :]).resolve().parent
    if parsed.scheme in ("", "file"):
        return Path(parsed.path).resolve()
    return None
