"""The report's figures, drawn with matplotlib's object API (no pyplot, no global state).

Margins are laid out by hand from label lengths (matplotlib's automatic layouts draw every
figure twice, and a report of hundreds of runs has many ticks to lay out).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.core.frameworks import FRAMEWORKS

FRAMEWORK_COLOURS = {name: spec.colour for name, spec in FRAMEWORKS.items()}
_OTHER_COLOURS = ["#7d3c98", "#1e8449", "#b9770e", "#5d6d7e", "#a93226", "#148f77"]
SAME_COLOUR = "#9e9e9e"
DPI = 100
WIDTH_IN = 9.0
_RATIO_TICKS = (0.1, 0.2, 0.33, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 5, 10)
_CHAR_IN = 0.068  # width of a character of the 8-point tick labels, in inches
_LEGEND_ROW_IN = 0.2


def colour(name: str, index: int = 0) -> str:
    return FRAMEWORK_COLOURS.get(name, _OTHER_COLOURS[index % len(_OTHER_COLOURS)])


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _figure(height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH_IN, height))


def _legend_rows(count: int, columns: int) -> int:
    return math.ceil(count / columns) if count else 0


@dataclass
class Series:
    label: str  # "" keeps it out of the legend
    x: Sequence[float]
    y: Sequence[float]
    yerr: Sequence[float] | None = None
    # A shaded band (e.g. lowest to highest run) around the line.
    band: tuple[Sequence[float], Sequence[float]] | None = None
    colour: str = ""
    style: Any = "-"
    marker: str = "o"


STYLES: tuple[tuple[Any, str], ...] = (
    ("-", "o"),
    ("--", "s"),
    ("-.", "^"),
    ((0, (5, 1, 1, 1, 1, 1)), "D"),
)


def styled(series: Series, index: int) -> Series:
    """Line style and marker by ``index`` (e.g. the model), so colour can mean the framework."""
    series.style, series.marker = STYLES[index % len(STYLES)]
    return series


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    logx: bool = False
    logy: bool = False
    ylim: tuple[float, float] | None = None
    integer_x: bool = False  # epochs, workers


def panels(items: Sequence[Panel], columns: int = 2, panel_height: float = 2.9) -> bytes:
    """Line plots in a grid, one panel per item, with one legend for all below them."""
    from matplotlib.ticker import (
        FuncFormatter,
        LogLocator,
        MaxNLocator,
        NullFormatter,
        NullLocator,
    )

    columns = max(1, min(columns, len(items)))
    rows = math.ceil(len(items) / columns)
    handles: dict[str, Any] = {}
    labels = list(dict.fromkeys(s.label for p in items for s in p.series if s.label))
    legend_in = _LEGEND_ROW_IN * _legend_rows(len(labels), 2) + 0.15
    top_in, bottom_in = 0.35, 0.55 + legend_in
    height = rows * panel_height + top_in + bottom_in
    fig = _figure(height)
    fig.subplots_adjust(
        left=0.09,
        right=0.98,
        top=1 - top_in / height,
        bottom=bottom_in / height,
        wspace=0.28,
        hspace=0.55,
    )
    axes = fig.subplots(rows, columns, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= len(items):
            ax.set_visible(False)
            continue
        item = items[i]
        for j, s in enumerate(item.series):
            c = s.colour or colour("", j)
            if s.yerr is not None and any(not math.isnan(e) for e in s.yerr):
                line = ax.errorbar(
                    s.x, s.y, yerr=s.yerr, color=c, ls=s.style, marker=s.marker, ms=4, capsize=3
                )
            else:
                (line,) = ax.plot(s.x, s.y, color=c, ls=s.style, marker=s.marker, ms=4)
            if s.band is not None:
                ax.fill_between(s.x, s.band[0], s.band[1], color=c, alpha=0.15, lw=0)
            if s.label:
                handles.setdefault(s.label, line)
        if item.logx:
            ax.set_xscale("log", base=2)
            xs = sorted({x for s in item.series for x in s.x})
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.xaxis.set_minor_locator(NullLocator())
        if item.logy:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        if item.ylim is not None:
            ax.set_ylim(*item.ylim)
        if item.integer_x:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(item.title, fontsize=9)
        ax.set_xlabel(item.xlabel, fontsize=9)
        ax.set_ylabel(item.ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            ncols=2,
            fontsize=7,
            frameon=False,
            bbox_to_anchor=(0.5, 0.01),
        )
    return _png(fig)


@dataclass
class Bar:
    label: str
    value: float
    low: float
    high: float
    colour: str
    hatch: str = ""


def _bar_figure(labels: Sequence[str], legend_entries: int) -> tuple[Any, Any]:
    """A figure for horizontal bars with room for the labels on the left and a legend."""
    height = 1.35 + 0.3 * len(labels) + _LEGEND_ROW_IN * _legend_rows(legend_entries, 4)
    left_in = 0.25 + _CHAR_IN * max((len(label) for label in labels), default=0)
    fig = _figure(height)
    bottom_in = 0.55 + _LEGEND_ROW_IN * _legend_rows(legend_entries, 4) + 0.1
    fig.subplots_adjust(
        left=min(left_in / WIDTH_IN, 0.6),
        right=0.97,
        top=1 - 0.35 / height,
        bottom=bottom_in / height,
    )
    return fig, fig.subplots()


def ratio_bars(bars: Sequence[Bar], title: str, xlabel: str, legend: dict[str, str]) -> bytes:
    """Horizontal bars of ratios on a log axis from 1, with confidence-interval whiskers."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import NullLocator

    fig, ax = _bar_figure([b.label for b in bars], len(legend))
    ys = list(range(len(bars)))[::-1]
    for y, bar in zip(ys, bars, strict=True):
        ax.barh(
            y,
            bar.value - 1,
            left=1,
            color=bar.colour if not bar.hatch else "white",
            edgecolor=bar.colour,
            hatch=bar.hatch,
            height=0.6,
        )
        if not (math.isnan(bar.low) or math.isnan(bar.high)):
            ax.errorbar(
                bar.value,
                y,
                xerr=[[bar.value - bar.low], [bar.high - bar.value]],
                color="black",
                capsize=3,
                lw=1,
            )
    ax.axvline(1, color="black", lw=1)
    ax.set_xscale("log")
    values = [v for b in bars for v in (b.low, b.high, b.value) if not math.isnan(v) and v > 0]
    span = max(max(values, default=1.0), 1 / min(values, default=1.0), 1.1) * 1.15
    ax.set_xlim(1 / span, span)
    ticks = [t for t in _RATIO_TICKS if 1 / span <= t <= span]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.set_yticks(ys, [b.label for b in bars], fontsize=8)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [
        Patch(
            facecolor="white" if name == "not comparable" else c,
            edgecolor=c,
            label=name,
            hatch="///" if name == "not comparable" else "",
        )
        for name, c in legend.items()
    ]
    fig.legend(
        handles=handles,
        fontsize=8,
        loc="lower center",
        ncols=4,
        frameon=False,
        bbox_to_anchor=(0.5, 0.01),
    )
    return _png(fig)


def stacked_bars(
    labels: Sequence[str], segments: Mapping[str, Sequence[float]], title: str, xlabel: str
) -> bytes:
    """Horizontal stacked bars: one bar per label, one colour per segment."""
    fig, ax = _bar_figure(labels, len(segments))
    ys = list(range(len(labels)))[::-1]
    left = [0.0] * len(labels)
    for i, (name, values) in enumerate(segments.items()):
        clean = [0.0 if math.isnan(v) else v for v in values]
        ax.barh(ys, clean, left=left, label=name, color=_OTHER_COLOURS[i % 6], height=0.6)
        left = [a + b for a, b in zip(left, clean, strict=True)]
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_yticks(ys, list(labels), fontsize=8)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(
        fontsize=8,
        loc="lower center",
        ncols=min(len(segments), 5),
        frameon=False,
        bbox_to_anchor=(0.5, 0.01),
    )
    return _png(fig)
