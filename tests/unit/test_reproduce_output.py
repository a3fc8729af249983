"""What ``bench reproduce`` says: its help as plain text under its own name, the store it
reads (the last sweep's, said), and why a reproduction's figures differ (issue 50)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cli import reproduce
from bench.tracking import recent
from bench.tracking.records import RunRecord


def test_help_is_plain_text_under_benchs_name(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        reproduce.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: bench reproduce")
    assert "``" not in out and ":mod:" not in out


def test_the_store_is_the_last_sweeps_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BENCH_LAST_STORE", raising=False)  # the note in bench's cache
    assert recent.store_or_last(None, "sqlite:///d.db") == (
        "sqlite:///d.db",
        "bench's default store",
    )
    monkeypatch.chdir(tmp_path)
    recent.remember("sqlite:///mlruns/x.db")
    recent_uri, why = recent.store_or_last(None, "sqlite:///d.db")
    assert (
        recent_uri == f"sqlite:///{tmp_path}/mlruns/x.db" and why == "the store of the last sweep"
    )
    assert recent.store_or_last("sqlite:///y.db", "d")[1] == "--tracking-uri"
    recent.remember("http://me:secret@host:5000")
    assert recent.last_store() == "http://host:5000"
    assert (tmp_path / "cache" / recent.FILE).read_text() == "http://host:5000\n"
    # BENCH_LAST_STORE names another note (the suite's, so a user's own is left alone)
    monkeypatch.setenv("BENCH_LAST_STORE", str(tmp_path / "elsewhere"))
    assert recent.last_store() is None
    recent.remember("sqlite:////x/m.db")
    assert (tmp_path / "elsewhere").read_text() == "sqlite:////x/m.db\n"
    assert (tmp_path / "cache" / recent.FILE).read_text() == "http://host:5000\n"


def run(run_id: str, **metrics: float) -> RunRecord:
    return RunRecord(run_id=run_id, name="", start_time_ms=0, params={}, tags={}, metrics=metrics)


def test_the_deltas_a_reproduction_expects_are_explained() -> None:
    a = run("a" * 32, final_loss=2.0, trial_time_s=10.0, steps_per_epoch_used=40, import_time_s=3)
    b = run("b" * 32, final_loss=4.9, trial_time_s=7.0, steps_per_epoch_used=95, import_time_s=1)
    b.tags["bench.contention"] = "other processes held 1.2 of 2 CPUs"
    notes = reproduce.explained(a, b)
    assert "40 and 95 steps" in notes[0] and "final_loss" in notes[0]
    assert any("import_time_s" in n for n in notes)
    assert any("bench.contention (bbbbbbbb)" in n for n in notes)
