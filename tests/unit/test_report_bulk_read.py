"""The report's bulk read path (bench.tracking.bulk) against MLflow's client: the same runs,
records and report, every table cell, from a store MLflow itself wrote."""

from __future__ import annotations

import math
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import tracking
from bench.report import HISTORY_KEYS, build, claims
from bench.report.document import Report, Table
from bench.report.trials import REPORT_TAGS
from bench.tracking import RunRecord, bulk
from tests.report_data import every_section, record
from tests.stores import new_store

# The claims checked in both reports: one of each kind.
CLAIMS = [
    {"claim": "torch trains faster", "kind": "comparison", "faster": "torch", "slower": "tf",
     "where": {"mode": "train"}},
    {"claim": "inference time per sample falls with the batch", "kind": "trend",
     "metric": "ms_per_sample", "against": "batch_size", "direction": "decreases",
     "where": {"mode": "infer"}},
    {"claim": "CPU energy does not depend on the batch", "kind": "independence",
     "metric": "trial_cpu_energy_j", "against": "batch_size", "margin_pct": 10,
     "where": {"mode": "infer"}},
]  # fmt: skip


def _varied() -> list[RunRecord]:
    """Every section's runs twice over, two TensorFlow versions, failed, diverged and oom runs
    without metrics, a not-a-number metric, a container image and a strategy."""
    runs = every_section(0).records + every_section(1).records
    for r in runs:
        if r.params["framework.name"] == "tf" and r.params["repeat"] in "13":  # beside the pin
            r.params["framework.version"] = "2.20.0"
            r.tags["bench.tensorflow_version"] = "2.20.0"
    runs += [record("torch", status=s, metrics={}) for s in ("error", "diverged", "timeout")]
    runs.append(record("tf", metrics={"trial_energy_j": math.nan}))
    runs.append(record("torch", tags={"mlflow.docker.image.id": "sha256:abc"}))
    runs.append(record("tf", params={"distributed": "mirrored", "workers": "2"}))
    return runs


def _odd() -> list[RunRecord]:
    """Runs whose framework or model the baseline filter reads another way: an empty
    bench.framework tag (the param decides), a tag the param contradicts (the tag decides),
    no model.name param (no model), and a model the compared runs lack."""
    empty, contradicted, modelless = record("tf"), record("torch", "vgg16"), record("torch")
    empty.tags["bench.framework"] = ""
    contradicted.params["framework.name"] = "tf"
    del modelless.params["model.name"]
    return [empty, contradicted, modelless, record("tf", "lenet5", num_parameters=61_706)]


def _log(client: Any, experiment_id: str, parent: str, r: RunRecord) -> str:
    from mlflow.entities import Metric, Param, RunTag

    points = [Metric(k, v, 1000, 0) for k, v in r.metrics.items() if k not in r.history]
    points += [Metric(k, v, 1000 + s, s) for k, h in r.history.items() for s, v in h]
    run = client.create_run(experiment_id, run_name=r.name, start_time=r.start_time_ms,
                            tags={"mlflow.parentRunId": parent, "other.tag": "x"})  # fmt: skip
    client.log_batch(
        run.info.run_id,
        metrics=points,
        params=[Param(k, v) for k, v in r.params.items()],
        tags=[RunTag(k, v) for k, v in r.tags.items()],
    )
    return str(run.info.run_id)


@pytest.fixture(scope="module")
def store() -> Iterator[tuple[str, str]]:
    """A store MLflow wrote: an earlier sweep, a sweep that reused two of its runs, a
    deleted run, and another experiment's sweep; (its URI, the later sweep's id).  In memory
    where there is a tmpfs: MLflow commits every call, and a disk's syncs took 3/4 of it."""
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(prefix="bench-bulk-", dir=shm if shm.is_dir() else None))
    try:
        yield _write(new_store(root / "mlflow.db"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write(uri: str) -> tuple[str, str]:
    mine = tracking.MlflowStore(uri, "bench")
    client, exp = mine.client, mine.experiment_id
    earlier = mine.start_sweep("earlier", {})
    kept = [_log(client, exp, earlier, record(f, repeat=9)) for f in ("torch", "tf", "tf")]
    for r in _odd():  # the baseline filter's edge cases (bench.records.kept)
        _log(client, exp, earlier, r)
    sweep = mine.start_sweep("now", {})
    for r in _varied():
        _log(client, exp, sweep, r)
    client.delete_run(_log(client, exp, sweep, record("torch", rate=1.0)))
    for run_id in kept[:2]:
        mine.note_reused_run(sweep, run_id)
    other = tracking.MlflowStore(uri, "other")
    _log(other.client, other.experiment_id, other.start_sweep("elsewhere", {}), record("tf"))
    return uri, sweep


def _cells(report: Report) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """Every table of the report, cell by cell (the subtitle's clock left out)."""
    return [
        (s.title, b.caption, list(b.columns), [[c.text for c in row] for row in b.rows])
        for s in report.sections
        for b in s.blocks
        if isinstance(b, Table)
    ]


def _texts(report: Report) -> list[str]:
    return [b for s in report.sections for b in s.blocks if isinstance(b, str)]


def test_bulk_and_client_build_the_same_report(store: tuple[str, str]) -> None:
    uri, sweep = store
    kw: dict[str, Any] = {"sweep": sweep, "history_keys": HISTORY_KEYS, "tag_prefixes": REPORT_TAGS}
    fast = tracking.load_runs(uri, reader="bulk", **kw)
    slow = tracking.load_runs(uri, reader="client", **kw)
    assert len(fast.records) == len(_varied()) + 2  # the sweep's own and the two reused
    assert not any(r.tags.get("other.tag") for r in fast.records)  # only the tags asked for
    assert repr(fast) == repr(slow)  # every record, nan included, in the same order
    checked = claims.parse(CLAIMS)
    a, b = build(fast, claims=checked), build(slow, claims=checked)
    assert _cells(a) == _cells(b) and _texts(a) == _texts(b)
    assert [s.title for s in a.sections] == [
        "Overview", "Claims", "Verdicts", "Relative training time", "Relative inference time",
        "Version against version", "Inference time against batch size",
        "Power and energy against batch size", "Time breakdown", "Distributed training",
        "Time per epoch and GPU utilization", "Out-of-memory frontier", "Test accuracy per epoch",
        "Other compared pairs",
    ]  # fmt: skip
    assert sum(len(rows) for *_, rows in _cells(a)) > 100


@pytest.mark.parametrize(
    "how",
    [{"experiment": "bench"}, {}, {"experiment": "other", "sweep": "latest"}],
    ids=["experiment", "latest sweep", "latest in an experiment"],
)
def test_bulk_and_client_choose_the_same_runs(store: tuple[str, str], how: dict) -> None:
    uri, _ = store
    fast = tracking.load_runs(uri, reader="bulk", **how)
    slow = tracking.load_runs(uri, reader="client", **how)
    assert repr(fast) == repr(slow) and fast.records


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ({"experiment": "nope"}, "no experiment 'nope' in sqlite:///"),
        ({"sweep": "0" * 32}, f"no run '{'0' * 32}'"),
    ],
)
def test_bulk_and_client_refuse_alike(store: tuple[str, str], how: dict, said: str) -> None:
    uri, _ = store
    found = []
    for reader in ("bulk", "client"):
        with pytest.raises(LookupError) as caught:
            tracking.load_runs(uri, reader=reader, **how)
        found.append(str(caught.value))
    assert found[0] == found[1] and said in found[0]


def test_the_schema_it_reads_is_pinned(store: tuple[str, str]) -> None:
    """The bulk reader reads the tables of these alembic revisions only.  A new MLflow that
    changes the schema fails here: read its migration, check the queries in bench.tracking.bulk
    against it (this module's tests), then add its revision."""
    uri, _ = store
    with sqlite3.connect(uri[len("sqlite:///") :]) as db:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert set(bulk.KNOWN_SCHEMAS) == {"dc11669786a5"}
    assert revision in bulk.KNOWN_SCHEMAS


def test_an_unknown_schema_is_read_through_the_client_and_said_once(
    store: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    uri, _ = store
    monkeypatch.setattr(bulk, "KNOWN_SCHEMAS", {"0123456789ab": "some other MLflow"})
    monkeypatch.setattr(bulk, "_said", set())
    first = tracking.load_runs(uri, experiment="other", sweep="latest")
    tracking.load_runs(uri, experiment="other", sweep="latest")
    err = capsys.readouterr().err
    assert err.count("bench's bulk reader does not know") == 1, err
    assert "reading it run by run through MLflow's client" in err
    assert len(first.records) == 1


def test_an_unreadable_store_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x13" * 8192)  # a header, then no database
    found = subprocess.run(
        [sys.executable, "-m", "bench.report", "--uri", f"sqlite:///{db}", "--out",
         str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert found.returncode == 2, found.stderr
    assert found.stderr.count("\n") == 1 and "bench.report:" in found.stderr, found.stderr


def test_the_bulk_reader_opens_the_store_read_only(store: tuple[str, str], tmp_path: Path) -> None:
    uri, sweep = store
    copy = tmp_path / "mlflow.db"
    shutil.copy(uri[len("sqlite:///") :], copy)
    copy.chmod(0o444)
    tmp_path.chmod(0o555)  # not even a journal beside it
    try:
        found = tracking.load_runs(f"sqlite:///{copy}", sweep=sweep, history_keys=HISTORY_KEYS)
    finally:
        tmp_path.chmod(0o755)
    assert len(found.records) == len(_varied()) + 2


@pytest.fixture(scope="module")
def server(store: tuple[str, str]) -> Iterator[str]:
    """MLflow's own server app on the store, in a thread of this process (a `mlflow server`
    takes seconds to start); its URI."""
    import os
    import threading

    import mlflow
    from mlflow.server import BACKEND_STORE_URI_ENV_VAR, app, handlers
    from werkzeug.serving import make_server

    before = os.environ.get(BACKEND_STORE_URI_ENV_VAR), mlflow.get_tracking_uri()
    os.environ[BACKEND_STORE_URI_ENV_VAR] = store[0]
    handlers._tracking_store = None
    serving = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=serving.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{serving.server_port}"
    finally:
        serving.shutdown()
        handlers._tracking_store = None
        os.environ.pop(BACKEND_STORE_URI_ENV_VAR, None)
        if before[0] is not None:
            os.environ[BACKEND_STORE_URI_ENV_VAR] = before[0]
        mlflow.set_tracking_uri(before[1])


@pytest.mark.slow
def test_over_http_bulk_and_client_read_the_same_runs(
    store: tuple[str, str], server: str, capsys: pytest.CaptureFixture
) -> None:
    """Paged search and bulk histories against the client's run-by-run reading, and against
    the sqlite reader of the same store."""
    uri, sweep = store
    kw: dict[str, Any] = {"sweep": sweep, "history_keys": HISTORY_KEYS, "tag_prefixes": REPORT_TAGS}
    found = []
    # one page after another; several at once by offset; and a server whose tokens are not
    # offsets (the pages asked for ahead are dropped, the rest read by its tokens)
    for threads, foreign in ((1, ""), (4, ""), (4, "not-")):
        monkey = pytest.MonkeyPatch()
        monkey.setattr(bulk, "HTTP_PAGE", 10)  # several pages
        monkey.setattr(bulk, "HTTP_THREADS", threads)
        asked: list[int] = []
        real = bulk._offset_token
        monkey.setattr(bulk, "_offset_token", lambda at, a=asked, r=real, f=foreign: (
            a.append(at) or f + r(at)))  # fmt: skip
        try:
            fast = tracking.load_runs(server, reader="bulk", **kw)
        finally:
            monkey.undo()
        found.append(repr(fast.records))
        assert bool(asked) == (threads > 1)
    slow = tracking.load_runs(server, reader="client", **kw)
    local = tracking.load_runs(uri, reader="bulk", **kw)
    assert "run by run" not in capsys.readouterr().err
    assert len(local.records) > 6 * 10
    assert found[0] == found[1] == found[2] == repr(slow.records) == repr(local.records)
    assert (fast.experiment, fast.sweep_id, fast.sweep_name) == (
        local.experiment, local.sweep_id, local.sweep_name)  # fmt: skip


def _earlier(uri: str) -> str:
    from mlflow import MlflowClient

    (found,) = MlflowClient(uri).search_runs(
        [MlflowClient(uri).get_experiment_by_name("bench").experiment_id],
        "tags.`bench.sweep` = 'true' AND attributes.run_name = 'earlier'",
    )
    return str(found.info.run_id)


@pytest.mark.slow
def test_the_baseline_reads_only_the_compared_configurations(
    store: tuple[str, str], server: str
) -> None:
    """``bench report --baseline``: the baseline's runs of the compared (framework, model)
    pairs only, the same through every path (sqlite in SQL, the client and a server a search
    per model), and the same comparison as from the whole baseline."""
    from bench.report import baseline
    from bench.report.trials import to_trial
    from bench.tracking.records import kept

    uri, sweep = store
    ours = tracking.load_runs(uri, sweep=sweep, tag_prefixes=REPORT_TAGS)
    everything = [to_trial(r) for r in ours.records]
    # tf's runs, and torch's of vgg16 only; then every run again with one without a model
    subset = [t for t in everything if t.framework.startswith("tf") or t.model == "vgg16"]
    modelless = [to_trial(r) for r in _odd() if "model.name" not in r.params]
    cases = {"some": subset, "every model": subset + modelless, "none": []}
    assert baseline.needed(subset) == {("tf", "resnet50"), ("tf", "vgg16"), ("torch", "vgg16")}
    assert ("torch", None) in baseline.needed(subset + modelless)
    fewer = 0
    # an experiment; a sweep; a sweep with reused runs (searched by id) and a deleted run
    for base in ({"experiment": "bench"}, {"sweep": _earlier(uri)}, {"sweep": sweep}):
        whole = tracking.load_runs(uri, reader="client", tag_prefixes=REPORT_TAGS, **base)
        for name, now in cases.items():
            only = baseline.needed(now)
            wanted = [r for r in whole.records if kept(only, r.tags, r.params)]
            expected = baseline.compare(now, [to_trial(r) for r in whole.records])
            assert any(c.kind != baseline.MISSING for c in expected) or not now, name
            for where in (uri, server):
                for reader in ("bulk", "client"):
                    found = tracking.load_runs(where, reader=reader, tag_prefixes=REPORT_TAGS,
                                               only=only, **base)  # fmt: skip
                    assert repr(found.records) == repr(wanted), (name, where, reader)
                    assert (found.experiment, found.sweep_id, found.sweep_name) == (
                        whole.experiment, whole.sweep_id, whole.sweep_name)  # fmt: skip
                    got = baseline.compare(now, [to_trial(r) for r in found.records])
                    assert repr(got) == repr(expected), (name, where, reader)
            fewer += len(wanted) < len(whole.records)
    assert fewer >= 6  # the filter left runs out in every case but "every model"


def test_the_baseline_filter_reads_what_the_report_calls_framework_and_model() -> None:
    from bench.report.trials import to_trial
    from bench.tracking.records import framework_of, kept

    empty, contradicted, modelless, lenet = _odd()
    for r in (empty, contradicted, modelless, lenet):
        assert to_trial(r).framework == framework_of(r.tags, r.params)
    assert kept(frozenset({("tf", "resnet50")}), empty.tags, empty.params)
    assert not kept(frozenset({("tf", "vgg16")}), contradicted.tags, contradicted.params)
    assert kept(frozenset({("torch", "vgg16")}), contradicted.tags, contradicted.params)
    assert not kept(frozenset({("torch", "resnet50")}), modelless.tags, modelless.params)
    assert kept(frozenset({("torch", None)}), modelless.tags, modelless.params)
    assert not kept(frozenset(), lenet.tags, lenet.params)
