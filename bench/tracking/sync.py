"""Syncing the spool: every spooled trial record logged to its tracking server.

A record is checked before anything is made from it (:func:`.spool.read_record`, and its
tracking URI must be the one its folder is named for): one that is not what bench writes
is refused in one line on stderr and left where it is, and no run, file or artifact is made
from it."""

from __future__ import annotations

import base64
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

from bench.core.config import BenchConfig
from bench.core.result import OK, TrialResult
from bench.tracking.reach import reachable
from bench.tracking.spool import (
    SWEEP_END,
    BadRecord,
    bad_file_name,
    read_record,
    spool_dir,
    spooled,
    spooled_ends,
)
from bench.tracking.store import MlflowStore, MlflowTrialRun


def _existing_run(store: MlflowStore, run_id: str | None) -> bool:
    if not run_id:
        return False
    try:
        store.client.get_run(run_id)
        return True
    except Exception:  # noqa: BLE001 - not in this store
        return False


def sync_spool(
    directory: Path | None = None, uri: str | None = None, refused: list[Path] | None = None
) -> int:
    """Log every spooled record to its tracking server; return how many trials were synced.

    A record whose trial or sweep already has a run in the target store (the store failed
    part-way through) completes that run; otherwise new runs are made.  A spooled sweep
    end then closes its sweep's run with the status and summary table the sweep printed.
    A record that is not what bench writes is refused (a line on stderr, its path added to
    ``refused``) and stays; the
    store's errors propagate and leave the remaining records in the spool.
    """
    from bench.core.config import from_dict

    synced = 0
    stores: dict[tuple[str, str], MlflowStore] = {}
    sweeps: dict[tuple[str, str], tuple[MlflowStore, str, bool]] = {}

    def sweep_run(record: dict[str, Any]) -> tuple[MlflowStore, str, bool]:
        target = uri or record["tracking_uri"]
        if (target, record["experiment"]) not in stores:
            # A server that wants credentials takes them from the environment now (the
            # spool never held them): where they are missing or wrong, say so.
            if urllib.parse.urlsplit(target).scheme in ("http", "https"):
                problem = reachable(target)
                if problem is not None:
                    raise ConnectionError(f"{target}: {problem}")
            stores[target, record["experiment"]] = MlflowStore(target, record["experiment"])
        store = stores[target, record["experiment"]]
        key = (target, record["sweep_id"])
        if key not in sweeps:
            sweep = record["sweep"]
            original = sweep["tags"].get("bench.spooled_from_sweep_run")
            if _existing_run(store, original):
                sweeps[key] = (store, original, True)
            else:
                tags = {**sweep["tags"], "bench.synced_from_spool": "true"}
                sweeps[key] = (store, store.start_sweep(sweep["name"], tags), True)
        return sweeps[key]

    def checked(path: Path) -> dict[str, Any] | None:
        """The record at ``path`` if it can be synced; else one line, and it stays."""
        try:
            record = read_record(path)
            if uri is None and spool_dir(record["tracking_uri"]).name != path.parent.name:
                raise BadRecord("its tracking_uri is not the one its spool folder is for")
            if path.name.endswith(SWEEP_END):
                return record
            record["cfg"] = from_dict(BenchConfig, record["config"])
            record["trial"] = TrialResult.from_dict(record["result"])
        except (BadRecord, KeyError, TypeError, ValueError) as exc:
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            print(f"bench.cli.sync: {path}: refused, left in place: {why}", file=sys.stderr)
            if refused is not None:
                refused.append(path)
            return None
        return record

    for path in spooled(directory):
        record = checked(path)
        if record is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            files = _unpack(record["files"], Path(tmp))  # before any run is made
            store, sweep_id, ok = sweep_run(record)
            cfg, result, tags = record["cfg"], record["trial"], record["tags"]
            original_run = tags.get("bench.spooled_from_run")
            if _existing_run(store, original_run):
                run = MlflowTrialRun(store, original_run, cfg, sweep_id, record["name"], tags)
            else:
                run = store._start_trial(sweep_id, cfg, record["name"], tags)
            run._finish(result, files)
        sweeps[uri or record["tracking_uri"], record["sweep_id"]] = (
            store,
            sweep_id,
            ok and result.status == OK,
        )
        path.unlink()
        synced += 1
    ended: set[str] = set()
    for path in spooled_ends(directory):
        record = checked(path)
        if record is None:
            continue
        store, sweep_id, _ = sweep_run(record)
        store.close_sweep(sweep_id, record["ok"], record["killed"], record["summary"])
        ended.add(sweep_id)
        path.unlink()
    for store, sweep_id, ok in sweeps.values():  # a sweep whose end was not spooled
        if sweep_id not in ended and store.client.get_run(sweep_id).info.status == "RUNNING":
            store.client.set_terminated(sweep_id, "FINISHED" if ok else "FAILED")
    return synced


def _unpack(files: dict[str, Any], tmp: Path) -> list[Path]:
    """A checked record's artifacts written back to files under ``tmp``: the paths to log
    (a directory as one artifact).  A name that would leave ``tmp`` raises
    :class:`BadRecord` (:func:`.spool.read_record` refused it already)."""
    out: list[Path] = []
    inside = tmp.resolve()
    for name, content in files.items():
        target = tmp / name
        if bad_file_name(name) or not target.resolve().is_relative_to(inside):
            raise BadRecord(f"file name {name!r} does not stay inside its folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, dict):  # binary, see spool._spool_files
            target.write_bytes(base64.b64decode(content["base64"]))
        else:
            target.write_text(content)
        top = tmp / Path(name).parts[0]
        if top not in out:
            out.append(top)
    return out
