"""``bench sync`` delivers each spooled record once, and only into runs it can prove are the
record's own (issue 51): a crafted record naming another sweep's runs or setting MLflow's
system tags changes nothing of them; a resync doubles no metric history; an interrupted sync
resumes into the same parent run; a record the store cannot take is quarantined and the
ones after it delivered; a dead tracking URI is skipped while the others sync."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import tracking
from bench.core.config import BenchConfig
from bench.core.result import OK, EpochRecord, TrialResult
from bench.tracking.store import MlflowStore

DEAD = "http://127.0.0.1:9"


def result(epochs: int = 2) -> TrialResult:
    records = [
        EpochRecord(e, 3, 12, 0.1, 120.0, 1.0, 1.1, 1.2, loss=2.0 - e) for e in range(1, 1 + epochs)
    ]
    return TrialResult(
        OK, "torch", "lenet5", "train", epochs=records, summary={"trial_samples_per_s": 9.0}
    )


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new store made once (MLflow's migrations take seconds), copied for each test."""
    db = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowStore(f"sqlite:///{db}", "bench")
    return db


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_store: Path) -> MlflowStore:
    monkeypatch.setenv("BENCH_STATE_DIR", str(tmp_path / "state"))
    shutil.copyfile(empty_store, tmp_path / "mlflow.db")
    return MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")


def runs(store: MlflowStore) -> list[Any]:
    return list(store.client.search_runs([store.experiment_id], max_results=100))


def history(store: MlflowStore, run_id: str, key: str = "samples_per_s") -> list[int]:
    return sorted(int(m.step) for m in store.client.get_metric_history(run_id, key))


def test_a_crafted_record_cannot_touch_another_sweeps_runs(
    store: MlflowStore, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = store.start_sweep("theirs", {})
    theirs = store._start_trial(sweep, BenchConfig(), "t", {})
    theirs._finish(result(), [])
    store.close_sweep(sweep, True, False, "table")
    before = history(store, theirs.run_id)
    spool = tracking.Spool(store.uri, "bench", "test")
    mine = spool.start_sweep("crafted", {"bench.spooled_from_sweep_run": sweep})
    spool.start_trial(mine, BenchConfig(), "x", {"bench.spooled_from_run": theirs.run_id}).finish(
        result(), []
    )
    # and one that tries to slip a run into their sweep through MLflow's own tag
    spool.start_trial(mine, BenchConfig(), "y", {"mlflow.parentRunId": sweep}).finish(result(), [])
    refused: list[Path] = []
    assert tracking.sync_spool(None, store.uri, refused) == 1
    assert "mlflow.parentRunId" in capsys.readouterr().err and len(refused) == 1
    got = store.client.get_run(theirs.run_id)
    assert got.info.status == "FINISHED" and history(store, theirs.run_id) == before
    assert store.client.get_run(sweep).info.status == "FINISHED"
    children = [r for r in runs(store) if r.data.tags.get("mlflow.parentRunId") == sweep]
    assert [r.info.run_id for r in children] == [theirs.run_id]


def test_a_failed_sweeps_record_completes_its_own_run_without_doubling(store: MlflowStore) -> None:
    sweep = store.start_sweep("mine", {})
    run = store._start_trial(sweep, BenchConfig(), "t", {})
    first = result()
    run.log_epoch(first.epochs[0])  # epoch 1 reached the store, then it failed
    spool = store.fallback(sweep, RuntimeError("down"))
    tags = {"bench.spooled_from_run": run.run_id}
    tracking.SpooledTrial(spool, sweep, BenchConfig(), "t", tags).finish(first, [])
    store.end_sweep(sweep, True, False, "table")
    assert tracking.sync_spool(None, store.uri) == 1
    assert len(runs(store)) == 2  # the sweep and its one trial
    assert history(store, run.run_id) == [1, 2]  # not [1, 1, 2]
    assert store.client.get_run(run.run_id).info.status == "FINISHED"
    assert store.client.get_run(sweep).info.status == "FINISHED"


def test_an_interrupted_sync_resumes_into_the_same_parent(
    store: MlflowStore, tmp_path: Path
) -> None:
    spool = tracking.Spool(store.uri, "bench", "test")
    sweep = spool.start_sweep("spooled", {})
    for name in ("a", "b"):
        spool.start_trial(sweep, BenchConfig(), name, {}).finish(result(), [])
    first, second = tracking.spooled()
    aside = tmp_path / second.name
    second.rename(aside)  # the sync is interrupted before the second record
    assert tracking.sync_spool(None, store.uri) == 1
    aside.rename(second)
    assert tracking.sync_spool(None, store.uri) == 1
    parents = {r.data.tags.get("mlflow.parentRunId") for r in runs(store)} - {None}
    sweeps = [r for r in runs(store) if r.data.tags.get("bench.sweep") == "true"]
    assert len(parents) == 1 and len(sweeps) == 1


def test_a_record_delivered_but_not_removed_is_not_delivered_twice(store: MlflowStore) -> None:
    spool = tracking.Spool(store.uri, "bench", "test")
    spool.start_trial(spool.start_sweep("s", {}), BenchConfig(), "a", {}).finish(result(), [])
    (path,) = tracking.spooled()
    kept = path.read_bytes()
    assert tracking.sync_spool(None, store.uri) == 1
    path.write_bytes(kept)  # as if the sync died after logging, before removing the record
    tracking.sync_spool(None, store.uri)
    trials = [r for r in runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert len(trials) == 1 and history(store, trials[0].info.run_id) == [1, 2]
    assert not tracking.spooled()


def test_an_undeliverable_record_is_quarantined_and_the_next_delivered(
    store: MlflowStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tracking.Spool(store.uri, "bench", "test")
    sweep = spool.start_sweep("s", {})
    for name in ("a", "b"):
        spool.start_trial(sweep, BenchConfig(), name, {}).finish(result(), [])
    (first,) = [p for p in tracking.spooled() if '"name": "a"' in p.read_text()]
    real = MlflowStore._start_trial

    def start(self: MlflowStore, sweep_id: str, cfg: BenchConfig, name: str, tags: Any) -> Any:
        if name == "a":  # the store answers this record with an error that is not a dead URI
            raise ValueError("INVALID_PARAMETER_VALUE: the store refuses it\nmore lines")
        return real(self, sweep_id, cfg, name, tags)

    monkeypatch.setattr(MlflowStore, "_start_trial", start)
    refused: list[Path] = []
    assert tracking.sync_spool(None, store.uri, refused) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert refused == [first] and len(err) == 1 and "quarantine" in err[0]
    assert (first.parent / "quarantine" / first.name).exists() and not tracking.spooled()


def test_a_dead_uri_is_skipped_and_the_others_synced(
    store: MlflowStore, capsys: pytest.CaptureFixture[str]
) -> None:
    for uri in (DEAD, store.uri):
        spool = tracking.Spool(uri, "bench", "test")
        spool.start_trial(spool.start_sweep("s", {}), BenchConfig(), "a", {}).finish(result(), [])
    failed: list[str] = []
    assert tracking.sync_spool(None, None, None, failed) == 1
    assert failed == [DEAD]
    assert [line for line in capsys.readouterr().err.splitlines() if DEAD in line]
    assert len(tracking.spooled()) == 1  # the dead URI's record stays
    assert len([r for r in runs(store) if "mlflow.parentRunId" in r.data.tags]) == 1


def test_a_result_of_the_wrong_types_is_not_a_result() -> None:
    good = result().to_dict()
    for change in (
        {"summary": {"trial_samples_per_s": "fast"}},
        {"environment": {"cpu": {"nested": "dict"}}},
        {"device": {"a": 1}},
        {"threads": "4"},
    ):
        with pytest.raises(ValueError, match=next(iter(change))):
            TrialResult.from_dict({**good, **change})
    bad_epoch = {**good, "epochs": [{**good["epochs"][0], "samples_per_s": "x"}]}
    with pytest.raises(ValueError, match="epochs"):
        TrialResult.from_dict(bad_epoch)
    assert TrialResult.from_dict(good) == result()


def test_the_health_probe_waits_as_long_as_mlflow_is_told_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that answers in 1 s is out of reach for a 0.5 s probe, and reached once
    MLflow's own MLFLOW_HTTP_REQUEST_TIMEOUT says 3 s (before, the probe's 5 s was fixed: a
    slow server was spooled to and never synced, whatever MLflow's timeout)."""
    import http.server
    import threading
    import time

    from bench.tracking import reach

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(1.0)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        monkeypatch.setattr(reach, "PROBE_TIMEOUT_S", 0.5)
        monkeypatch.delenv(reach.TIMEOUT_VAR, raising=False)
        assert reach.reachable(uri) is not None
        monkeypatch.setenv(reach.TIMEOUT_VAR, "3")
        assert reach.reachable(uri) is None
    finally:
        server.shutdown()


def test_a_retried_create_leaves_one_run(
    store: MlflowStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server made the run, then a 500 reached the client, whose retry made a second;
    the first stayed RUNNING for ever.  Now the retry's twin is deleted."""
    real = store.client.create_run

    def twice(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)  # made, but the answer was lost
        return real(*args, **kwargs)

    monkeypatch.setattr(store.client, "create_run", twice)
    sweep = store.start_sweep("s", {})
    store._start_trial(sweep, BenchConfig(), "t", {})
    live = runs(store)  # search_runs shows active runs only
    assert len(live) == 2 and sweep in {r.info.run_id for r in live}


@pytest.mark.parametrize("tool", ["sync", "report"])
def test_ctrl_c_while_a_tool_loads_is_exit_130_in_one_line(
    tool: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 51: Ctrl-C in the first second of bench report or sync (their imports) printed
    a traceback."""
    import importlib
    import sys

    from bench import cli

    def interrupted(name: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(sys, "argv", ["bench", tool])
    monkeypatch.setattr(importlib, "import_module", interrupted)
    with pytest.raises(SystemExit) as done:
        cli.run()
    assert done.value.code == 130
    assert capsys.readouterr().err.strip() == f"bench {tool}: interrupted"
