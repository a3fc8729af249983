"""What the store's runs are read back as, and which runs a report reads: plain records
(:class:`RunRecord`, :class:`RunSet`) and the one choice of runs (:func:`select`, narrowed
by the baseline's filter :func:`kept`) that the client path (:mod:`.query`) and the bulk path
(:mod:`.bulk`) share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.tracking.protocol import REUSED_RUN_TAG, quiet_mlflow
from bench.tracking.reach import HalfBuiltStore, half_built

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


def _check_sqlite(uri: str) -> None:
    """LookupError where a local sqlite ``uri`` is no store to read (missing, half built)."""
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).exists():
        raise LookupError(f"no MLflow store at {uri} (the file does not exist)")
    if uri.startswith("sqlite:///"):
        problem = half_built(Path(uri[len("sqlite:///") :]))
        if problem:  # reading it would have MLflow try to finish it
            raise HalfBuiltStore(problem)


def _read_client(uri: str) -> Any:
    _check_sqlite(uri)
    from mlflow.tracking import MlflowClient

    quiet_mlflow()
    return MlflowClient(tracking_uri=uri)


def _wanted(key: str, prefixes: Sequence[str] | None) -> bool:
    return prefixes is None or key.startswith(tuple(prefixes))


# A filter on the runs read (``only`` of load_runs): (framework, model) pairs, a model of
# None standing for every model of that framework.  A run's framework is its bench.framework
# tag, else its framework.name param, else "?" (as the report names it); its model is its
# model.name param (None without one).
Only = frozenset[tuple[str, str | None]]


def framework_of(tags: Mapping[str, str], params: Mapping[str, str]) -> str:
    """A run's framework name as the report takes it (without ``==VERSION``)."""
    return tags.get("bench.framework") or params.get("framework.name", "?")


def kept(only: Only | None, tags: Mapping[str, str], params: Mapping[str, str]) -> bool:
    """Whether a run (all its tags, its params) passes the filter ``only``."""
    if only is None:
        return True
    framework = framework_of(tags, params)
    return (framework, params.get("model.name")) in only or (framework, None) in only


def narrowed(
    searches: list[tuple[list[str], str]], only: Only | None
) -> list[tuple[list[str], str]]:
    """The MLflow searches of a selection narrowed to the models of ``only`` (one search per
    model: MLflow's grammar has no ``IN`` for params, and no way to say a tag is absent, so
    the framework is checked on the runs found, :func:`kept`).  Every search as it was where
    a model cannot be searched for (any model, or a name with a quote in it)."""
    if only is None:
        return searches
    models = sorted({m for _, m in only if m is not None})
    if any(m is None for _, m in only) or any("'" in m or "\\" in m for m in models):
        return searches
    return [
        (ids, f"{where} AND {clause}" if where else clause)
        for ids, where in searches
        for clause in (f"params.`model.name` = '{m}'" for m in models)
    ]


def _record(run: Any, tag_prefixes: Sequence[str] | None = None) -> RunRecord:
    """An MLflow run as a plain record (only the tags whose keys start with ``tag_prefixes``,
    where given)."""
    return RunRecord(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        start_time_ms=int(run.info.start_time or 0),
        params=dict(run.data.params),
        tags={k: v for k, v in run.data.tags.items() if _wanted(k, tag_prefixes)},
        metrics={k: float(v) for k, v in run.data.metrics.items()},
    )


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


@dataclass
class Selection:
    """Which runs :func:`load_runs` reads: MLflow searches (experiment ids, filter), whose
    union, less the sweeps' own runs, is the set; and what the RunSet says about it."""

    uri: str
    experiment: str
    searches: list[tuple[list[str], str]]
    sweep_id: str = ""
    sweep_name: str = ""

    def runset(self, records: list[RunRecord]) -> RunSet:
        return RunSet(records, self.uri, self.experiment, self.sweep_id, self.sweep_name)


def select(client: Any, uri: str, experiment: str | None, sweep: str | None) -> Selection:
    """The runs of :func:`load_runs`' arguments, found with a few calls to ``client``; the
    errors it raises are load_runs'."""
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
    if parent is None:
        return Selection(uri, experiment or "", [(experiment_ids, "")])
    # A sweep's runs are its children and the earlier ok runs it reused.
    ids = [parent.info.experiment_id]
    searches = [(ids, f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")]
    reused = sorted(
        k[len(REUSED_RUN_TAG) :] for k in parent.data.tags if k.startswith(REUSED_RUN_TAG)
    )
    for i in range(0, len(reused), 100):
        listed = ", ".join(f"'{rid}'" for rid in reused[i : i + 100])
        searches.append((ids, f"attributes.run_id IN ({listed})"))
    return Selection(
        uri,
        experiment or str(client.get_experiment(parent.info.experiment_id).name),
        searches,
        parent.info.run_id,
        parent.info.run_name or "",
    )
