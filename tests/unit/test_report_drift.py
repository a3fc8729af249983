"""The drift check in the report: a sweep's flagged rounds, and every verdict again without
them (repeats=auto's item 4); the reference times read back from a real MLflow store."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report import build
from bench.report.document import Table
from bench.report.sections.drift import flagged_rounds
from bench.tracking.bulk import by_round
from tests.report_data import record, runset, said
from tests.stores import new_store


def _runs(slow_round: int | None = None, slowdown: float = 1.4) -> list:  # type: ignore[type-arg]
    """torch 25% faster than tf over 6 rounds; in ``slow_round`` every run took longer."""
    runs = []
    for repeat in range(6):
        for framework, rate in (("torch", 125.0), ("tf", 100.0)):
            jitter = 1 + 0.003 * ((repeat * 7 + len(framework)) % 5 - 2)
            slow = slowdown if repeat == slow_round else 1.0
            runs.append(record(framework, rate=rate * jitter / slow, repeat=repeat))
    return runs


def _drift(report: object) -> tuple[str, str, Table]:
    section = next(s for s in report.sections if s.anchor == "drift")  # type: ignore[attr-defined]
    intro, tally, table = section.blocks
    assert isinstance(table, Table)
    return intro, tally, table


def test_flagged_rounds_say_how_far_they_moved() -> None:
    assert flagged_rounds([1.0, 1.01, 1.2, 0.99]) == {2: pytest.approx(1.2 / 1.005 - 1)}
    assert flagged_rounds([1.0, 1.2]) == {}  # too few rounds to have a median worth it
    assert flagged_rounds([]) == {}


def test_a_verdict_that_rests_on_a_drifted_round_is_shown_to_change() -> None:
    """Round 4 ran 40% slower: with it each side is unstable (not comparable); without it
    torch is faster.  The section shows both and counts the change."""
    references = [0.20, 0.201, 0.199, 0.23, 0.20, 0.202]
    report = build(runset(_runs(slow_round=3)), references=references)
    names = [s.anchor for s in report.sections]
    assert names.index("verdicts") < names.index("drift") < names.index("relative-training")
    intro, tally, table = _drift(report)
    assert "round 4 (+14.7%)" in intro and "2 runs" in intro
    (row,) = [r for r in table.rows if r[0].text == "training time, tf vs torch"]
    assert said(row[2]).startswith("not comparable: torch is unstable")
    assert row[3].text.startswith("torch is faster than tf") and row[4].text == "changes"
    assert tally == "0 of 1 verdicts hold without the flagged rounds; 1 change."


def test_a_verdict_that_does_not_rest_on_the_drifted_round_holds() -> None:
    references = [0.20, 0.201, 0.199, 0.23, 0.20, 0.202]
    _, tally, table = _drift(build(runset(_runs(3, slowdown=1.02)), references=references))
    (row,) = [r for r in table.rows if r[0].text == "training time, tf vs torch"]
    assert row[2].text.startswith("torch is faster than tf") and row[4].text == "holds"
    assert tally == "1 of 1 verdicts hold without the flagged rounds."


def test_no_section_without_drift_or_without_a_drift_check() -> None:
    quiet = build(runset(_runs()), references=[0.2, 0.201, 0.199, 0.2, 0.202, 0.2])
    assert "drift" not in [s.anchor for s in quiet.sections]
    assert "drift" not in [s.anchor for s in build(runset(_runs())).sections]


def test_reference_points_become_one_time_per_round() -> None:
    points = [(0, 0.2), (1, 0.21), (1, 0.22), (3, float("nan")), (2, -1.0), (4, 0.19)]
    assert by_round(points) == [0.2, 0.22, 0.19]  # a resumed round keeps its later point


def test_the_references_read_back_alike_in_bulk_and_through_the_client(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from bench.tracking import bulk, sweep_references

    uri = new_store(tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=uri)
    run = client.create_run(client.create_experiment("drift")).info.run_id
    for step, value in ((0, 0.2), (1, 0.21), (2, 0.25), (1, 0.22)):
        client.log_metric(run, "reference_step_s", value, step=step)
    client.set_terminated(run)
    assert bulk.references(uri, run) == [0.2, 0.22, 0.25]
    assert sweep_references(uri, run) == [0.2, 0.22, 0.25]
    assert sweep_references(uri, "0" * 32) == []
