"""The read side: runs read back as plain records, for the comparison report and
``bench.cli.reproduce``.  The report itself works on these records and never sees MLflow."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.tracking.protocol import REFERENCE_METRIC
from bench.tracking.records import (
    REPORT_ARTIFACT_DIR,
    Only,
    RunRecord,
    RunSet,
    _check_sqlite,
    _read_client,
    _record,
    _search,
    kept,
    narrowed,
    select,
)

# Reading runs back, for the comparison report (bench.report).  The report itself works on
# the plain RunRecords returned here and never sees MLflow.


def _histories(client: Any, records: list[RunRecord], keys: tuple[str, ...]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(r, k) for r in records for k in keys if k in r.metrics]

    def fetch(job: tuple[RunRecord, str]) -> list[tuple[int, float]]:
        history = client.get_metric_history(job[0].run_id, job[1])
        return sorted((int(m.step), float(m.value)) for m in history)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for (record, key), values in zip(jobs, pool.map(fetch, jobs), strict=True):
            record.history[str(key)] = values  # the name, as the bulk reader keys it


def load_runs(
    uri: str,
    experiment: str | None = None,
    sweep: str | None = None,
    history_keys: tuple[str, ...] = (),
    tag_prefixes: Sequence[str] | None = None,
    reader: str = "bulk",
    only: Only | None = None,
) -> RunSet:
    """Trial runs from the store at ``uri``.

    ``sweep`` is a parent run id, or ``"latest"``; with only ``experiment``, every trial run
    of that experiment; with neither, the latest sweep in the store.  A sweep's runs are its
    children and the earlier ok runs it reused instead of running them again.  Per-epoch
    histories are read only for ``history_keys``, and only from runs that logged them; tags
    only where their keys start with one of ``tag_prefixes`` (all without).

    ``reader="bulk"`` reads a local sqlite store or a tracking server many runs at once
    (:mod:`bench.tracking.bulk`; a store whose schema it does not know is read as with
    ``"client"``, and that is said once); ``"client"`` reads through MLflow's client, a
    round trip per run and history.  Both give the same records.

    ``only``: read only the runs of these (framework, model) pairs (:data:`Only`; the
    baseline comparison's, which needs no configuration the compared runs lack).
    """
    if reader not in ("bulk", "client"):
        raise ValueError(f"reader must be 'bulk' or 'client', not {reader!r}")
    _check_sqlite(uri)
    if reader == "bulk":
        from bench.tracking.bulk import load_runs as load_in_bulk

        found = load_in_bulk(uri, experiment, sweep, history_keys, tag_prefixes, only)
        if found is not None:
            return found
    client = _read_client(uri)
    chosen = select(client, uri, experiment, sweep)
    records: dict[str, RunRecord] = {}
    for experiment_ids, filter_string in narrowed(chosen.searches, only):
        for run in _search(client, experiment_ids, filter_string):
            tags = run.data.tags
            if tags.get("bench.sweep") != "true" and kept(only, tags, run.data.params):
                records.setdefault(run.info.run_id, _record(run, tag_prefixes))
    ordered = sorted(records.values(), key=lambda r: (r.start_time_ms, r.run_id))
    _histories(client, ordered, history_keys)
    return chosen.runset(ordered)


def sweep_references(uri: str, sweep_id: str) -> list[float]:
    """The drift check's reference step time of each round of sweep ``sweep_id`` (metric
    ``reference_step_s`` on its run), in round order; [] for a sweep without repeats."""
    from bench.tracking.bulk import by_round, references

    found = references(uri, sweep_id)
    if found is not None:
        return found
    client = _read_client(uri)
    history = client.get_metric_history(sweep_id, REFERENCE_METRIC)
    ordered = sorted(history, key=lambda m: m.timestamp)
    return by_round((int(m.step), float(m.value)) for m in ordered)


def log_report(uri: str, run_id: str, directory: Path) -> str:
    """Log a written report (``directory``) as artifacts of ``run_id``; return its page's URI."""
    client = _read_client(uri)
    for name in ("report.html", "report.md"):
        client.log_artifact(run_id, str(directory / name), REPORT_ARTIFACT_DIR)
    if (directory / "figures").is_dir():
        client.log_artifacts(run_id, str(directory / "figures"), f"{REPORT_ARTIFACT_DIR}/figures")
    root = client.get_run(run_id).info.artifact_uri.rstrip("/")
    return f"{root}/{REPORT_ARTIFACT_DIR}/report.html"


CLAIMS_ARTIFACT = "claims.json"  # a sweep's own claims, beside its report
MAX_CLAIMS_BYTES = 1 << 20


def log_claims(uri: str, run_id: str, claims: list[Any]) -> None:
    """Keep a sweep's claims (as its configuration gave them) with its parent run, so that a
    later ``bench report`` of the sweep checks them too rather than dropping them."""
    client = _read_client(uri)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, CLAIMS_ARTIFACT)
        path.write_text(json.dumps(claims, indent=1))
        client.log_artifact(run_id, str(path), REPORT_ARTIFACT_DIR)


def logged_claims(uri: str, run_id: str) -> list[Any] | None:
    """The claims a sweep kept with its parent run (:func:`log_claims`); None where it kept
    none.  What the store hands back is checked: a JSON list of at most 1 MiB, or
    LookupError naming the run."""
    client = _read_client(uri)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = Path(
                client.download_artifacts(run_id, f"{REPORT_ARTIFACT_DIR}/{CLAIMS_ARTIFACT}", tmp)
            )
        except Exception:  # noqa: BLE001 - MLflow's own types: the sweep kept no claims
            return None
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_CLAIMS_BYTES:
            raise LookupError(f"run {run_id}'s {CLAIMS_ARTIFACT} is not a file of at most 1 MiB")
        try:
            found = json.loads(path.read_text())
        except ValueError as exc:
            raise LookupError(f"run {run_id}'s {CLAIMS_ARTIFACT} is not JSON: {exc}") from exc
    if not isinstance(found, list):
        raise LookupError(f"run {run_id}'s {CLAIMS_ARTIFACT} is not a list of claims")
    return found


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
    return _record(run), config, str(client.get_experiment(run.info.experiment_id).name)


def download_artifact(uri: str, run_id: str, name: str, directory: Path) -> Path:
    """One artifact of a run, copied into ``directory``; LookupError if it has none."""
    client = _read_client(uri)
    try:
        return Path(client.download_artifacts(run_id, name, str(directory)))
    except Exception as exc:  # noqa: BLE001 - MLflow raises its own exception types
        raise LookupError(f"run {run_id} has no artifact {name!r}") from exc
