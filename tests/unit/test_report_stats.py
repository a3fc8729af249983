"""The report's verdicts and sections on constructed data (no MLflow, no frameworks)."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from bench.analysis import stats
from bench.report import build, render, write
from bench.report.document import Figure, Report, Table
from bench.tracking import RunSet
from tests.report_data import every_section, record, runset


def draws(mean: float, n: int, seed: int, cv: float = 0.02) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, mean * cv) for _ in range(n)]


def env(**extra: str) -> dict[str, str]:
    return {"device": "cpu", "cpu_model": "Test CPU", "python_version": "3.11.7", **extra}


def sample(name: str, values: list[float], **kwargs: object) -> stats.Sample:
    n = len(values)
    return stats.Sample(
        name,
        values,
        environments=kwargs.get("environments", [env()] * n),  # type: ignore[arg-type]
        num_parameters=kwargs.get("num_parameters", [1000] * n),  # type: ignore[arg-type]
    )


# --- verdicts ---


@pytest.mark.parametrize("n", [10, 5])  # bootstrap alone; bootstrap and Mann-Whitney
def test_a_clear_difference_names_the_faster_side_and_how_much(n: int) -> None:
    fast, slow = draws(10.0, n, 1), draws(12.0, n, 2)
    verdict = stats.compare(sample("torch", fast), sample("tf", slow))
    assert verdict.kind == stats.FASTER and verdict.faster == "torch"
    assert verdict.text.startswith("torch is faster than tf by ")
    percent = float(re.search(r"by ([\d.]+)%", verdict.text).group(1))  # type: ignore[union-attr]
    assert 15 < percent < 25  # truly 20%
    low, high = (float(x) for x in re.search(r"CI ([\d.-]+)%, ([\d.-]+)%", verdict.text).groups())  # type: ignore[union-attr]
    assert 0 < low < percent < high
    assert verdict.ratio == pytest.approx(sum(slow) / sum(fast))
    # The other way round: the sign follows the data, not the argument order.
    swapped = stats.compare(sample("tf", slow), sample("torch", fast))
    assert swapped.kind == stats.FASTER and swapped.faster == "torch"
    assert swapped.text.startswith("torch is faster than tf by ")
    assert swapped.ratio == pytest.approx(1 / verdict.ratio)


def test_identical_distributions_give_no_significant_difference() -> None:
    values = draws(10.0, 10, 3, cv=0.08)
    same = stats.compare(sample("torch", values), sample("tf", list(values)))
    assert same.kind == stats.SAME and same.text.startswith("no significant difference")
    assert "inconclusive: needs about" in same.text  # 8% noise: too wide for ±2%
    assert same.ratio == pytest.approx(1.0)
    assert same.ci_low < 1 < same.ci_high
    # Two draws from one distribution, small samples (Mann-Whitney decides).
    small = stats.compare(
        sample("torch", draws(10.0, 5, 4, cv=0.08)), sample("tf", draws(10.0, 5, 5, cv=0.08))
    )
    assert small.kind == stats.SAME
    assert small.p_value > stats.ALPHA


def test_close_sides_with_little_noise_are_equivalent_within_the_margin() -> None:
    values = draws(10.0, 10, 3)  # 2% noise, the same runs on both sides
    same = stats.compare(sample("torch", values), sample("tf", list(values)))
    assert same.kind == stats.EQUIVALENT and same.text.startswith("equivalent within ±2%")
    # a margin narrower than the noise allows: no longer shown
    narrow = stats.compare(sample("torch", values), sample("tf", list(values)), margin=0.005)
    assert narrow.kind == stats.SAME
    # 3% apart with 0.5% noise: a difference, not an equivalence
    apart = stats.compare(
        sample("a", draws(10.0, 8, 1, 0.005)), sample("b", draws(10.3, 8, 2, 0.005))
    )
    assert apart.kind == stats.FASTER


def test_three_runs_a_side_cannot_be_significant_and_the_verdict_says_why() -> None:
    verdict = stats.compare(sample("torch", [10.0, 10.1, 10.2]), sample("tf", [20.0, 20.1, 20.2]))
    assert verdict.kind == stats.NOT_TESTED  # never "no significant difference": no test ran
    assert verdict.text.startswith("not tested (3 vs 3 runs")
    assert "p cannot go below 0.1" in verdict.text and "repeats >= 4" in verdict.text
    assert stats.smallest_p(3, 3) == pytest.approx(0.1)
    assert stats.smallest_p(4, 4) < stats.ALPHA


def test_differing_parameter_counts_are_not_comparable() -> None:
    verdict = stats.compare(
        sample("torch", draws(10.0, 10, 1), num_parameters=[25_557_032] * 10),
        sample("tf", draws(12.0, 10, 2), num_parameters=[25_636_712] * 10),
    )
    assert verdict.kind == stats.NOT_COMPARABLE
    assert "parameter counts 25,557,032, 25,636,712" in verdict.text
    assert not math.isnan(verdict.ratio)  # still computed, for the figure


def test_environments_must_agree_except_the_frameworks_own_versions() -> None:
    fast, slow = draws(10.0, 10, 1), draws(12.0, 10, 2)
    own_versions = stats.compare(
        sample("torch", fast, environments=[env(torch_version="2.13")] * 10),
        sample("tf", slow, environments=[env(tensorflow_version="2.21")] * 10),
    )
    assert own_versions.kind == stats.FASTER
    other_device = stats.compare(
        sample("torch", fast), sample("tf", slow, environments=[env(device="cuda:0")] * 10)
    )
    assert other_device.kind == stats.NOT_COMPARABLE
    assert "device differs between torch and tf (cpu, cuda:0)" in other_device.text
    mixed_repeats = [env(torch_version="2.12")] * 5 + [env(torch_version="2.13")] * 5
    drifted = stats.compare(sample("torch", fast, environments=mixed_repeats), sample("tf", slow))
    assert drifted.kind == stats.NOT_COMPARABLE
    assert "torch runs differ in torch_version (2.12, 2.13)" in drifted.text


def test_an_unstable_side_is_not_comparable() -> None:
    shaky = [10.0, 12.0, 8.0, 11.5, 8.5, 10.0, 12.5, 7.5]  # CV about 18%
    verdict = stats.compare(sample("torch", shaky), sample("tf", draws(20.0, 8, 2)))
    assert verdict.kind == stats.NOT_COMPARABLE and "torch is unstable (CV" in verdict.text
    timed = stats.Sample("torch", shaky, windows_s=[0.08] * 8)
    verdict = stats.compare(timed, sample("tf", draws(20.0, 8, 2)))
    assert "its timed windows last 80 ms" in verdict.text and "min_window_s" in verdict.text
    steady = [10.0, 10.9, 9.1, 10.0]  # CV about 7%
    assert stats.cv(steady) < stats.UNSTABLE_CV
    assert stats.compare(sample("a", steady), sample("b", steady)).kind == stats.SAME


def test_the_bootstrap_is_reproducible() -> None:
    a, b = draws(10.0, 6, 1), draws(11.0, 6, 2)
    assert stats.bootstrap_ratio(a, b) == stats.bootstrap_ratio(a, b)


def test_the_bootstrap_gives_the_hand_written_percentile_bootstrap_interval() -> None:
    """scipy.stats.bootstrap replaced bench's own percentile bootstrap (each side resampled
    on its own from one seeded generator, a's draws first): the same interval, to 1e-9."""
    import numpy as np

    a, b = [10.1, 9.8, 10.4, 10.0, 9.9, 10.3], [11.2, 10.9, 11.5, 11.1, 11.0, 11.4, 10.8]
    xa, xb = np.asarray(a), np.asarray(b)
    rng = np.random.default_rng(stats.SEED)
    n = stats.BOOTSTRAP_RESAMPLES
    ma = xa[rng.integers(0, len(xa), (n, len(xa)))].mean(axis=1)
    mb = xb[rng.integers(0, len(xb), (n, len(xb)))].mean(axis=1)
    low, high = np.percentile(mb / ma, [100 * stats.ALPHA / 2, 100 * (1 - stats.ALPHA / 2)])
    ratio, got_low, got_high = stats.bootstrap_ratio(a, b)
    assert ratio == pytest.approx(xb.mean() / xa.mean(), abs=1e-12)
    assert abs(got_low - low) < 1e-9 and abs(got_high - high) < 1e-9
    assert got_low < ratio < got_high


def test_trend_against_batch_size() -> None:
    batches = [1, 1, 8, 8, 32, 32, 128, 128]
    falling = [10.0, 10.2, 4.0, 4.1, 2.0, 2.1, 1.5, 1.4]
    assert stats.trend(batches, falling, "time", "batch").direction == "decreases"
    flat = draws(100.0, 8, 7)
    assert stats.trend(batches, flat, "power", "batch").direction == ""
    assert "too few" in stats.trend([1, 8, 1, 8], [1.0, 2.0, 1.0, 2.0], "x", "batch").text


# --- sections from constructed runs ---


@pytest.fixture(scope="module")
def full() -> Report:
    return build(every_section())


def tables(report: Report, title: str) -> list[Table]:
    section = next(s for s in report.sections if s.title == title)
    return [b for b in section.blocks if isinstance(b, Table)]


def test_every_section_is_built_when_the_runs_hold_its_data(full: Report) -> None:
    report = full
    titles = [s.title for s in report.sections]
    assert titles == [
        "Overview",
        "Verdicts",
        "Relative training time",
        "Relative inference time",
        "Inference time against batch size",
        "Power and energy against batch size",
        "Time breakdown",
        "Distributed training",
        "Time per epoch and GPU utilization",
        "Out-of-memory frontier",
        "Test accuracy per epoch",
        "Other compared pairs",  # workers 1, 2, 4: a key a sweep compares (no figure)
    ]
    for section in report.sections[2:]:
        if section.title not in (
            "Time per epoch and GPU utilization",
            "Out-of-memory frontier",
            "Other compared pairs",
        ):
            assert any(isinstance(b, Figure) and b.png[:4] == b"\x89PNG" for b in section.blocks)


def test_sections_hold_the_right_numbers(full: Report) -> None:
    report = full
    training = tables(report, "Relative training time")[0]
    cifar = next(r for r in training.rows if "data.name=cifar10" in r[0].text)
    assert cifar[4].text.startswith("torch is faster than tf by 2")  # 125 vs 100 samples/s
    inference = tables(report, "Inference time against batch size")[0]
    assert {r[3].text.split(" (")[0] for r in inference.rows} == {
        "time per sample decreases with batch"
    }
    oom = tables(report, "Out-of-memory frontier")[0]
    assert {(r[0].text, r[2].text, r[3].text) for r in oom.rows if r[3].text != "-"} == {
        ("torch", "256", "512"),
        ("tf", "256", "512"),
    }
    scaling = tables(report, "Distributed training")[0]
    four = [r for r in scaling.rows if r[1].text.startswith("4 ")]
    assert four and all(r[3].text.startswith("7") for r in four)  # 0.9^3 = 73% of linear
    phases = tables(report, "Time breakdown")[1]
    forward = next(r for r in phases.rows if r[1].text == "forward")
    assert forward[3].text.startswith("torch is faster than tf by 4")  # 10 vs 14 ms
    operators = tables(report, "Time breakdown")[2]
    conv = next(r for r in operators.rows if r[1].text == "convolution")
    assert conv[5].text.startswith("tf is faster than torch")
    epochs = tables(report, "Time per epoch and GPU utilization")[0]
    gpu = [r for r in epochs.rows if "cifar10" in r[2].text]
    assert gpu and all(r[4].text == "46.0 ± 0 (n=4)" for r in gpu)  # mean of 45 and 47
    # Each cell's test accuracy after its last epoch, beside its epoch times (seed004's table)
    assert epochs.columns[-1] == "Test accuracy (last epoch)"
    final = {r[0].text: r[-1].text for r in gpu}
    (after,) = tables(report, "Test accuracy per epoch")
    last = {r[1].text: r[2].text for r in after.rows}
    assert final == last and all(v[0].isdigit() for v in final.values())


def test_power_is_energy_over_time_and_energy_per_sample_follows() -> None:
    run = record("torch", rate=50.0, batch=10, metrics={"trial_cpu_energy_j": 40.0})
    seconds = run.metrics["trial_time_s"]  # 2 epochs x 5 steps x 10 samples / 50 per s = 2 s
    report = build(runset([run]))
    row = tables(report, "Power and energy against batch size")[0].rows[0]
    assert seconds == pytest.approx(2.0)
    assert row[1].text == "10: 20.0"  # 40 J / 2 s
    assert row[2].text == "10: 0.400"  # 40 J / 100 samples


def test_sections_without_data_are_left_out() -> None:
    report = build(runset([record("torch"), record("tf")]))
    titles = {s.title for s in report.sections}
    assert "Relative training time" in titles
    for absent in (
        "Power and energy against batch size",
        "Out-of-memory frontier",
        "Distributed training",
    ):
        assert absent not in titles
    assert build(runset([])).sections[0].title == "Overview"


def test_html_and_markdown_hold_the_same_tables(full: Report, tmp_path: Path) -> None:
    page = write(full, tmp_path)
    html_text, md_text = page.read_text(), (tmp_path / "report.md").read_text()
    separators = [line for line in md_text.splitlines() if line.startswith("|---")]
    assert html_text.count("<table>") == len(separators) > 5
    figures = list((tmp_path / "figures").glob("*.png"))
    assert (
        len(figures)
        == html_text.count('src="data:image/png;base64,')
        == md_text.count("](figures/")
    )
    assert "<script" not in html_text and "http" not in html_text.split("<body>")[1]
    hostile = RunSet([record("to|rch")], "sqlite:///x.db", "<b>x</b>", "", "")
    escaped = render.to_html(build(hostile))
    assert "&lt;b&gt;x&lt;/b&gt;" in escaped and "<b>x" not in escaped
    assert "| to\\|rch |" in render.to_markdown(build(hostile))  # a cell, not two


def test_one_run_a_side_is_not_tested() -> None:
    verdict = stats.compare(sample("torch", [10.0]), sample("tf", [30.0]))
    assert (verdict.kind, verdict.text) == (
        stats.NOT_TESTED,
        "not tested (1 run a side; use repeats >= 4)",
    )


def test_a_side_whose_parity_check_failed_is_not_comparable() -> None:
    failed = [{"parity": "failed"}] * 4
    verdict = stats.compare(
        stats.Sample("mxnet", draws(10.0, 4, 1), environments=failed),
        stats.Sample("torch", draws(20.0, 4, 2), environments=[{"parity": "passed"}] * 4),
    )
    assert verdict.kind == stats.NOT_COMPARABLE
    assert "the training parity check of mxnet failed" in verdict.text


# --- repeats=auto: the sequential verdict ---


def test_an_auto_sweeps_verdict_is_the_sequential_one_at_its_spent_level() -> None:
    """Three runs a side from a repeats=auto sweep: the fixed-level rule could not test
    them (Mann-Whitney's floor); the sweep's own rule settles a clear difference at look 2
    of 9 and says at which level, and identical-looking sides as equivalent."""
    fast, slow = [10.0, 10.1, 10.05], [20.0, 20.2, 20.1]
    fixed = stats.compare(sample("torch", fast), sample("tf", slow))
    assert fixed.kind == stats.NOT_TESTED
    a, b = sample("torch", fast), sample("tf", slow)
    a.looks = b.looks = 9
    verdict = stats.compare(a, b)
    assert verdict.kind == stats.FASTER and verdict.faster == "torch"
    assert "sequential look 2 of 9 at level" in verdict.text and verdict.ci_low > 1.9
    same_a, same_b = sample("torch", [10.0, 10.01, 10.02]), sample("tf", [10.01, 10.0, 10.02])
    same_a.looks = same_b.looks = 9
    assert stats.compare(same_a, same_b).kind == stats.EQUIVALENT
    # sides from different plans (or one from fixed repeats) get the fixed-level rule
    b.looks = 4
    assert "sequential" not in stats.compare(a, b).text


def test_the_report_reads_an_auto_sweeps_plan_from_its_runs_params() -> None:
    from bench.report.sections.common import sequential_plan
    from bench.report.trials import to_trial

    def trials(**params: str) -> list:  # type: ignore[type-arg]
        return [to_trial(record("torch", repeat=i, params=params)) for i in range(3)]

    auto = {"repeats": "auto", "max_repeats": "6", "equivalence_margin": "0.05"}
    assert sequential_plan(trials(**auto)) == (5, 0.05)
    assert sequential_plan(trials(repeats="4")) == (0, stats.DEFAULT_MARGIN)
    mixed = trials(**auto) + trials(**{**auto, "max_repeats": "8"})
    assert sequential_plan(mixed) == (0, stats.DEFAULT_MARGIN)
    assert sequential_plan(trials(**{**auto, "max_repeats": "many"}))[0] == 0
