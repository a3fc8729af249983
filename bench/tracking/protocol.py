"""What the sweep writes through (:class:`Store`, :class:`TrialRun`), met by the MLflow store
(:mod:`.store`) and the local spool (:mod:`.spool`), and what a trial's run carries whatever
the store: its tags and its summary metrics."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Protocol

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.core.identity import config_hash
from bench.core.result import EpochRecord, TrialResult
from bench.trial.runtime import hooks

# host/pid/start time of the bench process that opened a run (bench.trial.runtime.processes).
OWNER_TAG = "bench.owner"
# On a sweep's parent run, one tag per earlier ok run that the sweep reused (skipped).
REUSED_RUN_TAG = "bench.reused."
# The metric on a sweep's run with the time of its drift check's reference step, one point
# per round (step = the round), read back by the report (bench.analysis.drift).
REFERENCE_METRIC = metrics.REFERENCE_STEP_S
# The tag of a trial run that a check harness changed (bench.trial.runtime.hooks): never reused,
# never reported as a measurement of its configuration.
HOOKS_TAG = f"bench.{hooks.TAG}"


def quiet_mlflow() -> None:
    for name in ("mlflow", "alembic", "alembic.runtime.migration", "sqlalchemy", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # It logs a failed write with its whole traceback before raising; bench says it in a line.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    # Its "Downloading artifacts: 0%|..." bars on every artifact a report or a reproduction
    # reads (a config.json, a claims file) are noise in bench's output (issue 50).
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def environment_tags(environment: dict[str, str]) -> dict[str, str]:
    """What a run ran on, as tags: ``bench.<key>``, except the source revision, which goes in
    MLflow's own ``mlflow.source.git.commit`` (its UI links it) and nowhere else."""
    tags = {f"bench.{k}": v for k, v in environment.items() if k != "git_commit"}
    if environment.get("git_commit"):
        tags["mlflow.source.git.commit"] = environment["git_commit"]
    return tags


def trial_tags(cfg: BenchConfig, result: TrialResult | None = None) -> dict[str, str]:
    tags = {
        "bench.framework": cfg.framework.name,
        "bench.model": cfg.model.name,
        "bench.mode": cfg.mode,
        "bench.config_hash": config_hash(cfg),
        "bench.launcher": cfg.launcher.name,
        "bench.repeat": str(cfg.repeat),
    }
    if cfg.framework.installed:  # the framework as the trial's interpreter has it
        tags["bench.framework_installed"] = cfg.framework.installed
    if result is not None:
        tags["bench.status"] = result.status
        if result.device:
            tags["bench.device"] = result.device
        tags.update(environment_tags(result.environment))
        if "image.id" in result.environment:  # launcher=docker: MLflow's own image tags
            tags["mlflow.docker.image.id"] = result.environment["image.id"]
            tags["mlflow.docker.image.name"] = result.environment.get("image.tag", "")
        if result.error:
            tags["bench.error"] = result.error[-4000:]
    return tags


def trial_params(result: TrialResult) -> dict[str, str]:
    """Params known only once the trial ran: its parameter count and, under tuning=best, the
    settings the search chose (``tuned.*``)."""
    out = {"num_parameters": str(result.num_parameters)}
    out.update({f"tuned.{k}": v for k, v in result.tuned.items()})
    return out


def trial_metrics(result: TrialResult) -> dict[str, float]:
    out: dict[str, float] = {}
    out.update(result.summary)
    out.update(result.phases)
    out[metrics.EPOCHS_COMPLETED] = float(len(result.epochs))
    return out


class TrialRun(Protocol):
    def log_epoch(self, record: EpochRecord) -> None: ...

    def finish(self, result: TrialResult, files: list[Path]) -> None: ...


class Store(Protocol):
    uri: str  # the tracking URI the results are meant for
    where: str  # where the results go, said in a line

    def spooled_to(self) -> Path | None:
        """The folder on this machine that holds this store's results, all or some of them,
        because the tracking store could not be reached or written (:mod:`.spool`); None
        while every result reached the tracking store."""
        ...

    def start_sweep(self, name: str, tags: dict[str, str]) -> str: ...

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None: ...

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None: ...

    def running_elsewhere(self, cfg: BenchConfig) -> str:
        """The owner (host/pid/start) of a live bench process that is running ``cfg``'s
        configuration in this store now, other than this one; '' if none (or unknown)."""
        ...

    def note_parity(self, sweep_id: str, group: str, text: str, verdict: str) -> None: ...

    def note_reused_run(self, sweep_id: str, run_id: str) -> None:
        """Note on a sweep's parent run an earlier ok run it reused instead of running
        again (a tag the report reads)."""
        ...

    def note_round(self, sweep_id: str, round_: int, reference_s: float) -> None:
        """The drift check's reference time before round ``round_`` (0-based) of a sweep, on
        its parent run (metric ``reference_step_s``, step = the round)."""
        ...

    def start_trial(
        self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]
    ) -> TrialRun: ...

    def sweep_trials(self, sweep_id: str) -> list[dict[str, Any]]: ...

    def reap_orphans(self) -> int: ...

    def close_trial(self, run_id: str, status: str, error: str) -> None: ...
