"""The spool: complete trial records kept on local disk while the tracking server cannot
be reached, one folder per tracking URI under bench's per-user state directory (the same
from any working directory); :mod:`.sync` logs them later."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from bench.config import BenchConfig, to_dict
from bench.result import EpochRecord, TrialResult

SWEEP_END = ".sweep-end"  # a spooled sweep's end; trial records end in ``.json``


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
    """Keeps complete trial records on local disk while the tracking server is unreachable."""

    def __init__(self, uri: str, experiment: str, reason: str) -> None:
        self.uri, self.experiment, self.reason = uri, experiment, reason
        self.directory = spool_dir(uri)
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "uri").write_text(uri + "\n")  # whose spool this is, for people
        self.where = f"{self.directory}/ (tracking store {uri} out of reach: {reason})"
        self.sweeps: dict[str, dict[str, Any]] = {}

    def start_sweep(self, name: str, tags: dict[str, str]) -> str:
        sweep_id = uuid.uuid4().hex
        self.sweeps[sweep_id] = {"name": name, "tags": tags}
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
        path.write_text(json.dumps(record, indent=1))

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None:
        return None

    def note_parity(self, sweep_id: str, group: str, text: str, verdict: str) -> None:
        pass  # the verdicts reach the trials' records; the tables were printed

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
            "files": _spool_files(files),
        }
        path = self.spool.directory / f"{int(time.time())}-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(record, indent=1, default=str))


def _spool_files(files: list[Path]) -> dict[str, Any]:
    """Artifact contents by name (a directory's files as ``dir/sub/name``): text as is,
    anything else (plots, profiler traces) as ``{"base64": ...}``."""

    out: dict[str, Any] = {}
    for path in files:
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in (f for f in found if f.exists()):
            name = file.relative_to(path.parent).as_posix()
            data = file.read_bytes()
            try:
                out[name] = data.decode()
            except UnicodeDecodeError:
                out[name] = {"base64": base64.b64encode(data).decode()}
    return out


def spooled(directory: Path | None = None) -> list[Path]:
    """The spooled trial records: in ``directory``, or in every URI's spool."""
    return _files(directory, "*.json")


def spooled_ends(directory: Path | None = None) -> list[Path]:
    """The spooled ends of sweeps (status and summary), logged after their trials."""
    return _files(directory, f"*{SWEEP_END}")


def _files(directory: Path | None, pattern: str) -> list[Path]:
    folders = [directory] if directory is not None else sorted(spool_root().glob("*/"))
    return sorted(p for folder in folders for p in folder.glob(pattern))
