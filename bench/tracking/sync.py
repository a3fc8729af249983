"""Syncing the spool: every spooled trial record logged to its tracking server."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench.config import BenchConfig
from bench.result import OK, TrialResult
from bench.tracking.spool import spooled
from bench.tracking.store import MlflowStore, MlflowTrialRun


def _existing_run(store: MlflowStore, run_id: str | None) -> bool:
    if not run_id:
        return False
    try:
        store.client.get_run(run_id)
        return True
    except Exception:  # noqa: BLE001 - not in this store
        return False


def sync_spool(directory: Path | None = None, uri: str | None = None) -> int:
    """Log every spooled record to its tracking server; return how many were synced.

    A record whose trial or sweep already has a run in the target store (the store failed
    part-way through) completes that run; otherwise new runs are made.  Errors propagate
    and leave the remaining records in the spool.
    """
    from bench.config import from_dict

    synced = 0
    stores: dict[tuple[str, str], MlflowStore] = {}
    sweeps: dict[tuple[str, str], tuple[MlflowStore, str, bool]] = {}
    for path in spooled(directory):
        record = json.loads(path.read_text())
        target = uri or record["tracking_uri"]
        store_key = (target, record["experiment"])
        if store_key not in stores:
            stores[store_key] = MlflowStore(target, record["experiment"])
        store = stores[store_key]
        key = (target, record["sweep_id"])
        if key not in sweeps:
            sweep = record["sweep"]
            original = sweep["tags"].get("bench.spooled_from_sweep_run")
            if _existing_run(store, original):
                sweeps[key] = (store, original, True)
            else:
                tags = {**sweep["tags"], "bench.synced_from_spool": "true"}
                sweeps[key] = (store, store.start_sweep(sweep["name"], tags), True)
        sweep_id = sweeps[key][1]
        cfg = from_dict(BenchConfig, record["config"])
        result = TrialResult.from_dict(record["result"])
        tags = record["tags"]
        original_run = tags.get("bench.spooled_from_run")
        if _existing_run(store, original_run):
            run = MlflowTrialRun(store, original_run, cfg, sweep_id, record["name"], tags)
        else:
            run = store._start_trial(sweep_id, cfg, record["name"], tags)
        with tempfile.TemporaryDirectory() as tmp:
            files: list[Path] = []
            for name, content in record["files"].items():
                target = Path(tmp, name)
                target.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, dict):  # binary, see _spool_files
                    import base64

                    target.write_bytes(base64.b64decode(content["base64"]))
                else:
                    target.write_text(content)
                top = Path(tmp, Path(name).parts[0])  # a directory is logged as one artifact
                if top not in files:
                    files.append(top)
            run._finish(result, files)
        if result.status != OK:
            sweeps[key] = (store, sweep_id, False)
        path.unlink()
        synced += 1
    for store, sweep_id, ok in sweeps.values():
        if store.client.get_run(sweep_id).info.status == "RUNNING":
            store.client.set_terminated(sweep_id, "FINISHED" if ok else "FAILED")
    return synced
