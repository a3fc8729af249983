"""A trial's output is bounded (issue 51): a 5 GB sparse file named in a result became
5.1 GB of artifacts, and with the server down a 256 MB one took the host to 3.47 GB.  The
host copies at most ``launcher.max_artifact_mb`` (each file at the larger of its length and
allocated size) and ``launcher.max_artifact_files``; what is over is named, never read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.checks.rules import check
from bench.core.config import BenchConfig
from bench.launchers.collect import Caps, collect


def test_a_sparse_file_counts_at_its_length_and_is_left_out_named(tmp_path: Path) -> None:
    trial, into = tmp_path / "trial", tmp_path / "into"
    trial.mkdir(), into.mkdir()
    (trial / "worker.log").write_text("log\n")
    with open(trial / "huge.bin", "wb") as f:
        f.truncate(5 * 2**30)  # 5 GiB long, nothing allocated
    assert os.stat(trial / "huge.bin").st_blocks * 512 < 2**20
    got = collect(trial, ["worker.log", "huge.bin"], into, Caps(bytes=2**20, files=100))
    assert [p.name for p in got.files] == ["worker.log"]
    (why,) = got.refused
    assert why.startswith("huge.bin: left out: 5,368,709,120 bytes, over launcher.max_artifact_mb")
    assert sorted(p.name for p in into.iterdir()) == ["worker.log"]


def test_files_over_the_count_are_left_out_named(tmp_path: Path) -> None:
    trial, into = tmp_path / "trial", tmp_path / "into"
    (trial / "many").mkdir(parents=True), into.mkdir()
    (trial / "worker.log").write_text("log\n")
    for i in range(20):
        (trial / "many" / f"{i:02d}.txt").write_text("x")
    got = collect(trial, ["worker.log", "many"], into, Caps(bytes=2**30, files=5))
    assert len(list((into / "many").iterdir())) == 4  # the log is the first of the five
    assert len(got.refused) == 16
    assert all("over launcher.max_artifact_files (5 files)" in r for r in got.refused)


def test_the_caps_are_keys_with_a_floor() -> None:
    cfg = BenchConfig()
    assert (cfg.launcher.max_artifact_mb, cfg.launcher.max_artifact_files) == (1024, 10_000)
    cfg.launcher.max_artifact_mb = 0
    assert any(p.startswith("launcher.max_artifact_mb") for p in check(cfg))


def test_no_record_is_spooled_that_sync_cannot_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spool keeps at most SPOOL_FILES_MAX bytes of a trial's files (here made small);
    the rest is named in the record's result, which sync then reads whole."""
    from bench import tracking
    from bench.core.result import OK, TrialResult
    from bench.tracking import spool as spool_module

    monkeypatch.setenv("BENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(spool_module, "SPOOL_FILES_MAX", 1000)
    log, big = tmp_path / "worker.log", tmp_path / "trace.json"
    log.write_text("log\n")
    big.write_text("x" * 5000)
    spool = tracking.Spool("http://127.0.0.1:9", "bench", "test")
    run = spool.start_trial(spool.start_sweep("s", {}), BenchConfig(), "t", {})
    run.finish(TrialResult(OK, "torch", "lenet5", "train"), [log, big])
    (path,) = tracking.spooled()
    record = spool_module.read_record(path)
    assert record["files"] == {"worker.log": "log\n"}
    assert (
        "trace.json: left out of the spooled record"
        in record["result"]["environment"]["refused_files"]
    )
    assert "trace.json" in capsys.readouterr().err
