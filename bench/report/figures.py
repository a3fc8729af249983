"""The report's figures, drawn with matplotlib's object API (no pyplot, no global state).

Margins are laid out by hand from the labels' widths as Agg measures them (matplotlib's
automatic layouts draw every figure twice, and a report of hundreds of runs has many ticks
to lay out); a label too long for its room is shortened in the middle, a title wrapped, and
ratio ticks that would touch thinned.  :func:`legibility_problems` is the check the tests
hold every figure to (tests/unit/test_figures_legible.py).
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
_LEGEND_ROW_IN = 0.2


def text_width_in(text: str, size: float) -> float:
    """The width of ``text`` at ``size`` points in inches, as Agg draws it (no figure drawn)."""
    from matplotlib.font_manager import FontProperties

    width, _, _ = _renderer().get_text_width_height_descent(
        text, FontProperties(size=size), ismath=False
    )
    return float(width) / DPI


_RENDERER: list[Any] = []


def _renderer() -> Any:
    if not _RENDERER:
        from matplotlib.backends.backend_agg import RendererAgg

        _RENDERER.append(RendererAgg(10, 10, DPI))
    return _RENDERER[0]


def fitted(text: str, size: float, width_in: float) -> str:
    """``text`` shortened in the middle (``…``) until it is at most ``width_in`` wide."""
    if text_width_in(text, size) <= width_in:
        return text
    keep = len(text)
    while keep > 8:
        keep -= max(1, keep // 20)
        short = text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]
        if text_width_in(short, size) <= width_in:
            return short
    return text[:8] + "…"


def wrapped(text: str, size: float, width_in: float) -> str:
    """``text`` broken into lines (at spaces) of at most ``width_in``."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_width_in(f"{lines[-1]} {word}", size) <= width_in:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return "\n".join(fitted(line, size, width_in) for line in lines)


def _drawn_tick_labels(axis: Any) -> list[Any]:
    """The tick labels an axis draws: those of its ticks inside its view."""
    low, high = sorted(axis.get_view_interval())
    span = (high - low) * 1e-9
    return [
        label
        for tick in axis.get_major_ticks() + axis.get_minor_ticks()
        if low - span <= tick.get_loc() <= high + span
        for label in (tick.label1, tick.label2)
        if label.get_visible() and label.get_text()
    ]


def _texts(fig: Any) -> list[Any]:
    """Every text a figure draws: its own, its legends', and each visible axes' title,
    axis labels and drawn tick labels."""
    texts = list(fig.texts)
    for legend in fig.legends:
        texts += list(legend.get_texts())
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label]
        texts += _drawn_tick_labels(ax.xaxis) + _drawn_tick_labels(ax.yaxis)
        if ax.get_legend() is not None:
            texts += list(ax.get_legend().get_texts())
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def legibility_problems(fig: Any) -> list[str]:
    """What a reader could not read in ``fig``, by matplotlib's own text extents as Agg
    draws them: text cut by the figure's edge, tick labels of one axis drawn over each
    other, and an axes' title and axis labels drawn over each other or its tick labels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(DPI)
    renderer = canvas.get_renderer()
    fig.draw(renderer)
    page = fig.bbox
    problems = []
    for text in _texts(fig):
        box = text.get_window_extent(renderer)
        if (
            box.x0 < page.x0 - 1
            or box.y0 < page.y0 - 1
            or box.x1 > page.x1 + 1
            or box.y1 > page.y1 + 1
        ):
            problems.append(f"cut by the figure's edge: {text.get_text()!r}")
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        ticks = []
        for axis in (ax.xaxis, ax.yaxis):
            boxes = [
                (t.get_text(), t.get_window_extent(renderer)) for t in _drawn_tick_labels(axis)
            ]
            ticks += boxes
            for i, (a, box_a) in enumerate(boxes):
                for b, box_b in boxes[i + 1 :]:
                    if box_a.overlaps(box_b):
                        problems.append(f"tick labels drawn over each other: {a!r} and {b!r}")
        own = [t for t in (ax.title, ax.xaxis.label, ax.yaxis.label) if t.get_text()]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in own]
        for i, (a, box_a) in enumerate(boxes):
            for b, box_b in boxes[i + 1 :] + ticks:
                if box_a.overlaps(box_b):
                    problems.append(f"drawn over each other: {a!r} and {b!r}")
    return problems


def literal(text: str) -> str:
    """``text`` as matplotlib draws it literally: every ``$`` escaped, so a name from the
    store (``$x$^{2}``, ``$\\frac$``) is never read as mathtext, which would draw it as a
    formula or fail the whole figure.  Every label, title and legend entry goes through it,
    after :func:`fitted` measured the text as drawn."""
    return text.replace("$", r"\$")


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
    return _png(panels_figure(items, columns, panel_height))


def panels_figure(items: Sequence[Panel], columns: int = 2, panel_height: float = 2.9) -> Any:
    """:func:`panels`' figure."""
    from matplotlib.ticker import (
        FuncFormatter,
        LogLocator,
        MaxNLocator,
        NullFormatter,
        NullLocator,
    )

    columns = max(1, min(columns, len(items)))
    rows = math.ceil(len(items) / columns)
    panel_in = WIDTH_IN * 0.89 / columns - 0.6  # a panel's width, less its share of the gaps
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
        ax.set_title(literal(fitted(item.title, 9, panel_in + 0.4)), fontsize=9)
        ax.set_xlabel(literal(fitted(item.xlabel, 9, panel_in)), fontsize=9)
        ax.set_ylabel(literal(fitted(item.ylabel, 9, panel_height - 0.9)), fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
    if handles:
        fig.legend(
            list(handles.values()),
            [literal(fitted(label, 7, WIDTH_IN / 2 - 0.6)) for label in handles],
            loc="lower center",
            ncols=2,
            fontsize=7,
            frameon=False,
            bbox_to_anchor=(0.5, 0.01),
        )
    return fig


@dataclass
class Bar:
    label: str
    value: float
    low: float
    high: float
    colour: str
    hatch: str = ""


_LABELS_MAX_IN = 0.55 * WIDTH_IN  # the most of the width a bar's label may take


def _bar_figure(
    labels: Sequence[str], legend_entries: int, title: str
) -> tuple[Any, Any, list[str], str]:
    """A figure for horizontal bars with room for the labels on the left (measured; a label
    too long for the room shortened in the middle), the title wrapped to the width, and a
    legend; with the labels and the title as drawn."""
    shown = [fitted(label, 8, _LABELS_MAX_IN) for label in labels]
    left_in = 0.2 + max((text_width_in(label, 8) for label in shown), default=0.0)
    title = wrapped(title, 9, WIDTH_IN - left_in - 0.3)
    title_in = 0.2 + 0.17 * (title.count("\n") + 1)
    legend_in = _LEGEND_ROW_IN * _legend_rows(legend_entries, 4)
    height = 1.0 + title_in + 0.3 * len(labels) + legend_in
    fig = _figure(height)
    bottom_in = 0.55 + legend_in + 0.1
    fig.subplots_adjust(
        left=left_in / WIDTH_IN,
        right=0.97,
        top=1 - title_in / height,
        bottom=bottom_in / height,
    )
    return fig, fig.subplots(), shown, title


def _spaced_ticks(ticks: Sequence[float], low: float, high: float, axis_in: float) -> list[float]:
    """The ratio ticks whose labels fit on a log axis from ``low`` to ``high`` of
    ``axis_in`` inches without touching: 1 first, then outwards, each kept where its label
    clears the ones kept."""
    span = math.log(high) - math.log(low)

    def at(t: float) -> float:
        return (math.log(t) - math.log(low)) / span * axis_in

    kept: list[float] = []
    for t in sorted(ticks, key=lambda t: (abs(math.log(t)), t)):
        half = text_width_in(f"{t:g}", 8) / 2 + 0.06
        if all(abs(at(t) - at(k)) >= half + text_width_in(f"{k:g}", 8) / 2 for k in kept):
            kept.append(t)
    return sorted(kept)


# A legend entry: its colour, or its colour and hatch.
LegendEntry = str | tuple[str, str]


def ratio_bars(
    bars: Sequence[Bar], title: str, xlabel: str, legend: Mapping[str, LegendEntry]
) -> bytes:
    """Horizontal bars of ratios on a log axis from 1, with confidence-interval whiskers."""
    return _png(ratio_figure(bars, title, xlabel, legend))


def ratio_figure(
    bars: Sequence[Bar], title: str, xlabel: str, legend: Mapping[str, LegendEntry]
) -> Any:
    """:func:`ratio_bars`' figure; each legend entry its colour (and hatch)."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import NullLocator

    fig, ax, labels, title = _bar_figure([b.label for b in bars], len(legend), title)
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
    position = ax.get_position()
    ticks = _spaced_ticks(ticks, 1 / span, span, position.width * WIDTH_IN)
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.set_yticks(ys, [literal(label) for label in labels], fontsize=8)
    ax.set_xlabel(literal(xlabel), fontsize=9)
    ax.set_title(literal(title), fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    handles = []
    for name, entry in legend.items():
        c, hatch = (entry, "") if isinstance(entry, str) else entry
        handles.append(
            Patch(facecolor="white" if hatch else c, edgecolor=c, label=literal(name), hatch=hatch)
        )
    fig.legend(
        handles=handles,
        fontsize=8,
        loc="lower center",
        ncols=4,
        frameon=False,
        bbox_to_anchor=(0.5, 0.01),
    )
    return fig


def stacked_bars(
    labels: Sequence[str], segments: Mapping[str, Sequence[float]], title: str, xlabel: str
) -> bytes:
    """Horizontal stacked bars: one bar per label, one colour per segment."""
    return _png(stacked_figure(labels, segments, title, xlabel))


def stacked_figure(
    labels: Sequence[str], segments: Mapping[str, Sequence[float]], title: str, xlabel: str
) -> Any:
    """:func:`stacked_bars`' figure."""
    fig, ax, shown, title = _bar_figure(labels, len(segments), title)
    ys = list(range(len(labels)))[::-1]
    left = [0.0] * len(labels)
    for i, (name, values) in enumerate(segments.items()):
        clean = [0.0 if math.isnan(v) else v for v in values]
        ax.barh(ys, clean, left=left, label=literal(name), color=_OTHER_COLOURS[i % 6], height=0.6)
        left = [a + b for a, b in zip(left, clean, strict=True)]
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_yticks(ys, [literal(label) for label in shown], fontsize=8)
    ax.set_xlabel(literal(xlabel), fontsize=9)
    ax.set_title(literal(title), fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(
        fontsize=8,
        loc="lower center",
        ncols=min(len(segments), 5),
        frameon=False,
        bbox_to_anchor=(0.5, 0.01),
    )
    return fig
