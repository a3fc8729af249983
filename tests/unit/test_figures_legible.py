"""Every figure the report draws stays legible with long labels (model=hf, model=py,
tuning rows, 30+ configurations): no text cut by the figure's edge, no tick labels drawn
over each other, by matplotlib's own text extents (figures.legibility_problems); each
verdict class drawn apart in the legend (issue 50)."""

from __future__ import annotations

import math

import pytest

from bench.analysis import stats
from bench.report import figures
from bench.report.sections.common import VERDICT_STYLES, legend

LONG = [
    "hf:llama · batch 4 · seq 128 · cpu · model.intermediate=1024 · model.layers=4 · "
    "tuning.name=best",
    "py:examples.my_model:build · batch 32 · 224 px · cpu · model.builder=examples.my_model:"
    "build · tuning.name=best",
    "resnet50 · batch 32 · 224 px · cpu · tuning.name=default · channels_last=true",
]


def labels(n: int) -> list[str]:
    return [f"{LONG[i % len(LONG)]} · threads={i}" for i in range(n)]


def test_a_figure_with_text_out_of_the_page_is_caught() -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.set_yticks([0, 1], [LONG[0], LONG[1]])
    ax.set_xticks([0.33, 0.331, 0.332], ["0.33", "0.331", "0.332"])
    problems = figures.legibility_problems(fig)
    assert any("edge" in p for p in problems) and any("over each other" in p for p in problems)


@pytest.mark.parametrize("count", [3, 34])
@pytest.mark.parametrize("spread", [(0.053, 0.038, 0.080), (11.49, 7.10, 17.45), (1.01, 0.9, 1.1)])
def test_ratio_bars_are_legible(count: int, spread: tuple[float, float, float]) -> None:
    value, low, high = spread
    kinds = list(VERDICT_STYLES)
    bars = []
    for i, label in enumerate(labels(count)):
        k = 1 + i / 50
        bars.append(figures.Bar(label, value * k, low * k, high * k, *VERDICT_STYLES[kinds[i % 4]]))
    title = (
        "Relative training time, tf vs torch on cpu (log scale; bars from 1 to the ratio, "
        "whiskers the 95% interval; tuning.name=best rows at each framework's best)"
    )
    fig = figures.ratio_figure(bars, title, "tf time / torch time", legend("tf", "torch"))
    assert figures.legibility_problems(fig) == []


def test_stacked_bars_are_legible() -> None:
    names = labels(31)
    segments = {p: [1.0 + i for i in range(31)] for p in ("data", "forward", "backward", "opt")}
    fig = figures.stacked_figure(names, segments, "Time per step by phase " * 6, "ms per step")
    assert figures.legibility_problems(fig) == []


def test_panels_are_legible() -> None:
    series = [
        figures.Series(label, [1, 2, 4, 8, 16, 32, 64, 128], [10.0 * j for j in range(1, 9)])
        for label in labels(12)
    ]
    items = [
        figures.Panel(f"{LONG[i % 3]}: samples/s against batch size", "batch size",
                      "samples per second (log)", series, logx=True, logy=True)
        for i in range(3)
    ]  # fmt: skip
    assert figures.legibility_problems(figures.panels_figure(items)) == []


def test_every_verdict_class_is_drawn_apart() -> None:
    entries = legend("tf", "torch")
    assert {stats.SAME, stats.EQUIVALENT, stats.NOT_TESTED, stats.NOT_COMPARABLE} <= set(entries)
    drawn = [e if isinstance(e, tuple) else (e, "") for e in entries.values()]
    assert len(set(drawn)) == len(drawn)


def test_ticks_are_thinned_not_dropped_at_one() -> None:
    ticks = figures._spaced_ticks([0.33, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25], 0.3, 1.3, 1.0)
    assert 1 in ticks and len(ticks) < 8
    assert all(not math.isnan(t) for t in ticks)
