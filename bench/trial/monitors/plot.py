"""A telemetry plot: stacked panels of sampled series over time, timed epochs shaded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.trial.monitors.base import Window


@dataclass
class Line:
    label: str
    points: list[tuple[float, float]]  # (seconds since the trial started, value)


@dataclass
class Panel:
    ylabel: str
    lines: list[Line]


def plot(
    path: Path, title: str, panels: Sequence[Panel], windows: Sequence[Window], origin: float
) -> None:
    """Write a PNG; x is seconds since ``origin`` (perf_counter), epochs are shaded."""
    # The object-oriented API with the Agg canvas: no pyplot state, no GUI backend.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 1.2 + 2.2 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels, strict=True):
        for line in panel.lines:
            xs, ys = zip(*line.points, strict=True)
            ax.plot(xs, ys, label=line.label, linewidth=1)
        for w in windows:
            ax.axvspan(w.start - origin, w.end - origin, color="tab:green", alpha=0.12, lw=0)
        ax.set_ylabel(panel.ylabel)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
    for w in windows:
        axes[0].text(
            (w.start + w.end) / 2 - origin,
            1.0,
            f"epoch {w.epoch}",
            transform=axes[0].get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize="x-small",
        )
    axes[-1].set_xlabel("time since the trial started (s); timed epochs shaded")
    fig.suptitle(title)
    fig.savefig(path, dpi=90)
