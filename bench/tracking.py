"""Everything that touches MLflow lives here.

A sweep is a parent run; each trial is a child run (``mlflow.parentRunId``).  Per-epoch
metrics are logged with ``step=epoch`` as the trial reports them; the rest when it ends.

When an ``http(s)`` tracking server cannot be reached, :func:`open_store` returns a
:class:`Spool` instead: complete trial records are written as JSON under
``mlruns/spool/`` and ``python -m bench.sync`` logs them to the server later.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Protocol

from bench.config import BenchConfig, config_hash, flatten, to_dict
from bench.result import KILLED, OK, EpochRecord, TrialResult

SPOOL_DIR = Path("mlruns/spool")
_MAX_PARAM_LEN = 6000
_BATCH = 100  # MLflow accepts at most 100 params or tags per log_batch call


def _quiet() -> None:
    for name in ("mlflow", "alembic", "alembic.runtime.migration", "sqlalchemy", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def trial_tags(cfg: BenchConfig, result: TrialResult | None = None) -> dict[str, str]:
    tags = {
        "bench.framework": cfg.framework.name,
        "bench.model": cfg.model.name,
        "bench.mode": cfg.mode,
        "bench.config_hash": config_hash(cfg),
        "bench.launcher": cfg.launcher.name,
    }
    if result is not None:
        tags["bench.status"] = result.status
        if result.device:
            tags["bench.device"] = result.device
        for key, value in result.environment.items():
            tags[f"bench.{key}"] = value
        if result.error:
            tags["bench.error"] = result.error[-4000:]
    return tags


def trial_metrics(result: TrialResult) -> dict[str, float]:
    out: dict[str, float] = {}
    out.update(result.summary)
    out.update(result.phases)
    out["epochs_completed"] = float(len(result.epochs))
    return out


class TrialRun(Protocol):
    def log_epoch(self, record: EpochRecord) -> None: ...

    def finish(self, result: TrialResult, files: list[Path]) -> None: ...


class Store(Protocol):
    where: str

    def start_sweep(self, name: str, tags: dict[str, str]) -> str: ...

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None: ...

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None: ...

    def start_trial(
        self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> TrialRun: ...


def _artifact_root(uri: str) -> str | None:
    """Artifacts beside a local sqlite database: ``<db dir>/artifacts``."""
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///") :]).resolve().parent / "artifacts").as_uri()
    return None


class MlflowStore:
    def __init__(self, uri: str, experiment: str) -> None:
        # A dead server should cost seconds, not MLflow's default minutes of retries, before
        # results go to the spool; both can still be set in the environment.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        from mlflow.tracking import MlflowClient

        _quiet()  # after the import: mlflow sets its own log level when imported

        local = uri.startswith("sqlite:///")
        if local:
            Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=uri)
        self.uri, self.experiment = uri, experiment
        self.where = f"{uri} (experiment {experiment!r})"
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.spool: Spool | None = None
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=_artifact_root(uri)
            )
        else:
            self.experiment_id = found.experiment_id

    def start_sweep(self, name: str, tags: dict[str, str]) -> str:
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={"bench.sweep": "true", **tags}
        )
        self.sweeps[run.info.run_id] = {"name": name, "tags": tags}
        return str(run.info.run_id)

    def fallback(self, sweep_id: str, exc: BaseException) -> Spool:
        """The spool that takes over when the store fails in the middle of a sweep."""
        if self.spool is None:
            self.spool = Spool(self.uri, self.experiment, f"{type(exc).__name__}: {exc}")
            print(f"bench: logging failed; results are kept in {self.spool.where}", file=sys.stderr)
        if sweep_id not in self.spool.sweeps:
            sweep = self.sweeps.get(sweep_id, {"name": "sweep", "tags": {}})
            tags = {**sweep["tags"], "bench.spooled_from_sweep_run": sweep_id}
            self.spool.sweeps[sweep_id] = {"name": sweep["name"], "tags": tags}
        return self.spool

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None:
        try:
            self.client.set_tag(sweep_id, "mlflow.note.content", f"```\n{summary}\n```")
            self.client.log_text(sweep_id, summary, "summary.txt")
            status = "KILLED" if killed else ("FINISHED" if ok else "FAILED")
            self.client.set_terminated(sweep_id, status)
        except Exception as exc:  # noqa: BLE001 - the trials are already recorded
            print(f"bench: could not close the sweep's run {sweep_id}: {exc}", file=sys.stderr)

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None:
        try:
            return self._find_ok_run(cfg)
        except Exception:  # noqa: BLE001 - unreachable store: run the trial rather than skip
            return None

    def _find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None:
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=(
                f"tags.`bench.config_hash` = '{config_hash(cfg)}' and tags.`bench.status` = '{OK}'"
            ),
            max_results=1,
            order_by=["attributes.start_time DESC"],
        )
        if not runs:
            return None
        run = runs[0]
        return {"run_id": run.info.run_id, "metrics": dict(run.data.metrics)}

    def start_trial(
        self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> TrialRun:
        try:
            return self._start_trial(sweep_id, cfg, name, tags)
        except Exception as exc:  # noqa: BLE001 - keep the result locally instead
            return self.fallback(sweep_id, exc).start_trial(sweep_id, cfg, name, tags)

    def _start_trial(
        self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> MlflowTrialRun:
        from mlflow.entities import Param

        run = self.client.create_run(
            self.experiment_id,
            run_name=name,
            tags={"mlflow.parentRunId": sweep_id, **trial_tags(cfg), **tags},
        )
        run_id = run.info.run_id
        params = [Param(k, str(v)[:_MAX_PARAM_LEN]) for k, v in flatten(to_dict(cfg)).items()]
        for i in range(0, len(params), _BATCH):
            self.client.log_batch(run_id, params=params[i : i + _BATCH])
        return MlflowTrialRun(self, run_id, cfg, sweep_id, name, tags)


class MlflowTrialRun:
    def __init__(
        self,
        store: MlflowStore,
        run_id: str,
        cfg: BenchConfig,
        sweep_id: str,
        name: str,
        tags: dict[str, str],
    ) -> None:
        self.store, self.client, self.run_id, self.cfg = store, store.client, run_id, cfg
        self.sweep_id, self.name, self.tags = sweep_id, name, tags
        self.logged_epochs: set[int] = set()

    def log_epoch(self, record: EpochRecord) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, record.epoch) for k, v in record.metrics().items()]
        try:
            self.client.log_batch(self.run_id, metrics=metrics)
        except Exception:  # noqa: BLE001 - finish() logs it again, or spools the whole record
            return
        self.logged_epochs.add(record.epoch)

    def finish(self, result: TrialResult, files: list[Path]) -> None:
        try:
            self._finish(result, files)
        except Exception as exc:  # noqa: BLE001 - the store failed: keep the record locally
            spool = self.store.fallback(self.sweep_id, exc)
            tags = {**self.tags, "bench.spooled_from_run": self.run_id}
            SpooledTrial(spool, self.sweep_id, self.cfg, self.name, tags).finish(result, files)

    def _finish(self, result: TrialResult, files: list[Path]) -> None:
        from mlflow.entities import Metric, Param, RunTag

        for record in result.epochs:
            if record.epoch not in self.logged_epochs:
                self.log_epoch(record)
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, 0) for k, v in trial_metrics(result).items()]
        tags = [RunTag(k, v) for k, v in trial_tags(self.cfg, result).items()]
        commit = result.environment.get("git_commit")
        if commit:
            tags.append(RunTag("mlflow.source.git.commit", commit))
        self.client.log_batch(
            self.run_id,
            metrics=metrics,
            params=[Param("num_parameters", str(result.num_parameters))],
        )
        for i in range(0, len(tags), _BATCH):
            self.client.log_batch(self.run_id, tags=tags[i : i + _BATCH])
        self.client.log_dict(self.run_id, to_dict(self.cfg), "config.json")
        self.client.log_dict(self.run_id, result.to_dict(), "result.json")
        for path in files:
            if path.exists():
                self.client.log_artifact(self.run_id, str(path))
        status = {OK: "FINISHED", KILLED: "KILLED"}.get(result.status, "FAILED")
        self.client.set_terminated(self.run_id, status)


class Spool:
    """Keeps complete trial records on local disk while the tracking server is unreachable."""

    def __init__(self, uri: str, experiment: str, reason: str) -> None:
        self.uri, self.experiment, self.reason = uri, experiment, reason
        self.directory = SPOOL_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.where = f"{self.directory}/ (tracking server {uri} unreachable: {reason})"
        self.sweeps: dict[str, dict[str, Any]] = {}

    def start_sweep(self, name: str, tags: dict[str, str]) -> str:
        sweep_id = uuid.uuid4().hex
        self.sweeps[sweep_id] = {"name": name, "tags": tags}
        return sweep_id

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None:
        pass

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None:
        return None

    def start_trial(
        self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> SpooledTrial:
        return SpooledTrial(self, sweep_id, cfg, name, tags)


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
            "files": {p.name: p.read_text(errors="replace") for p in files if p.exists()},
        }
        path = self.spool.directory / f"{int(time.time())}-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(record, indent=1, default=str))


def _reachable(uri: str, timeout_s: float = 5.0) -> str | None:
    """None if an http(s) tracking server answers, else why not."""
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # it answered; an older server may lack /health
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def open_store(uri: str, experiment: str) -> Store:
    if urllib.parse.urlparse(uri).scheme in ("http", "https"):
        problem = _reachable(uri)
        if problem is not None:
            return Spool(uri, experiment, problem)
    return MlflowStore(uri, experiment)


def _existing_run(store: MlflowStore, run_id: str | None) -> bool:
    if not run_id:
        return False
    try:
        store.client.get_run(run_id)
        return True
    except Exception:  # noqa: BLE001 - not in this store
        return False


def sync_spool(directory: Path = SPOOL_DIR, uri: str | None = None) -> int:
    """Log every spooled record to its tracking server; return how many were synced.

    A record whose trial or sweep already has a run in the target store (the store failed
    part-way through) completes that run; otherwise new runs are made.  Errors propagate
    and leave the remaining records in the spool.
    """
    from bench.config import from_dict

    synced = 0
    stores: dict[tuple[str, str], MlflowStore] = {}
    sweeps: dict[tuple[str, str], tuple[MlflowStore, str, bool]] = {}
    for path in sorted(directory.glob("*.json")):
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
            files = []
            for name, text in record["files"].items():
                files.append(Path(tmp, name))
                files[-1].write_text(text)
            run._finish(result, files)
        if result.status != OK:
            sweeps[key] = (store, sweep_id, False)
        path.unlink()
        synced += 1
    for store, sweep_id, ok in sweeps.values():
        if store.client.get_run(sweep_id).info.status == "RUNNING":
            store.client.set_terminated(sweep_id, "FINISHED" if ok else "FAILED")
    return synced
