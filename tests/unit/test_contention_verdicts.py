"""Where load never lets go (issue 50): the verdict blames the load, not the window length;
repeats=auto stops asking for rounds the machine cannot give, and the report says so;
tuning=best never caches a pick made under load, and the console says where a pick came
from."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from bench.analysis import drift
from bench.core.config import BenchConfig, TuningConfig
from bench.core.result import OK, TrialResult
from bench.report import build
from bench.sweep import driver, session
from bench.sweep.jobs import expand
from bench.sweep.session import Row
from bench.tracking import RunRecord
from bench.trial import tuning
from tests.report_data import record, runset, said
from tests.unit.test_rounds import parsed
from tests.unit.test_tuning import FakeProbe, cfg_of, result_of

GAVE_UP = {
    "bench.contention": "other processes used 1.0 of the trial's 2 CPUs ...",
    "bench.contention_gate": "bound hit (the load did not let go in 30 s of waiting; ...)",
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_loaded_rounds_counts_the_last_rounds_whose_every_ok_run_gave_up() -> None:
    assert drift.loaded_rounds([[True, True], [True], [True, True]]) == 3
    assert drift.loaded_rounds([[True, True], [False, True], [True, True]]) == 1
    assert drift.loaded_rounds([[True], []]) == 0  # a round without an ok run ends the count


def _loaded_runs(rounds: int, auto: bool) -> list[RunRecord]:
    """torch and tf, every run timed under load the gate gave up on; torch's rates swing."""
    params = {"repeats": "auto", "max_repeats": "10"} if auto else None
    return [
        record(
            fw,
            rate=rate * (0.4 if fw == "torch" and r % 2 else 1.0),
            repeat=r,
            tags=GAVE_UP,
            params=params,
        )  # fmt: skip
        for r in range(rounds)
        for fw, rate in (("torch", 125.0), ("tf", 100.0))
    ]


def test_an_unstable_side_that_shared_the_machine_blames_the_load_not_the_windows() -> None:
    report = build(runset(_loaded_runs(4, auto=False)))
    table = next(s for s in report.sections if s.anchor == "shared").blocks[-1]
    (row,) = [r for r in table.rows if r[0].text == "training time, tf vs torch"]  # type: ignore[union-attr]
    text = said(row[2])
    assert text.startswith("not comparable: torch is unstable")
    assert "4 of its 4 runs shared their CPUs with other processes" in text
    assert "the load spread them, not the windows' length" in text
    assert "longer ones (min_window_s" not in text


def _shared_intro(runs: list[RunRecord]) -> str:
    return str(next(s for s in build(runset(runs)).sections if s.anchor == "shared").blocks[0])


def test_the_report_says_repeats_auto_stopped_on_load() -> None:
    assert (
        "repeats=auto stopped after 2 rounds: every ok run of the last 2 was timed under load "
        "that contention=wait could not wait out" in _shared_intro(_loaded_runs(2, auto=True))
    )
    assert "repeats=auto stopped" not in _shared_intro(_loaded_runs(2, auto=False))


def _auto(gave_up: list[list[bool]], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """driver._run_rounds over torch vs tf whose rates swing (a comparison that stays open);
    round r's runs gave up as ``gave_up[r]`` says (the last entry repeats)."""
    jobs = expand(parsed("framework=torch,tf"), 10)
    ran: list[int] = []

    def run_jobs(indices: list[int]) -> list[Row]:
        out = []
        for i in indices:
            r = int(dict(o.split("=") for o in jobs[i])["repeat"])
            fw = dict(o.split("=") for o in jobs[i])["framework"]
            flags = gave_up[min(r, len(gave_up) - 1)]
            rate = 100.0 * (0.3 if (r + (fw == "tf")) % 2 else 1.0)
            out.append(Row(fw, OK, rate, 1.0, gave_up=flags[fw == "tf"]))
            ran.append(i)
        return out

    driver._run_rounds(jobs, BenchConfig(repeats="auto", max_repeats=10), run_jobs)
    return len(ran), capsys.readouterr().err


def test_repeats_auto_stops_when_every_trial_of_two_rounds_gave_up_on_the_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ran, said = _auto([[True, True]], capsys)
    assert ran == 4  # two rounds, not ten
    assert "2 rounds (the machine stayed loaded: every ok trial of the last 2 rounds" in said
    ran, said = _auto([[True, True], [True, False], [False, False], [True, True]], capsys)
    assert ran == 10 and "5 rounds (the machine stayed loaded" in said  # rounds 4 and 5
    ran, said = _auto([[False, False]], capsys)  # a swinging pair on a quiet machine: all 10
    assert ran == 20 and "stayed loaded" not in said


class LoadedProbe(FakeProbe):
    """FakeProbe's results, each tagged as the contention gate gave up on it."""

    def __call__(self, cfg: BenchConfig, timeout_s: float) -> TrialResult | str:
        out = super().__call__(cfg, timeout_s)
        if isinstance(out, TrialResult):
            out.environment["contention_gate"] = GAVE_UP["bench.contention_gate"]
        return out


def test_a_pick_made_under_load_is_not_cached(tmp_path: Path) -> None:
    cfg = cfg_of(tuning=TuningConfig(name="best", probe_s=0.1, keys=["compile"]))
    probe = LoadedProbe({"x[compile=true]": [300.0, 301.0, 302.0]})
    first = tuning.resolve(cfg, tmp_path, probe)
    assert first.source == (
        "search (not cached: 3 of 3 probes were timed under load that did not let go)"
    )
    assert "(under load)" in (tmp_path / tuning.TABLE_TEXT).read_text()
    again = tuning.resolve(dataclasses.replace(cfg, repeat=1), None, probe)
    assert again.source.startswith("search")  # searched again: nothing was cached
    quiet = FakeProbe({"x[compile=true]": [300.0, 301.0, 302.0]})
    assert tuning.resolve(cfg, None, quiet).source == "search"
    assert tuning.resolve(dataclasses.replace(cfg, repeat=1), None, quiet).source.startswith(
        "cache"
    )


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("search", "searched"),
        ("cache ab12cd (2026-11-29T03:01:02+0000)", "from the cache (2026-11-29T03:01:02+0000)"),
        ("search (not cached: 2 of 5 probes ...)", "searched (not cached: 2 of 5 probes ...)"),
    ],
)
def test_the_console_says_where_a_pick_came_from_and_names_it(source: str, said: str) -> None:
    result = result_of([100.0])
    result.environment.update(tuning_source=source, tuning_pick="channels_last=True")
    row = Row("torch", OK, 100.0, 1.0)
    assert session.ok_notes(result, row) == f"tuning: {said}; pick: channels_last=True"


def test_the_console_says_what_the_gate_waited_for() -> None:
    result = result_of([100.0])
    result.summary.update(trial_windows_discarded=2.0, trial_contention_wait_s=7.4)
    row = Row("torch", OK, 100.0, 1.0)
    assert session.ok_notes(result, row) == (
        "contention=wait: 2 shared windows measured again, 7 s waited for other processes to let go"
    )
    stream = io.StringIO()
    session.Progress(1, 1, "torch", 2, stream).end(row, session.ok_notes(result, row))
    assert "    contention=wait: 2 shared windows" in stream.getvalue()
