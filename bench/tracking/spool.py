"""The spool: complete trial records kept on local disk while the tracking server cannot
be reached, one folder per tracking URI under bench's per-user state directory (the same
from any working directory); :mod:`.sync` logs them later.

Records hold run data (configs, results, artifacts), so their folders are 0700 and the
records 0600, each written whole.  A record is not trusted when read back: :mod:`.sync`
checks it first (:func:`check_record`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import secrets
import sys
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from bench.core.config import BenchConfig, to_dict
from bench.core.paths import private_dir, write_private
from bench.core.result import EpochRecord, TrialResult
from bench.trial.runtime.protocol import MAX_READ, read_regular

SWEEP_END = ".sweep-end"  # a spooled sweep's end; trial records end in ``.json``
# The most of a trial's files a spooled record holds, as written: well under what sync reads
# of a record (bench.trial.runtime.protocol.MAX_READ), so that no record is spooled that it refuses.
SPOOL_FILES_MAX = MAX_READ // 2
# The proof of a sweep's origin: a secret made when the sweep starts, kept only in its
# spool records (0600), whose hash its runs carry as this tag.  bench sync writes to an
# existing run only where a record's secret hashes to the run's tag, which a crafted record
# naming another sweep's run cannot give.
ORIGIN_TAG = "bench.origin_sha256"
# The record a run was made from by bench sync, so that a sync run again finds it.
RECORD_TAG = "bench.spool_record"
# The only MLflow system tag a record may carry (the sweep's commit); mlflow.parentRunId and
# the others are set by bench itself, never taken from a record.
ALLOWED_MLFLOW_TAGS = frozenset({"mlflow.source.git.commit"})


def new_origin() -> str:
    """A new sweep's secret (:data:`ORIGIN_TAG`)."""
    return secrets.token_hex(16)


def origin_hash(secret: str) -> str:
    """What a sweep's runs carry as :data:`ORIGIN_TAG`."""
    return hashlib.sha256(f"bench-origin:{secret}".encode()).hexdigest()


def state_dir() -> Path:
    """bench's per-user state: ``$BENCH_STATE_DIR``, else ``$XDG_STATE_HOME/bench``, else
    ``~/.local/state/bench``."""
    if os.environ.get("BENCH_STATE_DIR"):
        return Path(os.environ["BENCH_STATE_DIR"]).expanduser().resolve()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser().resolve() / "bench"


def spool_root() -> Path:
    """Where the spools of every tracking URI live (one folder each)."""
    return state_dir() / "spool"


def spool_dir(uri: str) -> Path:
    """The spool of one tracking URI: the same folder from whatever directory bench runs."""
    return spool_root() / hashlib.sha256(uri.encode()).hexdigest()[:12]


class Spool:
    """Keeps complete trial records on local disk while the tracking server is unreachable:
    a :class:`~.protocol.Store` like the MLflow store, which sweeps write through alike."""

    def __init__(self, uri: str, experiment: str, reason: str) -> None:
        self.uri, self.experiment, self.reason = uri, experiment, reason
        self.directory = spool_dir(uri)
        private_dir(spool_root())
        private_dir(self.directory)
        write_private(self.directory / "uri", uri + "\n")  # whose spool this is, for people
        self.where = f"{self.directory}/ (tracking store {uri} out of reach: {reason})"
        self.sweeps: dict[str, dict[str, Any]] = {}

    def spooled_to(self) -> Path:
        return self.directory  # every result of this store

    def start_sweep(self, name: str, tags: dict[str, str]) -> str:
        sweep_id = uuid.uuid4().hex
        self.sweeps[sweep_id] = {"name": name, "tags": tags, "origin": new_origin()}
        return sweep_id

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None:
        """Keep the sweep's end (its status and summary table) for :mod:`.sync`, which
        closes the sweep's run with them after logging its trials."""
        record = {
            "tracking_uri": self.uri,
            "experiment": self.experiment,
            "sweep_id": sweep_id,
            "sweep": self.sweeps.get(sweep_id, {"name": "sweep", "tags": {}}),
            "ok": ok,
            "killed": killed,
            "summary": summary,
        }
        path = self.directory / f"{time.time_ns()}-{sweep_id[:8]}{SWEEP_END}"
        write_private(path, json.dumps(record, indent=1))

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None:
        return None

    def running_elsewhere(self, cfg: BenchConfig) -> str:
        return ""  # a spool sees no other sweep's runs

    def note_parity(self, sweep_id: str, group: str, text: str, verdict: str) -> None:
        pass  # the verdicts reach the trials' records; the tables were printed

    def note_round(self, sweep_id: str, round_: int, reference_s: float) -> None:
        pass  # printed with the round; the parent run is out of reach

    def note_reused_run(self, sweep_id: str, run_id: str) -> None:
        pass  # a spool sees no earlier runs, so it reuses none

    def start_trial(
        self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> SpooledTrial:
        return SpooledTrial(self, sweep_id, cfg, name, tags)

    def sweep_trials(self, sweep_id: str) -> list[dict[str, Any]]:
        return []  # spooled records are complete; nothing to read back

    def reap_orphans(self) -> int:
        return 0  # the server is out of reach

    def close_trial(self, run_id: str, status: str, error: str) -> None:
        pass


class SpooledTrial:
    def __init__(
        self, spool: Spool, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> None:
        self.spool, self.sweep_id, self.cfg, self.name, self.tags = spool, sweep_id, cfg, name, tags

    def log_epoch(self, record: EpochRecord) -> None:
        pass  # the whole record is written when the trial ends

    def finish(self, result: TrialResult, files: list[Path]) -> None:
        record = {
            "tracking_uri": self.spool.uri,
            "experiment": self.spool.experiment,
            "sweep_id": self.sweep_id,
            "sweep": self.spool.sweeps[self.sweep_id],
            "name": self.name,
            "tags": self.tags,
            "config": to_dict(self.cfg),
            "result": result.to_dict(),
            "files": {},
        }
        kept, left = _spool_files(files)
        if left:  # a record sync can read back whole, never one it refuses for ever
            names = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
            why = f"{names}: left out of the spooled record, over {SPOOL_FILES_MAX:,} bytes"
            said = result.environment.get("refused_files", "")
            result.environment["refused_files"] = "; ".join(filter(None, [said, why]))[:4000]
            print(f"bench: {self.name}: {why}", file=sys.stderr)
        record["result"], record["files"] = result.to_dict(), kept
        path = self.spool.directory / f"{int(time.time())}-{uuid.uuid4().hex[:8]}.json"
        write_private(path, json.dumps(record, indent=1, default=str))


def _spool_files(files: list[Path]) -> tuple[dict[str, Any], list[str]]:
    """Artifact contents by name (a directory's files as ``dir/sub/name``): text as is,
    anything else (plots, profiler traces) as ``{"base64": ...}``; at most
    :data:`SPOOL_FILES_MAX` bytes of them as written, the names of those left out."""

    out: dict[str, Any] = {}
    left: list[str] = []
    total = 0
    for path in files:
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in (f for f in found if f.exists()):
            name = file.relative_to(path.parent).as_posix()
            if total + file.stat().st_size > SPOOL_FILES_MAX:
                left.append(name)
                continue
            data = file.read_bytes()
            try:
                value: Any = data.decode()
            except UnicodeDecodeError:
                value = {"base64": base64.b64encode(data).decode()}
            size = len(json.dumps(value))
            if total + size > SPOOL_FILES_MAX:
                left.append(name)
                continue
            out[name] = value
            total += size
    return out, left


def spooled(directory: Path | None = None) -> list[Path]:
    """The spooled trial records: in ``directory``, or in every URI's spool."""
    return _files(directory, "*.json")


def spooled_ends(directory: Path | None = None) -> list[Path]:
    """The spooled ends of sweeps (status and summary), logged after their trials."""
    return _files(directory, f"*{SWEEP_END}")


def _files(directory: Path | None, pattern: str) -> list[Path]:
    folders = [directory] if directory is not None else sorted(spool_root().glob("*/"))
    return sorted(p for folder in folders for p in folder.glob(pattern))


class BadRecord(ValueError):
    """A spooled record that is not what bench writes; the message says why, in one line."""


def _strings(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def bad_file_name(name: str) -> str:
    """Why ``name`` (an artifact's name in a record) would leave the folder it is unpacked
    in ('' if it stays inside)."""
    parts = name.split("/")
    if PurePosixPath(name).is_absolute() or not name:
        return f"file name {name!r} is not relative"
    if any(p in ("", ".", "..") for p in parts) or "\0" in name:
        return f"file name {name!r} does not stay inside its folder"
    return ""


def _check_files(files: object) -> str:
    if not isinstance(files, dict):
        return "its files are not a mapping of names to contents"
    names = set(files)
    for name, content in files.items():
        why = bad_file_name(name) if isinstance(name, str) else "a file name is not text"
        if why:
            return why
        folders = ["/".join(name.split("/")[:i]) for i in range(1, name.count("/") + 1)]
        if any(folder in names for folder in folders):
            return f"file name {name!r} is inside another file"
        if isinstance(content, dict):
            if set(content) != {"base64"} or not isinstance(content["base64"], str):
                return f"file {name!r} is neither text nor {{'base64': ...}}"
            try:
                base64.b64decode(content["base64"], validate=True)
            except (binascii.Error, ValueError):
                return f"file {name!r} is not valid base64"
        elif not isinstance(content, str):
            return f"file {name!r} is neither text nor {{'base64': ...}}"
    return ""


def check_record(record: object, end: bool = False) -> str:
    """Why ``record`` (a trial record, or a sweep's end with ``end``) is not one bench
    writes ('' if it is): the fields and their types, and artifact names that stay inside
    the folder they are unpacked in."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for key in ("tracking_uri", "experiment", "sweep_id"):
        if not isinstance(record.get(key), str):
            return f"its {key} is missing or not text"
    sweep = record.get("sweep")
    if not (isinstance(sweep, dict) and isinstance(sweep.get("name"), str)):
        return "its sweep is missing or has no name"
    if not _strings(sweep.get("tags")):
        return "its sweep's tags are not text"
    origin = sweep.get("origin", "")
    if not (isinstance(origin, str) and (not origin or len(origin) == 32)):
        return "its sweep's origin is not what bench writes"
    tags = [*sweep["tags"], *(record.get("tags") or {})]
    system = sorted(t for t in tags if t.startswith("mlflow.") and t not in ALLOWED_MLFLOW_TAGS)
    if system:
        return f"it sets MLflow's own tag {system[0]!r}, which bench sets itself"
    if end:
        if not (isinstance(record.get("ok"), bool) and isinstance(record.get("killed"), bool)):
            return "its ok or killed is missing or not true/false"
        return "" if isinstance(record.get("summary"), str) else "its summary is not text"
    if not isinstance(record.get("name"), str) or not _strings(record.get("tags")):
        return "its name or tags are missing or not text"
    if not (isinstance(record.get("config"), dict) and isinstance(record.get("result"), dict)):
        return "its config or result is missing"
    return _check_files(record.get("files"))


def read_record(path: Path) -> dict[str, Any]:
    """The spooled record at ``path``, read without following a link and checked
    (:func:`check_record`); raises :class:`BadRecord` saying why it is not one."""
    try:
        record = json.loads(read_regular(path))
    except OSError as exc:
        raise BadRecord(f"cannot be read as a regular file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise BadRecord(f"is not JSON ({exc})") from None
    problem = check_record(record, end=path.name.endswith(SWEEP_END))
    if problem:
        raise BadRecord(problem)
    assert isinstance(record, dict)
    return record
