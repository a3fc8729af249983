"""Everything that touches MLflow lives here.

A sweep is a parent run; each trial is a child run (``mlflow.parentRunId``).  Per-epoch
metrics are logged with ``step=epoch`` as the trial reports them; the rest when it ends.

When an ``http(s)`` tracking server cannot be reached, :func:`open_store` returns a
:class:`Spool` instead: complete trial records are written as JSON under
bench's per-user state directory (:func:`spool_dir`: one folder per tracking URI, the same
from any working directory) and ``python -m bench.sync`` logs them to the server later.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.config import BenchConfig, config_hash, flatten, to_dict
from bench.result import KILLED, OK, EpochRecord, TrialResult
from bench.runtime.processes import owner_alive, owner_label

# host/pid/start time of the bench process that opened a run (bench.runtime.processes).
OWNER_TAG = "bench.owner"


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
        "bench.repeat": str(cfg.repeat),
    }
    if result is not None:
        tags["bench.status"] = result.status
        if result.device:
            tags["bench.device"] = result.device
        for key, value in result.environment.items():
            tags[f"bench.{key}"] = value
        if "image.id" in result.environment:  # launcher=docker: MLflow's own image tags
            tags["mlflow.docker.image.id"] = result.environment["image.id"]
            tags["mlflow.docker.image.name"] = result.environment.get("image.tag", "")
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

    def sweep_trials(self, sweep_id: str) -> list[dict[str, Any]]: ...

    def reap_orphans(self) -> int: ...

    def close_trial(self, run_id: str, status: str, error: str) -> None: ...


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
        self.uri, self.experiment = uri, experiment
        self.where = f"{uri} (experiment {experiment!r})"
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.spool: Spool | None = None
        if not local:
            self.client = MlflowClient(tracking_uri=uri)
            self.experiment_id = self._experiment_id(experiment, uri)
            return
        db = Path(uri[len("sqlite:///") :])
        db.parent.mkdir(parents=True, exist_ok=True)
        # A new sqlite store is made (tables, MLflow's schema migrations, the experiment) by
        # the first process that opens it; two processes doing that at once (two sweeps, a
        # Slurm job and its submitter) corrupt each other's migrations ("duplicate column").
        # Processes on this machine take turns through a lock file beside the store; the
        # retry covers file systems where the lock is not shared (other nodes).
        with _locked(db.with_name(db.name + ".lock")):
            self.client = MlflowClient(tracking_uri=uri)
            for attempt in range(6):
                try:
                    self.experiment_id = self._experiment_id(experiment, uri)
                    break
                except Exception:
                    if attempt == 5:
                        raise
                    time.sleep(0.5 * (attempt + 1))

    def _experiment_id(self, experiment: str, uri: str) -> str:
        found = self.client.get_experiment_by_name(experiment)
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(
                self.client.create_experiment(experiment, artifact_location=_artifact_root(uri))
            )
        except Exception:
            # Another sweep made it in the meantime (RESOURCE_ALREADY_EXISTS): use that one.
            found = self.client.get_experiment_by_name(experiment)
            if found is None:
                raise
            return str(found.experiment_id)

    def start_sweep(self, name: str, tags: dict[str, str]) -> str:
        run = self.client.create_run(
            self.experiment_id,
            run_name=name,
            tags={"bench.sweep": "true", OWNER_TAG: owner_label(), **tags},
        )
        self.sweeps[run.info.run_id] = {"name": name, "tags": tags}
        return str(run.info.run_id)

    def reap_orphans(self) -> int:
        """Mark KILLED the runs left RUNNING by a bench process of this machine that is gone
        (killed with SIGKILL, or its machine crashed); return how many.  Their trials are
        then not done, so the next sweep reruns them."""
        found = self.client.search_runs(
            [self.experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=5000
        )
        reaped = 0
        for run in found:
            owner = run.data.tags.get(OWNER_TAG, "")
            if not owner or owner_alive(owner):
                continue
            pid = owner.split("/")[1] if owner.count("/") >= 2 else "?"
            why = (
                f"the bench process that ran this (pid {pid} on {owner.split('/')[0]}) ended "
                "without closing it (killed with SIGKILL?); marked KILLED by a later sweep"
            )
            if "bench.sweep" not in run.data.tags:  # a trial: not done, rerun next time
                self.client.set_tag(run.info.run_id, "bench.status", KILLED)
                self.client.set_tag(run.info.run_id, "bench.error", why)
            else:
                self.client.set_tag(run.info.run_id, "bench.note", why)
            self.client.set_terminated(run.info.run_id, "KILLED")
            reaped += 1
        return reaped

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

    def scaling_efficiency(self, cfg: BenchConfig, result: TrialResult) -> tuple[float, str] | None:
        """(global throughput / (workers x the single-worker throughput), that run's id),
        against the newest ok single-worker run of the same config in this experiment
        (:func:`bench.distributed.scaling_baselines`); None if there is none."""
        from bench.distributed.registry import scaling_baselines, scaling_divisor

        rate = result.summary.get("global_samples_per_s", result.summary.get("trial_samples_per_s"))
        if result.status != OK or not rate:
            return None
        for base in scaling_baselines(cfg):
            found = self.find_ok_run(base)
            base_rate = found["metrics"].get("trial_samples_per_s") if found else None
            if found and base_rate:
                return rate / (scaling_divisor(cfg) * base_rate), str(found["run_id"])
        return None

    def sweep_trials(self, sweep_id: str) -> list[dict[str, Any]]:
        """The trial runs of one sweep, in start order, as plain dicts."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{sweep_id}'",
            max_results=5000,
            order_by=["attributes.start_time ASC"],
        )
        return [
            {
                "run_id": run.info.run_id,
                "name": run.info.run_name or run.info.run_id,
                "status": run.data.tags.get("bench.status", "running"),
                "running": run.info.status == "RUNNING",
                "samples_per_s": run.data.metrics.get("trial_samples_per_s"),
                "seconds": ((run.info.end_time or run.info.start_time) - run.info.start_time)
                / 1000.0,
                "tags": dict(run.data.tags),
            }
            for run in runs
        ]

    def close_trial(self, run_id: str, status: str, error: str) -> None:
        """End a trial run that its own process could not finish (e.g. a killed job)."""
        self.client.set_tag(run_id, "bench.status", status)
        self.client.set_tag(run_id, "bench.error", error[-4000:])
        self.client.set_terminated(run_id, "KILLED" if status == KILLED else "FAILED")

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
            tags={
                "mlflow.parentRunId": sweep_id,
                OWNER_TAG: owner_label(),
                **trial_tags(cfg),
                **tags,
            },
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
        scaling = self.store.scaling_efficiency(self.cfg, result)
        if scaling is not None:
            metrics.append(Metric("scaling_efficiency", scaling[0], now, 0))
            tags.append(RunTag("bench.scaling_baseline_run", scaling[1]))
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
            if path.is_dir():  # e.g. a TensorBoard profile directory, kept as a folder
                self.client.log_artifacts(self.run_id, str(path), artifact_path=path.name)
            elif path.exists():
                self.client.log_artifact(self.run_id, str(path))
        status = {OK: "FINISHED", KILLED: "KILLED"}.get(result.status, "FAILED")
        self.client.set_terminated(self.run_id, status)


class Spool:
    """Keeps complete trial records on local disk while the tracking server is unreachable."""

    def __init__(self, uri: str, experiment: str, reason: str) -> None:
        self.uri, self.experiment, self.reason = uri, experiment, reason
        self.directory = spool_dir(uri)
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "uri").write_text(uri + "\n")  # whose spool this is, for people
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
    import base64

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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if missing) for the block; where
    it cannot be created (a read-only store), go ahead without it."""
    try:
        f = open(path, "a")  # noqa: SIM115 - closed below
    except OSError:
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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


def spooled(directory: Path | None = None) -> list[Path]:
    """The spooled trial records: in ``directory``, or in every URI's spool."""
    folders = [directory] if directory is not None else sorted(spool_root().glob("*/"))
    return sorted(p for folder in folders for p in folder.glob("*.json"))


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


# Reading runs back, for the comparison report (bench.report).  The report itself works on
# the plain RunRecords returned here and never sees MLflow.

# On a sweep's parent run, one tag per earlier ok run that the sweep reused (skipped).
REUSED_RUN_TAG = "bench.reused."
REPORT_ARTIFACT_DIR = "report"
_PAGE = 1000


@dataclass
class RunRecord:
    """One trial run as read back from the store, as plain values."""

    run_id: str
    name: str
    start_time_ms: int
    params: dict[str, str]
    tags: dict[str, str]
    # The last value of each metric: whole-trial metrics, and the last epoch of per-epoch ones.
    metrics: dict[str, float]
    # Per-epoch values [(epoch, value), ...] of the metrics asked for, where the run has them.
    history: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.tags.get("bench.status", "unknown")


@dataclass
class RunSet:
    records: list[RunRecord]
    uri: str
    experiment: str
    sweep_id: str = ""  # empty: every trial run of the experiment
    sweep_name: str = ""


def _read_client(uri: str) -> Any:
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).exists():
        raise LookupError(f"no MLflow store at {uri} (the file does not exist)")
    from mlflow.tracking import MlflowClient

    _quiet()
    return MlflowClient(tracking_uri=uri)


def _search(client: Any, experiment_ids: list[str], filter_string: str = "") -> list[Any]:
    out: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            experiment_ids, filter_string=filter_string, max_results=_PAGE, page_token=token
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def _latest_sweep(client: Any, experiment_ids: list[str]) -> Any:
    found = client.search_runs(
        experiment_ids,
        filter_string="tags.`bench.sweep` = 'true'",
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    if not found:
        raise LookupError("no sweep (a run tagged bench.sweep=true) in this store or experiment")
    return found[0]


def _sweep_runs(client: Any, parent: Any) -> list[Any]:
    runs = _search(
        client,
        [parent.info.experiment_id],
        f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
    )
    reused = [k[len(REUSED_RUN_TAG) :] for k in parent.data.tags if k.startswith(REUSED_RUN_TAG)]
    if reused:
        have = {r.info.run_id for r in runs}
        wanted = [rid for rid in sorted(reused) if rid not in have]
        for i in range(0, len(wanted), 100):
            ids = ", ".join(f"'{rid}'" for rid in wanted[i : i + 100])
            runs += _search(client, [parent.info.experiment_id], f"attributes.run_id IN ({ids})")
    return runs


def _histories(client: Any, records: list[RunRecord], keys: tuple[str, ...]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(r, k) for r in records for k in keys if k in r.metrics]

    def fetch(job: tuple[RunRecord, str]) -> list[tuple[int, float]]:
        history = client.get_metric_history(job[0].run_id, job[1])
        return sorted((int(m.step), float(m.value)) for m in history)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for (record, key), values in zip(jobs, pool.map(fetch, jobs), strict=True):
            record.history[key] = values


def load_runs(
    uri: str,
    experiment: str | None = None,
    sweep: str | None = None,
    history_keys: tuple[str, ...] = (),
) -> RunSet:
    """Trial runs from the store at ``uri``.

    ``sweep`` is a parent run id, or ``"latest"``; with only ``experiment``, every trial run
    of that experiment; with neither, the latest sweep in the store.  A sweep's runs are its
    children and the earlier ok runs it reused instead of running them again.  Per-epoch
    histories are read only for ``history_keys``, and only from runs that logged them.
    """
    client = _read_client(uri)
    if experiment is not None:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            names = sorted(e.name for e in client.search_experiments())
            raise LookupError(
                f"no experiment {experiment!r} in {uri}; there are: {', '.join(names) or 'none'}"
            )
        experiment_ids = [exp.experiment_id]
    else:
        experiment_ids = [e.experiment_id for e in client.search_experiments()]
    parent = None
    if sweep == "latest" or (sweep is None and experiment is None):
        parent = _latest_sweep(client, experiment_ids)
    elif sweep is not None:
        try:
            parent = client.get_run(sweep)
        except Exception as exc:  # noqa: BLE001 - MLflow raises its own exception types
            raise LookupError(f"no run {sweep!r} in {uri}") from exc
        if parent.data.tags.get("bench.sweep") != "true":
            raise LookupError(f"run {sweep} is not a sweep (it has no tag bench.sweep=true)")
    runs = _sweep_runs(client, parent) if parent is not None else _search(client, experiment_ids)
    records = [
        RunRecord(
            run_id=r.info.run_id,
            name=r.info.run_name or "",
            start_time_ms=int(r.info.start_time or 0),
            params=dict(r.data.params),
            tags=dict(r.data.tags),
            metrics={k: float(v) for k, v in r.data.metrics.items()},
        )
        for r in runs
        if r.data.tags.get("bench.sweep") != "true"
    ]
    records.sort(key=lambda r: (r.start_time_ms, r.run_id))
    _histories(client, records, history_keys)
    exp_id = parent.info.experiment_id if parent is not None else experiment_ids[0]
    return RunSet(
        records=records,
        uri=uri,
        experiment=experiment or client.get_experiment(exp_id).name,
        sweep_id=parent.info.run_id if parent is not None else "",
        sweep_name=(parent.info.run_name or "") if parent is not None else "",
    )


def note_reused_run(store: Store, sweep_id: str, run_id: str) -> None:
    """Note on a sweep's parent run an earlier ok run it reused instead of running again."""
    if not isinstance(store, MlflowStore):
        return
    try:
        store.client.set_tag(sweep_id, f"{REUSED_RUN_TAG}{run_id}", "true")
    except Exception as exc:  # noqa: BLE001 - the note is for the report; the sweep goes on
        print(f"bench: could not note reused run {run_id} on {sweep_id}: {exc}", file=sys.stderr)


def log_report(uri: str, run_id: str, directory: Path) -> str:
    """Log a written report (``directory``) as artifacts of ``run_id``; return its page's URI."""
    client = _read_client(uri)
    for name in ("report.html", "report.md"):
        client.log_artifact(run_id, str(directory / name), REPORT_ARTIFACT_DIR)
    if (directory / "figures").is_dir():
        client.log_artifacts(run_id, str(directory / "figures"), f"{REPORT_ARTIFACT_DIR}/figures")
    root = client.get_run(run_id).info.artifact_uri.rstrip("/")
    return f"{root}/{REPORT_ARTIFACT_DIR}/report.html"


def load_trial(uri: str, run_id: str) -> tuple[RunRecord, dict[str, Any], str]:
    """One trial run: its record, the resolved config it logged (``config.json``) and the
    name of its experiment.  Raises LookupError naming what is missing."""
    client = _read_client(uri)
    try:
        run = client.get_run(run_id)
    except Exception as exc:  # noqa: BLE001 - MLflow raises its own exception types
        raise LookupError(f"no run {run_id!r} in {uri}") from exc
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run_id, "config.json", tmp)
            config = json.loads(Path(path).read_text())
        except Exception as exc:  # noqa: BLE001 - as above
            raise LookupError(f"run {run_id} has no config.json artifact to rerun") from exc
    record = RunRecord(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        start_time_ms=int(run.info.start_time or 0),
        params=dict(run.data.params),
        tags=dict(run.data.tags),
        metrics={k: float(v) for k, v in run.data.metrics.items()},
    )
    return record, config, str(client.get_experiment(run.info.experiment_id).name)
