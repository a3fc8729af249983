"""The report's "Shared machine" section: runs whose host monitor saw other processes hold
their CPUs (tag bench.contention), and every verdict again without them."""

from __future__ import annotations

from bench.report import build
from bench.report.document import Table
from tests.report_data import record, runset, said

SHARED = {"bench.contention": "other processes used 1.3 of the trial's 2 CPUs ..."}


def _runs(shared_repeats: tuple[int, ...], slowdown: float) -> list:  # type: ignore[type-arg]
    """torch 25% faster than tf over 6 repeats; torch's runs in ``shared_repeats`` ran
    beside other processes, ``slowdown`` times slower."""
    runs = []
    for repeat in range(6):
        for framework, rate in (("torch", 125.0), ("tf", 100.0)):
            jitter = 1 + 0.003 * ((repeat * 7 + len(framework)) % 5 - 2)
            shared = framework == "torch" and repeat in shared_repeats
            runs.append(
                record(
                    framework,
                    rate=rate * jitter / (slowdown if shared else 1.0),
                    repeat=repeat,
                    tags=SHARED if shared else None,
                )  # fmt: skip
            )
    return runs


def _shared(report: object) -> tuple[str, str, Table]:
    section = next(s for s in report.sections if s.anchor == "shared")  # type: ignore[attr-defined]
    intro, tally, table = section.blocks
    assert isinstance(table, Table)
    return intro, tally, table


def test_a_verdict_that_rests_on_shared_runs_is_shown_to_change() -> None:
    """Two of torch's runs lost half their speed to other processes: with them torch is
    unstable (not comparable); without them torch is faster."""
    report = build(runset(_runs((1, 4), slowdown=2.0)))
    names = [s.anchor for s in report.sections]
    assert names.index("verdicts") < names.index("shared") < names.index("relative-training")
    intro, tally, table = _shared(report)
    assert intro.startswith("2 of 12 ok runs were timed while other processes held")
    (row,) = [r for r in table.rows if r[0].text == "training time, tf vs torch"]
    assert said(row[2]).startswith("not comparable: torch is unstable")
    assert row[3].text.startswith("torch is faster than tf") and row[4].text == "changes"
    assert tally == "0 of 1 verdicts hold without those runs; 1 change."


def test_a_verdict_that_holds_without_them_and_no_section_without_any() -> None:
    _, tally, _ = _shared(build(runset(_runs((2,), slowdown=1.01))))
    assert tally == "1 of 1 verdicts hold without those runs."
    assert "shared" not in [s.anchor for s in build(runset(_runs((), 1.0))).sections]


def test_a_verdict_that_claims_nothing_with_or_without_them_does_not_change() -> None:
    """Issue 50: 'not tested' (1 run a side) that became 'not compared' without the shared
    runs counted as a change ('0 of 1 hold, 1 changes'); neither says anything."""
    runs = [
        record("torch", rate=125.0, repeat=0, tags=SHARED),
        record("tf", rate=100.0, repeat=0),
    ]
    _, tally, table = _shared(build(runset(runs)))
    (row,) = table.rows
    assert row[2].text.startswith("not tested") and row[3].text.startswith("not compared")
    assert row[4].text == "no claim either way"
    assert tally == "No verdict claims a difference or an equivalence, with or without those runs."
