"""scripts/test_times.py: the e2e tier's guard compares calibrated totals, so a machine twice
as slow passes and 30% more e2e time on the same machine fails."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import test_times  # noqa: E402


def times(e2e_s: float, calibration: list[float], fast_s: float = 100.0) -> dict:
    return {
        "tiers": {
            "e2e": {"count": 10, "seconds": e2e_s},
            "fast": {"count": 1000, "seconds": fast_s},
        },
        "calibration_s": calibration,
    }


BASE = {**times(1000.0, [0.5, 0.5]), "margin": 0.2, "date": "2026-11-28"}


def test_the_same_suite_on_a_machine_twice_as_slow_passes() -> None:
    ok, text = test_times.check(times(2000.0, [1.0, 1.0]), BASE)
    assert ok, text
    assert "+0.0%" in text


def test_e2e_growth_past_the_margin_fails_and_says_how_to_decide_it() -> None:
    ok, text = test_times.check(times(1300.0, [0.5, 0.5]), BASE)
    assert not ok
    assert "+30.0%" in text and "write" in text


def test_growth_within_the_margin_and_fast_tier_growth_pass() -> None:
    assert test_times.check(times(1150.0, [0.5, 0.5], fast_s=900.0), BASE)[0]


def test_calibration_is_the_mean_of_before_and_after() -> None:
    ok, _ = test_times.check(times(1500.0, [0.5, 1.0]), BASE)  # 1500 / 0.75 = 2000 units
    assert ok


def test_write_then_check_round_trips(tmp_path: Path) -> None:
    run = tmp_path / "times.json"
    run.write_text(json.dumps({**times(1000.0, [0.5, 0.5]), "slowest": [["t", 1.0]]}))
    baseline = tmp_path / "baseline.json"
    assert test_times.main(["write", str(run), "--baseline", str(baseline)]) == 0
    written = json.loads(baseline.read_text())
    assert "slowest" not in written and written["margin"] == test_times.MARGIN
    assert test_times.main(["check", str(run), "--baseline", str(baseline)]) == 0


def test_a_run_without_calibration_is_refused() -> None:
    try:
        test_times.check({"tiers": {"e2e": {"count": 1, "seconds": 1.0}}}, BASE)
    except SystemExit as exc:
        assert "calibration" in str(exc)
    else:
        raise AssertionError("no calibration accepted")


def test_the_committed_baseline_is_a_whole_run() -> None:
    baseline = json.loads(test_times.BASELINE.read_text())
    assert baseline["tiers"]["e2e"]["count"] > 100 and baseline["tiers"]["fast"]["count"] > 1000
    assert len(baseline["calibration_s"]) == 2 and 0 < baseline["margin"] <= 0.5


def test_waits_for_builds_beside_the_suite_are_not_test_time() -> None:
    """A new machine builds the Docker images and Horovod while the tests wait: the same
    tests with 600 s of waiting pass against a baseline that waited for nothing."""
    cold = {**times(1600.0, [0.5, 0.5]), "waits": {"docker images": 450.0, "horovod build": 150.0}}
    ok, text = test_times.check(cold, BASE)
    assert ok, text
    assert test_times.own_seconds(cold) == 1000.0
    assert "waited" in test_times.summary(cold)
