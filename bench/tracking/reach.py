"""Whether a tracking store can be reached and written, said in one line."""

from __future__ import annotations

import base64
import os
import re
import shutil
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

USERNAME_VAR, PASSWORD_VAR = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]*)@")


def redact(text: str) -> str:
    """``text`` with the credentials of every URI in it replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)


def take_credentials(uri: str) -> str:
    """An http(s) tracking URI without its credentials (``http://USER:PASSWORD@HOST``),
    which go where MLflow's own client reads them, this process's ``MLFLOW_TRACKING_USERNAME``
    and ``MLFLOW_TRACKING_PASSWORD`` (the processes it starts inherit them).  So the URI that
    bench prints, spools and logs never holds a password; ``bench sync`` takes them from the
    environment at sync time."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme not in ("http", "https") or "@" not in parsed.netloc:
        return uri
    userinfo, _, host = parsed.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    os.environ[USERNAME_VAR] = urllib.parse.unquote(user)
    os.environ[PASSWORD_VAR] = urllib.parse.unquote(password)
    return urllib.parse.urlunsplit(parsed._replace(netloc=host))


# How long the health probe waits where MLflow's own MLFLOW_HTTP_REQUEST_TIMEOUT is not
# set (MLflow's default, 120 s, is a long wait for a server that is down).
PROBE_TIMEOUT_S = 5.0
TIMEOUT_VAR = "MLFLOW_HTTP_REQUEST_TIMEOUT"


def probe_timeout_s() -> float:
    """The health probe's wait: MLflow's own ``MLFLOW_HTTP_REQUEST_TIMEOUT`` where it is set
    (so that a slow server MLflow would wait for is not taken for a dead one, by a sweep or
    by ``bench sync``), else :data:`PROBE_TIMEOUT_S`."""
    try:
        given = float(os.environ.get(TIMEOUT_VAR, ""))
    except ValueError:
        return PROBE_TIMEOUT_S
    return given if given > 0 else PROBE_TIMEOUT_S


def reachable(uri: str, timeout_s: float | None = None) -> str | None:
    """None if an http(s) tracking server answers, else why not (one line).  The request
    carries the credentials MLflow would send; a server that refuses them answered, but
    bench cannot log there: that is said, naming the variables.  ``timeout_s``: by default
    :func:`probe_timeout_s`."""
    timeout_s = probe_timeout_s() if timeout_s is None else timeout_s
    url = take_credentials(uri).rstrip("/") + "/health"
    request = urllib.request.Request(url)
    user, password = os.environ.get(USERNAME_VAR), os.environ.get(PASSWORD_VAR)
    if user is not None and password is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            given = "were refused" if user is not None else "are needed and none were given"
            return (
                f"the server asks for credentials (HTTP {exc.code}), which {given}: put them in "
                f"the URI (http://USER:PASSWORD@HOST) or in {USERNAME_VAR} and {PASSWORD_VAR}"
            )
        return None  # it answered; an older server may lack /health
    except (urllib.error.URLError, OSError) as exc:
        return redact(str(getattr(exc, "reason", exc)))


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


class HalfBuiltStore(LookupError):
    """A sqlite store whose creation was stopped before MLflow finished it: no store to use."""


def half_built(db: Path) -> str:
    """Why the sqlite store ``db`` is half-built ('' if it is not, or there is none).

    MLflow makes a new store's tables, runs its migrations, then adds the Default
    experiment.  A store with tables but neither an experiment nor a run was stopped in
    between (Ctrl-C or SIGTERM while an older bench created it in place): MLflow cannot
    finish it ("table ... already exists") and it holds nothing to lose."""
    try:
        if db.stat().st_size == 0:
            return ""
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    except (OSError, sqlite3.Error):
        return ""
    try:
        tables = {
            row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            return ""
        if not tables & {"experiments", "runs", "alembic_version"}:
            names = ", ".join(sorted(tables)[:5])
            return (
                f"{db} is another application's SQLite database (its tables: {names}), not an "
                "MLflow store: name a new file, or an MLflow store, in the tracking URI"
            )

        def rows(table: str) -> int:
            return (
                int(con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                if table in tables
                else 0
            )

        if rows("experiments") or rows("runs"):
            return ""
    except sqlite3.Error:
        return ""  # not a database: MLflow says so in its own words
    finally:
        con.close()
    return (
        f"{db} is half-built (its creation was interrupted before MLflow finished; it holds "
        "no runs): remove it and run again (bench now creates a store whole or not at all)"
    )
