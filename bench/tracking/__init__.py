"""Everything that touches MLflow lives in this package.

- :mod:`.protocol`: the store protocol the sweep writes through, and a trial run's tags
  and summary metrics; :mod:`.store`: MLflow's write side (the parent run of a sweep, one
  child run per trial, the owner of every run); :mod:`.reach`: whether a store can be
  reached and written;
- :mod:`.spool`: complete trial records kept on local disk while the server is out of
  reach; :mod:`.sync`: logging them later;
- :mod:`.query`: runs read back as plain records (the report, ``bench.cli.reproduce``).

The names most callers use are re-exported here.
"""

from bench.tracking.protocol import (
    OWNER_TAG,
    REUSED_RUN_TAG,
    Store,
    TrialRun,
    environment_tags,
    trial_metrics,
    trial_tags,
)
from bench.tracking.query import (
    REPORT_ARTIFACT_DIR,
    RunRecord,
    RunSet,
    download_artifact,
    load_runs,
    load_trial,
    log_claims,
    log_report,
    logged_claims,
    sweep_references,
)
from bench.tracking.reach import redact, take_credentials, why_unavailable
from bench.tracking.spool import (
    Spool,
    SpooledTrial,
    spool_dir,
    spool_root,
    spooled,
    spooled_ends,
    state_dir,
)
from bench.tracking.store import MlflowStore, MlflowTrialRun, open_store
from bench.tracking.sync import sync_spool

__all__ = [
    "OWNER_TAG",
    "REPORT_ARTIFACT_DIR",
    "REUSED_RUN_TAG",
    "MlflowStore",
    "MlflowTrialRun",
    "RunRecord",
    "RunSet",
    "Spool",
    "SpooledTrial",
    "Store",
    "TrialRun",
    "load_runs",
    "download_artifact",
    "environment_tags",
    "load_trial",
    "log_claims",
    "log_report",
    "logged_claims",
    "open_store",
    "spool_dir",
    "spool_root",
    "spooled",
    "spooled_ends",
    "sweep_references",
    "state_dir",
    "redact",
    "sync_spool",
    "take_credentials",
    "trial_metrics",
    "trial_tags",
    "why_unavailable",
]
