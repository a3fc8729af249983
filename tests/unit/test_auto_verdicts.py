"""Issue 33's follow-ups on repeats=auto's verdicts (/work/m33/bugs.md): the report gives a
verdict for every pair the rounds compare (bug 3), a pair's verdict is the look at which the
rounds stopped it (bugs 5 and 9), and "about N more runs a side" is never missing while a
pair is open, states its assumption, stays within the rounds left, and an interval too wide
to mean anything is said to be so (bugs 6 and 11)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from bench.analysis import sequential as seq
from bench.analysis import stats
from bench.report import build
from bench.report.document import Report, Table
from bench.sweep import rounds
from tests.report_data import record, runset, said

AUTO = {"repeats": "auto", "max_repeats": "10", "equivalence_margin": "0.02"}


def _runs(rates: dict[tuple[str, str], list[float]], params: dict[str, str] | None = None) -> list:  # type: ignore[type-arg]
    """Runs of lenet5 by (framework, threads): one rate a round."""
    out = []
    for (framework, threads), series in rates.items():
        for repeat, rate in enumerate(series):
            extra = {"threads": threads, **(params or {})}
            out.append(record(framework, "resnet50", rate=rate, repeat=repeat, params=extra))
    return out


def _table(report: Report, anchor: str) -> Table:
    section = next(s for s in report.sections if s.anchor == anchor)
    return next(b for b in section.blocks if isinstance(b, Table))


def _jitter(mean: float, n: int, seed: int, cv: float = 0.004) -> list[float]:
    rng = random.Random(seed)
    return [mean * rng.gauss(1.0, cv) for _ in range(n)]


# --- bug 3: a verdict for every pair the rounds compare ---


def test_the_report_gives_the_threads_pair_of_an_aa_sweep_a_verdict() -> None:
    """framework=torch,tf threads=0,2, 4 fixed repeats: the rounds compare threads 0 vs 2
    within each framework; the report states those verdicts, labelled by the key, and the
    framework verdicts are those of the relative time table, first and unchanged."""
    rates = {
        ("torch", "0"): _jitter(125.0, 4, 1), ("torch", "2"): _jitter(125.0, 4, 2),
        ("tf", "0"): _jitter(100.0, 4, 3), ("tf", "2"): _jitter(80.0, 4, 4),
    }  # fmt: skip
    report = build(runset(_runs(rates)))
    every = _table(report, "verdicts")
    compared = [r[0].text for r in every.rows]
    assert compared == ["training time, tf vs torch"] * 2 + ["training time, threads 2 vs 0"] * 2
    training = _table(report, "relative-training")
    assert [said(r[3]) for r in every.rows[:2]] == [said(r[4]) for r in training.rows]
    others = _table(report, "other-pairs")
    by_framework = {r[1].text.split(" · ")[0]: r for r in others.rows}
    assert by_framework["tf"][1].text == "tf · resnet50 · batch 32 · 32 px · cpu"
    assert by_framework["tf"][5].text.startswith("threads=0 is faster than threads=2 by 2")
    assert by_framework["torch"][5].text.startswith(("equivalent", "no significant"))
    # the same pairs as the rounds' own rule finds in the sweep's overrides
    configs = [(f"framework={f}", f"threads={t}") for f, t in rates]
    keys = sorted(c.key for c in rounds.comparisons(configs) if c.key != "framework")
    assert keys == ["threads", "threads"]


def test_a_pair_that_differs_in_a_workload_key_or_in_two_keys_gets_no_row() -> None:
    runs = [
        record("torch", "resnet50", rate=100.0 + i, repeat=i, batch=b, params={"threads": t})
        for i in range(3)
        for b, t in ((32, "0"), (64, "2"))
    ]
    assert "other-pairs" not in [s.anchor for s in build(runset(runs)).sections]


# --- bugs 5 and 9: the verdict at the look that stopped the pair ---


def _stopped_sides(later: list[float]) -> tuple[stats.Sample, stats.Sample]:
    """torch 2x faster than tf for 3 rounds (settled at round 3 at the latest), then both
    sides run on to round 6 for other pairs with ``later`` times a side."""
    fast = [1.00, 1.01, 0.99] + later
    slow = [2.00, 2.03, 1.98] + later
    a = stats.Sample("torch", fast, looks=9, rounds=list(range(len(fast))))
    b = stats.Sample("tf", slow, looks=9, rounds=list(range(len(slow))))
    return a, b


def test_a_settled_pairs_verdict_is_the_look_that_settled_it() -> None:
    """Rounds 4-6 would drown the difference in noise (and make torch unstable); the pair
    settled at round 2, so its verdict is that look's: 2 vs 2 runs at look 1's level."""
    a, b = _stopped_sides([3.0, 0.5, 4.0])
    verdict = stats.compare(a, b)
    assert verdict.kind == stats.FASTER and verdict.faster == "torch"
    level = seq.look_alpha(1, 9)
    assert "(2 vs 2 runs; ratio 2.0" in verdict.text
    assert f"sequential look 1 of 9 at level {level:.3g}; settled at round 2" in verdict.text
    assert "(8 later runs of its sides not counted)" in verdict.text
    assert verdict.ratio == pytest.approx(math.sqrt(2.00 * 2.03 / (1.00 * 1.01)))


def test_the_verdict_uses_the_stopping_looks_runs_when_one_side_ran_on() -> None:
    """lenet-auto2: mxnet stopped after round 5, torch ran to round 7 for its pair with tf.
    The verdict is the 5 vs 5 look 4 that stopped the pair, not 7 vs 5 at look 4's level."""
    torch_ = [1.00, 1.04, 0.97, 1.02, 0.99, 1.30, 1.25]
    mxnet = [1.20, 1.31, 1.16, 1.27, 1.21]
    a = stats.Sample("torch", torch_, looks=9, rounds=list(range(7)))
    b = stats.Sample("mxnet", mxnet, looks=9, rounds=list(range(5)))
    stop = stats.stopped_at(a, b, 0.02)
    assert stop is not None and stop <= 5
    verdict = stats.compare(a, b)
    assert f"({stop} vs {stop} runs;" in verdict.text
    assert f"look {stop - 1} of 9" in verdict.text and f"settled at round {stop}" in verdict.text
    first = seq.look(torch_[:stop], mxnet[:stop], stop - 1, 9)
    assert verdict.ratio == pytest.approx(first.ratio) and verdict.ci_low == pytest.approx(
        first.low
    )


def test_the_stopping_look_is_the_rounds_own() -> None:
    """The report's replay and the sweep's rounds stop a pair at the same round: a fake
    sweep's rounds, then the report's reading of the same runs."""
    rng = random.Random(5)
    for seed in range(12):
        true = 1.0 + 0.02 * (seed % 4)
        times: dict[rounds.Config, list[float]] = {("x=a",): [], ("x=b",): []}
        pair = rounds.comparisons(list(times))
        kept: dict[rounds.Comparison, rounds.Status] = {}
        stop = 10
        for done in range(1, 11):
            times[("x=a",)].append(rng.lognormvariate(0.0, 0.02))
            times[("x=b",)].append(true * rng.lognormvariate(0.0, 0.02))
            if done >= 2 and all(
                s.settled for s in rounds.settle(pair, times, done, 10, 0.02, kept)
            ):
                stop = done
                break
        a = stats.Sample("a", times[("x=a",)], looks=9, rounds=list(range(stop)))
        b = stats.Sample("b", times[("x=b",)], looks=9, rounds=list(range(stop)))
        assert stats.stopped_at(a, b, 0.02) == stop, seed


def test_the_report_of_an_auto_sweep_says_where_each_pair_settled() -> None:
    rates = {
        ("torch", "0"): [200.0, 201.0, 199.0, 150.0, 260.0, 140.0],
        ("tf", "0"): [100.0, 101.0, 99.0, 130.0, 70.0, 150.0],
    }
    report = build(runset(_runs(rates, AUTO)))
    (row,) = _table(report, "relative-training").rows
    assert row[4].text.startswith("torch is faster than tf by 99")  # not the later rounds' 4%
    assert "2 vs 2 runs;" in said(row[4]) and "settled at round 2" in said(row[4])
    assert "(8 later runs of its sides not counted)" in said(row[4])


# --- bugs 6 and 11: the estimate of more runs, and unbounded intervals ---


def test_an_open_pair_always_says_what_more_runs_would_likely_do() -> None:
    """Every open look of many random pairs says about how many more runs (within the
    rounds left) or that none within them is likely, and its assumption; the estimate
    never passes the rounds left (lenet-auto said 240 and 377 in a 10-round sweep)."""
    rng = np.random.default_rng(11)
    seen_open = 0
    for _ in range(300):
        cv, ratio = rng.choice([0.01, 0.03, 0.08]), rng.choice([1.0, 1.02, 1.05])
        n = int(rng.integers(2, 9))
        a = np.exp(rng.normal(0, cv, n))
        b = ratio * np.exp(rng.normal(0, cv, n))
        pair = rounds.comparisons([("x=a",), ("x=b",)])
        (status,) = rounds.settle(pair, {("x=a",): list(a), ("x=b",): list(b)}, n, 10, 0.02)
        if status.look is None or status.look.kind != seq.OPEN or status.noisy:
            continue
        seen_open += 1
        assert "if the observed difference is the true one" in status.why
        left = 9 - (n - 1)
        assert 0 <= status.look.more <= left and status.look.left == left
        if status.look.more:
            assert f"about {status.look.more} more runs a side" in status.why
        else:
            assert f"no verdict likely within the {left} rounds left" in status.why
    assert seen_open > 50


def test_the_estimate_is_not_below_what_the_current_look_failed_to_show() -> None:
    """lenet-auto round 6: the old estimate (normal quantiles at the last look's level)
    came out <= the runs already made while the current look still spanned 1, so no
    estimate was printed.  The t-based one needs at least one more run, and more runs
    for a smaller observed difference."""
    spread, n = 0.05, 6
    needs = [
        seq.more_runs(math.log(r), spread, math.log(1.02), 0.005, n, 1000)
        for r in (1.12, 1.08, 1.06)
    ]
    assert all(x is not None and x >= 1 for x in needs)
    assert needs == sorted(needs)  # type: ignore[type-var]


def test_resnet_fixeds_estimate_is_no_promise_of_one_more_run() -> None:
    """resnet-fixed's 4 vs 4 runs (ranks overlapping) said "needs about 1 more runs a
    side"; resnet-auto then ran 6 more without a verdict."""
    torch_ = [1000 / r for r in (126, 131, 131, 125)]
    tf = [1000 / r for r in (108, 110, 117, 133)]
    env = [{"device": "cpu"}] * 4
    verdict = stats.compare(
        stats.Sample("torch", torch_, environments=env), stats.Sample("tf", tf, environments=env)
    )
    assert verdict.kind == stats.SAME
    more = int(verdict.text.split("needs about ")[1].split(" ")[0])
    assert more >= 4
    assumption = "for an 80% chance of a verdict, if the observed difference is the true one"
    assert verdict.text.endswith(f"more runs a side {assumption}")


def test_an_unbounded_interval_is_said_to_be_one() -> None:
    """Round 2 with noisy sides: Welch's t has about 1 degree of freedom, and the interval
    ran from 0.000 to 58,487,079."""
    a, b = [1.0, 1.6], [1.3, 0.8]
    seen = seq.look(a, b, 1, 9)
    assert seen.high / seen.low > seq.UNBOUNDED_SPAN and not seen.bounded
    assert seen.why.startswith("too few runs for a bounded interval (2 vs 2 runs)")
    assert "[0.0" not in seen.why
    # in the report: sides stable enough to compare (CV < 10%), one without spread (1 df)
    a, b = [1.0, 1.13], [1.5, 1.5001]
    report = build(runset(_runs({("torch", "0"): [1000 / x for x in a],
                                 ("tf", "0"): [1000 / x for x in b]}, AUTO)))  # fmt: skip
    (row,) = _table(report, "relative-training").rows
    assert "not settled at round 2" in said(row[4])
    assert row[3].text.endswith("(too few runs for a bounded interval)")
    assert "too few runs for a bounded interval" in said(row[4])


# --- bug 7: load that starts during a round ---


def test_a_round_whose_reference_changed_while_it_ran_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """lenet-auto: load began during round 9; the reference before it was normal and only
    round 10's was flagged.  The reference after each round (the next one's, and one after
    the last) names the round that changed while it ran."""
    from types import SimpleNamespace

    from bench.analysis import drift
    from bench.sweep import driver

    assert drift.changed_within([1.0, 1.01, 0.99, 4.6], 4.5) == {2: pytest.approx(4.6 / 0.99 - 1)}
    assert drift.changed_within([1.0, 1.01, 0.99], 2.0) == {2: pytest.approx(2.0 / 0.99 - 1)}
    assert drift.changed_within([1.0, 1.01], None) == {}
    assert drift.changed_within([], 1.0) == {}
    noted: list[tuple[int, float]] = []
    store = SimpleNamespace(note_round=lambda _sweep, r, s: noted.append((r, s)))
    check = driver._Drift(SimpleNamespace(store=store, sweep_id="s"), True)  # type: ignore[arg-type]
    times = iter([1.0, 1.01, 0.99, 2.0])  # before rounds 1-3, then after round 3
    check.reference = SimpleNamespace(time=lambda: next(times))  # type: ignore[assignment]
    for r in range(3):
        check.before(r)
    check.after()
    check.say()
    said = capsys.readouterr().err
    assert "the machine changed during round 3 (+102% after it)" in said
    assert "drifted" not in said  # the references before the rounds agree
    assert noted == [(0, 1.0), (1, 1.01), (2, 0.99)]


def test_only_time_per_sample_is_judged_at_the_rounds_stopping_look() -> None:
    """The rounds look at time per sample; a claim on another metric (seed003's
    communication time) is judged at the look its runs reach, not at a replay of the rounds'
    rule on a metric they never looked at."""
    from bench.report.sections.common import sample
    from bench.report.trials import to_trial

    runs = [
        to_trial(record("tf", rate=100.0, repeat=i, params=AUTO, metrics={"time_comm_ms": 3.0}))
        for i in range(4)
    ]
    timed = sample("tf", runs, lambda t: t.ms_per_sample)
    assert timed.looks == 9 and timed.rounds == [0, 1, 2, 3]
    other = sample("tf", runs, lambda t: t.metric("time_comm_ms"))
    assert other.looks == 9 and other.rounds == []


def test_the_pairs_are_every_pair_that_differs_in_one_compared_key() -> None:
    """bench.analysis.pairs buckets configurations rather than trying every pair: the same
    pairs, in the same order, as trying every pair, on seeded random sweeps whose keys come
    in any order and are sometimes missing."""
    from bench.analysis import pairs

    def every_pair(configs: list[tuple[str, ...]]) -> list[tuple[int, int, str]]:
        maps = [pairs.split(c) for c in configs]
        out = []
        for i, a in enumerate(maps):
            for j in range(i + 1, len(maps)):
                b = maps[j]
                differ = [k for k in a if a[k] != b.get(k)]
                if a.keys() == b.keys() and len(differ) == 1:
                    if differ[0].lstrip("+~") not in pairs.NOT_COMPARED:
                        out.append((i, j, differ[0]))
        return out

    rng = random.Random(3)
    keys = ["framework", "threads", "model", "batch_size", "+precision", "seed"]
    for _ in range(200):
        configs: list[tuple[str, ...]] = []
        for _ in range(rng.randint(1, 20)):
            chosen = [k for k in keys[: rng.randint(1, 6)] if rng.random() < 0.9]
            rng.shuffle(chosen)
            configs.append(tuple(f"{k}={rng.choice('ab')}" for k in chosen))
        configs = list(dict.fromkeys(configs))
        found = pairs.one_key(configs)
        index = {c: i for i, c in enumerate(configs)}
        assert [(index[c.a], index[c.b], c.key) for c in found] == every_pair(configs)


def test_a_pair_the_cap_ended_says_so() -> None:
    """Open to the last look: futile there, and the verdict says the cap ended it (not
    "settled")."""
    a = [1.00, 1.08, 0.95, 1.04]
    b = [1.03, 0.97, 1.06, 1.00]
    capped = stats.compare(
        stats.Sample("x", a, looks=3, rounds=[0, 1, 2, 3]),
        stats.Sample("y", b, looks=3, rounds=[0, 1, 2, 3]),
    )
    level = seq.look_alpha(3, 3)
    assert capped.kind == stats.SAME
    assert capped.text.endswith(
        f"sequential look 3 of 3 at level {level:.3g}; not settled at round 4; max_repeats reached)"
    )


def test_an_auto_sweeps_report_describes_the_sequential_rule_not_the_fixed_one() -> None:
    """Issue 50: a repeats=auto report's Verdicts paragraph described the fixed-level test
    (bootstrap, Mann-Whitney under 8 runs, 'use repeats >= 4')."""
    rates = {("torch", "0"): _jitter(200.0, 4, 1), ("tf", "0"): _jitter(100.0, 4, 2)}

    def method(params: dict[str, str] | None) -> str:
        report = build(runset(_runs(rates, params)))
        section = next(s for s in report.sections if s.anchor == "verdicts")
        return str(section.blocks[0])

    auto, fixed = method(AUTO), method(None)
    assert "repeats=auto" in auto and "9 planned looks" in auto and "±2%" in auto
    assert "Mann-Whitney" not in auto and "repeats >= 4" not in auto
    assert "Mann-Whitney" in fixed and "repeats=auto" not in fixed
