"""The write side of MLflow: a sweep is a parent run; each trial is a child run
(``mlflow.parentRunId``).  Per-epoch metrics are logged with ``step=epoch`` as the trial
reports them; the rest when it ends.

When an ``http(s)`` tracking server cannot be reached, :func:`open_store` returns a
:class:`~.spool.Spool` instead, and a store that fails in the middle of a sweep falls back
to one (:meth:`MlflowStore.fallback`).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from bench.analysis.scaling import scaling_efficiency
from bench.core.config import BenchConfig, flatten, to_dict
from bench.core.identity import config_hash, logged_params
from bench.core.metrics import REFERENCE_STEP_S, SCALING_EFFICIENCY, TRIAL_SAMPLES_PER_S
from bench.core.paths import locked
from bench.core.result import KILLED, OK, EpochRecord, TrialResult
from bench.tracking.native import dataset_input, native_tags
from bench.tracking.protocol import (
    HOOKS_TAG,
    OWNER_TAG,
    REUSED_RUN_TAG,
    Store,
    TrialRun,
    quiet_mlflow,
    trial_metrics,
    trial_params,
    trial_tags,
)
from bench.tracking.reach import HalfBuiltStore, half_built, one_line, reachable
from bench.tracking.spool import ORIGIN_TAG, Spool, SpooledTrial, new_origin, origin_hash
from bench.tracking.system_metrics import points as system_points
from bench.tracking.template import copy_into
from bench.trial.runtime.processes import owner_alive, owner_label

# Each run create's own mark (MlflowStore._create_run).
CREATE_TAG = "bench.create_id"
_MAX_PARAM_LEN = 6000

# The experiment's kind, as MLflow's UI reads it (MLflow 3): it opens a model-training
# experiment on its runs table, not on the GenAI views (traces, evaluations).
EXPERIMENT_KIND, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"


def _artifacts_beside(db: Path) -> str:
    """A sqlite store's artifact root: ``<db dir>/artifacts``, as a URI."""
    return (db.resolve().parent / "artifacts").as_uri()


def _artifact_root(uri: str) -> str | None:
    """Artifacts beside a local sqlite database: ``<db dir>/artifacts``."""
    if uri.startswith("sqlite:///"):
        return _artifacts_beside(Path(uri[len("sqlite:///") :]))
    return None


def _empty(db: Path) -> bool:
    """Whether ``db`` holds no store yet: missing, or an empty file."""
    try:
        return db.stat().st_size == 0
    except FileNotFoundError:
        return True


# A schema built aside that old is a leftover (its builder was killed), not one in progress.
_STALE_BUILD_S = 600.0


def _build_store(db: Path) -> None:
    """MLflow makes the sqlite store ``db``: its schema and the Default experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    client.search_experiments(max_results=1)
    made = client._tracking_client.store
    made.engine.dispose()  # no connection left on the file, and none kept for it
    getattr(type(made), "_engine_map", {}).pop(getattr(made, "db_uri", ""), None)


def create_store(db: Path) -> None:
    """Make the sqlite store ``db`` whole or not at all: it is made in a temporary file
    beside it (a copy of this MLflow version's empty store, :mod:`bench.tracking.template`,
    or else MLflow's own build), which then takes the store's name in one step (a hard link,
    so that a store made meanwhile on another node is never replaced).  Ctrl-C, SIGTERM or
    SIGKILL at any moment leave no store, or the whole one."""
    for old in db.parent.glob(f".{db.name}.creating-*"):
        try:
            if time.time() - old.stat().st_mtime > _STALE_BUILD_S:
                old.unlink()
        except OSError:
            pass
    # A name of its own each time: MLflow keeps every store and engine it made by URI.
    tmp = db.with_name(f".{db.name}.creating-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    leftovers = [tmp, tmp.with_name(tmp.name + "-journal")]
    try:
        for path in leftovers:
            path.unlink(missing_ok=True)
        # MLflow's own empty store, copied (seconds saved), else built
        if not copy_into(tmp, _build_store, _artifacts_beside(db)):
            _build_store(tmp)
        if db.exists():  # an empty file of that name: replaced
            os.replace(tmp, db)
            return
        try:
            os.link(tmp, db)
        except FileExistsError:
            pass  # made meanwhile where the lock is not shared: that one is the store
        except OSError:  # a file system without hard links
            if not db.exists():
                os.replace(tmp, db)
    finally:
        for path in leftovers:
            path.unlink(missing_ok=True)


class MlflowStore:
    def __init__(self, uri: str, experiment: str) -> None:
        # A dead server should cost seconds, not MLflow's default minutes of retries, before
        # results go to the spool; both can still be set in the environment.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        from mlflow.tracking import MlflowClient

        quiet_mlflow()  # after the import: mlflow sets its own log level when imported

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
        # retry covers file systems where the lock is not shared (other nodes).  The schema
        # is built aside and moved into place whole (create_store), so that an interruption
        # leaves no store rather than half of one.
        with locked(db.with_name(db.name + ".lock"), best_effort=True):
            problem = half_built(db)
            if problem:
                raise HalfBuiltStore(problem)
            if _empty(db):
                create_store(db)
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
            if found.tags.get(EXPERIMENT_KIND) is None:  # made by an older bench
                self.client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
            return str(found.experiment_id)
        try:
            return str(
                self.client.create_experiment(
                    experiment,
                    artifact_location=_artifact_root(uri),
                    tags={EXPERIMENT_KIND: MODEL_TRAINING},
                )
            )
        except Exception:
            # Another sweep made it in the meantime (RESOURCE_ALREADY_EXISTS): use that one.
            found = self.client.get_experiment_by_name(experiment)
            if found is None:
                raise
            return str(found.experiment_id)

    def _create_run(self, name: str, tags: dict[str, str]) -> Any:
        """A new run, made once: MLflow's client retries a create that the server answered
        with an error after making the run (a 500 from a proxy), which made it twice and
        left the first RUNNING for ever.  Each create carries a mark of its own; any other
        run with the mark is a retry's twin and is deleted."""
        mark = uuid.uuid4().hex
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={**tags, CREATE_TAG: mark}
        )
        twins = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{CREATE_TAG}` = '{mark}'", max_results=10
        )
        for twin in twins:
            if twin.info.run_id != run.info.run_id:
                self.client.delete_run(twin.info.run_id)
        return run

    def start_sweep(self, name: str, tags: dict[str, str], origin: str = "") -> str:
        """A sweep's parent run; ``origin``: its secret (a new one if ''), whose hash it and
        its trials carry (:data:`~.spool.ORIGIN_TAG`)."""
        origin = origin or new_origin()
        run = self._create_run(
            name,
            {
                "bench.sweep": "true",
                OWNER_TAG: owner_label(),
                **native_tags(),
                **tags,
                ORIGIN_TAG: origin_hash(origin),
            },
        )
        self.sweeps[run.info.run_id] = {"name": name, "tags": tags, "origin": origin}
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

    def spooled_to(self) -> Path | None:
        return self.spool.directory if self.spool is not None else None

    def note_reused_run(self, sweep_id: str, run_id: str) -> None:
        try:
            self.client.set_tag(sweep_id, f"{REUSED_RUN_TAG}{run_id}", "true")
        except Exception as exc:  # noqa: BLE001 - the note is for the report; the sweep goes on
            print(
                f"bench: could not note reused run {run_id} on {sweep_id}: {exc}", file=sys.stderr
            )

    def fallback(self, sweep_id: str, exc: BaseException) -> Spool:
        """The spool that takes over when the store fails in the middle of a sweep."""
        if self.spool is None:
            self.spool = Spool(self.uri, self.experiment, one_line(exc))
            print(f"bench: logging failed; results are kept in {self.spool.where}", file=sys.stderr)
        if sweep_id not in self.spool.sweeps:
            sweep = self.sweeps.get(sweep_id, {"name": "sweep", "tags": {}})
            tags = {**sweep["tags"], "bench.spooled_from_sweep_run": sweep_id}
            origin = sweep.get("origin", "")
            self.spool.sweeps[sweep_id] = {"name": sweep["name"], "tags": tags, "origin": origin}
        return self.spool

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None:
        """Close the sweep's run with its status and summary table; when the store fails
        (or failed earlier in the sweep, so some trials are in the spool), the end goes to
        the spool and ``bench.cli.sync`` closes the run once the trials are logged."""
        failure: BaseException = RuntimeError("some trials are in the spool")
        if self.spool is None:
            try:
                self.close_sweep(sweep_id, ok, killed, summary)
                return
            except Exception as exc:  # noqa: BLE001 - the trials are already recorded
                failure = exc
        self.fallback(sweep_id, failure).end_sweep(sweep_id, ok, killed, summary)

    def note_parity(self, sweep_id: str, group: str, text: str, verdict: str) -> None:
        """A parity check's table and verdict on the sweep's parent run (``group`` '': the
        sweep's overall verdict)."""
        try:
            if group:
                self.client.log_text(sweep_id, text, f"parity/{group}.txt")
                self.client.set_tag(sweep_id, f"bench.parity.{group}", verdict)
            else:
                self.client.set_tag(sweep_id, "bench.parity", verdict)
        except Exception as exc:  # noqa: BLE001 - printed already; the sweep goes on
            print(f"bench: could not log the parity check {group}: {exc}", file=sys.stderr)

    def note_round(self, sweep_id: str, round_: int, reference_s: float) -> None:
        try:
            self.client.log_metric(sweep_id, REFERENCE_STEP_S, reference_s, step=round_)
        except Exception as exc:  # noqa: BLE001 - a figure lost; the sweep goes on
            print(f"bench: could not log round {round_}'s reference step: {exc}", file=sys.stderr)

    def close_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None:
        self.client.set_tag(sweep_id, "mlflow.note.content", f"```\n{summary}\n```")
        self.client.log_text(sweep_id, summary, "summary.txt")
        status = "KILLED" if killed else ("FINISHED" if ok else "FAILED")
        self.client.set_terminated(sweep_id, status)

    def running_elsewhere(self, cfg: BenchConfig) -> str:
        try:
            runs = self.client.search_runs(
                [self.experiment_id],
                filter_string=(
                    f"tags.`bench.config_hash` = '{config_hash(cfg)}' and "
                    "attributes.status = 'RUNNING'"
                ),
                max_results=20,
            )
        except Exception:  # noqa: BLE001 - unreachable store: nobody known to run it
            return ""
        me = owner_label()
        for run in runs:
            owner = run.data.tags.get(OWNER_TAG, "")
            if owner and owner != me and owner_alive(owner):
                return str(owner)
        return ""

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
            max_results=20,
            order_by=["attributes.start_time DESC"],
        )
        # A run a check harness changed (bench.hooks, e.g. the parity check's) measured
        # something else than its configuration says: it is never reused.
        for run in runs:
            if not run.data.tags.get(HOOKS_TAG):
                return {"run_id": run.info.run_id, "metrics": dict(run.data.metrics)}
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
                TRIAL_SAMPLES_PER_S: run.data.metrics.get(TRIAL_SAMPLES_PER_S),
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

        origin = self.sweeps.get(sweep_id, {}).get("origin", "")
        run = self._create_run(
            name,
            {
                OWNER_TAG: owner_label(),
                **native_tags(),
                **trial_tags(cfg),
                **tags,
                "mlflow.parentRunId": sweep_id,
                **({ORIGIN_TAG: origin_hash(origin)} if origin else {}),
            },
        )
        run_id = run.info.run_id
        params = [
            Param(k, str(v)[:_MAX_PARAM_LEN])
            for k, v in logged_params(flatten(to_dict(cfg))).items()  # those that can matter
        ]
        self.client.log_batch(run_id, params=params)  # the client splits it as MLflow needs
        self.client.log_inputs(run_id, datasets=[dataset_input(cfg)])
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
        # (metric, step) already in the run (bench sync completing a run): not logged again.
        self.logged_points: set[tuple[str, int]] = set()

    def log_epoch(self, record: EpochRecord) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(k, v, now, record.epoch)
            for k, v in record.metrics().items()
            if (k, record.epoch) not in self.logged_points
        ]
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
        scaling = scaling_efficiency(self.cfg, result, self.store.find_ok_run)
        if scaling is not None:
            metrics.append(Metric(SCALING_EFFICIENCY, scaling[0], now, 0))
            tags.append(RunTag("bench.scaling_baseline_run", scaling[1]))
        start_s = result.marks.get("trial_start", time.time())
        for key, value, at, step in system_points(files, start_s):
            metrics.append(Metric(key, value, at, step))
        metrics = [m for m in metrics if (m.key, m.step) not in self.logged_points]
        self.client.log_batch(
            self.run_id,
            metrics=metrics,
            params=[Param(k, v) for k, v in trial_params(result).items()],
            tags=tags,
        )  # the client splits it as MLflow needs
        self.client.log_dict(self.run_id, to_dict(self.cfg), "config.json")
        self.client.log_dict(self.run_id, result.to_dict(), "result.json")
        for path in files:
            if path.is_dir():  # e.g. a TensorBoard profile directory, kept as a folder
                self.client.log_artifacts(self.run_id, str(path), artifact_path=path.name)
            elif path.exists():
                self.client.log_artifact(self.run_id, str(path))
        status = {OK: "FINISHED", KILLED: "KILLED"}.get(result.status, "FAILED")
        self.client.set_terminated(self.run_id, status)


def open_store(uri: str, experiment: str) -> Store:
    if urllib.parse.urlparse(uri).scheme in ("http", "https"):
        problem = reachable(uri)
        if problem is not None:
            return Spool(uri, experiment, problem)
    return MlflowStore(uri, experiment)
