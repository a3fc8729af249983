"""Syncing the spool: every spooled trial record logged to its tracking server.

A record is checked before anything is made from it (:func:`.spool.read_record`, and its
tracking URI must be the one its folder is named for): one that is not what bench writes
is refused in one line on stderr and left where it is, and no run, file or artifact is made
from it."""

from __future__ import annotations

import base64
import re
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

from bench.core.config import BenchConfig
from bench.core.result import OK, TrialResult
from bench.tracking.reach import one_line, reachable, redact
from bench.tracking.spool import (
    ORIGIN_TAG,
    RECORD_TAG,
    SWEEP_END,
    BadRecord,
    bad_file_name,
    origin_hash,
    read_record,
    spool_dir,
    spooled,
    spooled_ends,
)
from bench.tracking.store import MlflowStore, MlflowTrialRun

_RECORD_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def _sweep_target(store: MlflowStore, record: dict[str, Any]) -> str:
    """The parent run of a record's sweep in ``store``: the one that carries the hash of the
    record's secret (the sweep's own run, or the one an earlier sync made for it), else a new
    one.  A run the record merely names (``bench.spooled_from_sweep_run``) is never taken:
    only the secret proves a record's origin."""
    sweep = record["sweep"]
    origin = sweep.get("origin", "")
    tags = {k: v for k, v in sweep["tags"].items() if k != "bench.spooled_from_sweep_run"}
    if origin:
        mark = origin_hash(origin)
        found = store.client.search_runs(
            [store.experiment_id],
            filter_string=f"tags.`{ORIGIN_TAG}` = '{mark}' and tags.`bench.sweep` = 'true'",
            max_results=1,
        )
        if found:
            run_id = str(found[0].info.run_id)
            store.sweeps[run_id] = {"name": sweep["name"], "tags": tags, "origin": origin}
            return run_id
    return store.start_sweep(sweep["name"], {**tags, "bench.synced_from_spool": "true"}, origin)


def _trial_target(
    store: MlflowStore, record: dict[str, Any], sweep_id: str, name: str
) -> tuple[str | None, bool]:
    """The existing run a trial record completes, and whether it is done already: the run the
    sweep made for it (``bench.spooled_from_run``) or the one an earlier sync made from this
    record, each taken only if it carries the hash of the record's secret and belongs to the
    same parent run; (None, False) where there is none (a new run is made)."""
    origin = record["sweep"].get("origin", "")
    if not origin:
        return None, False
    mark = origin_hash(origin)
    runs = []
    original = record["tags"].get("bench.spooled_from_run")
    if original:
        try:
            runs.append(store.client.get_run(original))
        except Exception:  # noqa: BLE001 - not in this store
            pass
    runs += store.client.search_runs(
        [store.experiment_id],
        filter_string=f"tags.`{ORIGIN_TAG}` = '{mark}' and tags.`{RECORD_TAG}` = '{name}'",
        max_results=1,
    )
    for run in runs:
        tags = run.data.tags
        if (
            tags.get(ORIGIN_TAG) != mark
            or tags.get("mlflow.parentRunId") != sweep_id
            or run.info.experiment_id != store.experiment_id
        ):
            continue
        if run.info.status == "RUNNING":
            return str(run.info.run_id), False
        if tags.get(RECORD_TAG) == name:
            return str(run.info.run_id), True  # delivered; only the record's removal was lost
    return None, False


def _resume(run: MlflowTrialRun) -> None:
    """Note the points an existing run has already, so that completing it logs no metric
    twice at one step (a resync doubled every epoch's history)."""
    got = run.client.get_run(run.run_id)
    for key in got.data.metrics:
        for point in run.client.get_metric_history(run.run_id, key):
            run.logged_points.add((key, int(point.step)))


def sync_spool(
    directory: Path | None = None,
    uri: str | None = None,
    refused: list[Path] | None = None,
    failed: list[str] | None = None,
) -> int:
    """Log every spooled record to its tracking server; return how many trials were synced.

    A record whose trial or sweep already has a run in the target store, proven by the
    record's secret (the store failed part-way through, or a sync was interrupted), completes
    that run; otherwise new runs are made, tagged with the record's name so that a sync run
    again finds them.  A spooled sweep end then closes its sweep's run with the status and
    summary table the sweep printed.  A record that is not what bench writes is refused (a
    line on stderr, its path added to ``refused``) and stays; one that the store takes but
    cannot log is moved to the spool's ``quarantine/`` folder (a line, added to ``refused``);
    a tracking URI out of reach is skipped with one line (added to ``failed``), its records
    stay, and the other URIs' records are synced.
    """
    from bench.core.config import from_dict

    synced = 0
    stores: dict[tuple[str, str], MlflowStore] = {}
    sweeps: dict[tuple[str, str], tuple[MlflowStore, str, bool]] = {}
    dead: dict[str, str] = {}

    def say(line: str) -> None:
        print(f"bench.cli.sync: {line}", file=sys.stderr)

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
            sweeps[key] = (store, _sweep_target(store, record), True)
        return sweeps[key]

    def checked(path: Path) -> dict[str, Any] | None:
        """The record at ``path`` if it can be synced; else one line, and it stays."""
        try:
            if not _RECORD_NAME.fullmatch(path.name):
                raise BadRecord("its file name is not one bench writes")
            record = read_record(path)
            if uri is None and spool_dir(record["tracking_uri"]).name != path.parent.name:
                raise BadRecord("its tracking_uri is not the one its spool folder is for")
            if path.name.endswith(SWEEP_END):
                return record
            record["cfg"] = from_dict(BenchConfig, record["config"])
            record["trial"] = TrialResult.from_dict(record["result"])
        except (BadRecord, KeyError, TypeError, ValueError) as exc:
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            say(f"{path}: refused, left in place: {why}")
            if refused is not None:
                refused.append(path)
            return None
        return record

    def unreachable(record: dict[str, Any], exc: BaseException) -> bool:
        """Whether ``exc`` means the record's tracking URI is out of reach (then it is
        skipped, once said); otherwise the record is at fault."""
        target = uri or record["tracking_uri"]
        if target in dead:
            return True
        if isinstance(exc, ConnectionError) or (
            urllib.parse.urlsplit(target).scheme in ("http", "https") and reachable(target)
        ):
            dead[target] = one_line(exc)
            say(f"{redact(target)}: out of reach ({redact(dead[target])[:300]}); its records stay")
            if failed is not None:
                failed.append(target)
            return True
        return False

    def quarantine(path: Path, exc: BaseException) -> None:
        folder = path.parent / "quarantine"
        folder.mkdir(mode=0o700, exist_ok=True)
        path.rename(folder / path.name)
        say(f"{path}: could not be logged ({one_line(exc)[:300]}); moved to {folder}/")
        if refused is not None:
            refused.append(path)

    for path in spooled(directory):
        record = checked(path)
        if record is None or (uri or record["tracking_uri"]) in dead:
            continue
        try:
            with tempfile.TemporaryDirectory() as tmp:
                files = _unpack(record["files"], Path(tmp))  # before any run is made
                store, sweep_id, ok = sweep_run(record)
                cfg, result, tags = record["cfg"], record["trial"], record["tags"]
                existing, done = _trial_target(store, record, sweep_id, path.name)
                if existing is None:
                    tags = {**tags, RECORD_TAG: path.name}
                    run = store._start_trial(sweep_id, cfg, record["name"], tags)
                    run._finish(result, files)
                elif not done:
                    run = MlflowTrialRun(store, existing, cfg, sweep_id, record["name"], tags)
                    _resume(run)
                    run._finish(result, files)
        except Exception as exc:  # noqa: BLE001 - a dead URI is skipped; a bad record set aside
            if not unreachable(record, exc):
                quarantine(path, exc)
            continue
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
        if record is None or (uri or record["tracking_uri"]) in dead:
            continue
        try:
            store, sweep_id, _ = sweep_run(record)
            store.close_sweep(sweep_id, record["ok"], record["killed"], record["summary"])
        except Exception as exc:  # noqa: BLE001 - as above
            if not unreachable(record, exc):
                quarantine(path, exc)
            continue
        ended.add(sweep_id)
        path.unlink()
    for store, sweep_id, ok in sweeps.values():  # a sweep whose end was not spooled
        if store.uri in dead:
            continue
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
