"""repeats=auto's stopping rule (bench.analysis.sequential): its levels, its verdicts on
constructed data, and its error rate by a small simulation (scripts/measure/bench_sequential.py
runs the full one)."""

from __future__ import annotations

import math

import pytest

from bench.analysis import sequential as seq


def test_the_levels_spend_exactly_alpha_over_the_planned_looks() -> None:
    levels = [seq.look_alpha(k, 9) for k in range(1, 10)]
    assert math.isclose(sum(levels), seq.ALPHA)
    assert levels == sorted(levels, reverse=True)  # Pocock-type: a little more early
    assert levels[0] > 0.008  # a large difference can settle at round 2
    with pytest.raises(ValueError):
        seq.look_alpha(10, 9)


def test_a_large_difference_settles_at_the_first_look() -> None:
    seen = seq.look([1.00, 1.01], [2.00, 2.02], 1, 9)
    assert seen.kind == seq.FASTER and 1.8 < seen.low < seen.ratio < seen.high < 2.2


def test_close_sides_with_little_noise_are_equivalent() -> None:
    a = [1.000, 1.002, 0.999, 1.001, 1.000, 0.998]
    b = [1.001, 0.999, 1.000, 1.002, 0.999, 1.001]
    seen = seq.look(a, b, 5, 9, margin=0.02)
    assert seen.kind == seq.EQUIVALENT and "±2%" in seen.why


def test_an_open_comparison_says_why_and_about_how_many_more_runs() -> None:
    seen = seq.look([1.00, 1.06, 0.97], [1.04, 1.01, 1.07], 2, 9)
    assert seen.kind == seq.OPEN and "spans both sides" in seen.why and seen.more == 0
    assert seen.left == 7  # 80% of a verdict is out of reach at this spread: said, not missing


def test_the_last_look_settles_as_futile_when_nothing_was_shown() -> None:
    a, b = [1.00, 1.08, 0.95, 1.04], [1.03, 0.97, 1.06, 1.00]
    assert seq.look(a, b, 3, 3).kind == seq.FUTILE


def test_identical_sides_rarely_differ_and_naive_retesting_often_does() -> None:
    found = seq.simulate(300, cv=0.03, seed=7)
    # at most 5% by construction (binomial noise at 300 sweeps: about 1.3 points)
    assert found.faster <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)
    assert found.naive_faster > 2 * max(found.faster, 0.05)


def test_a_true_difference_is_found_with_low_noise() -> None:
    found = seq.simulate(100, cv=0.01, true_ratio=1.05, seed=3)
    assert found.faster > 0.95 and found.rounds < 5


def test_the_drift_check_flags_rounds_that_moved() -> None:
    from bench.analysis import drift

    reference = drift.Reference(target_s=0.01)
    first = reference.time()
    assert reference.sorts >= 1 and first > 0
    assert drift.flagged([1.0, 1.01, 0.99, 1.2, 1.0]) == [3]
    assert drift.flagged([1.0, 1.2]) == []  # too few rounds to have a median worth the name
