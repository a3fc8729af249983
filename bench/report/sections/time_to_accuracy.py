"""Time to accuracy (goal=accuracy, docs/accuracy.md): per configuration, each framework's
held-out accuracy against wall time (one faint line per run, the median bold), its time and
epochs to the target with their intervals, a "did not reach" count, and each framework
pair's verdict on time to target as the product it is: per-epoch time x epochs, and which
of the two decides it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import bench.report.figures as figures
from bench.analysis import stats
from bench.core import metrics
from bench.core.config import GoalConfig
from bench.report.document import Cell, Figure, Section, Table, num
from bench.report.sections.common import Context
from bench.report.trials import Trial, group

# Keys that vary between the runs one line of the section pools: the seed (its spread is
# what the interval measures) and the framework (each its own row).
POOLED = ("seed",)
# A run's params leave out keys at their default: goal.target at 0.95 is not among them.
_DEFAULT_TARGET = GoalConfig().target


def _key(t: Trial) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in t.config if k not in POOLED)


def _interval(values: Sequence[float]) -> str:
    """The median and the runs' range, or '-'."""
    if not values:
        return "-"
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def _median_curve(members: list[Trial]) -> tuple[list[float], list[float]]:
    """The median wall time and accuracy at each evaluation every run made."""
    curves = [_curve(t) for t in members]
    shared = min(len(x) for x, _ in curves)
    xs = [statistics.median(c[0][i] for c in curves) for i in range(shared)]
    ys = [statistics.median(c[1][i] for c in curves) for i in range(shared)]
    return xs, ys


def _curve(t: Trial) -> tuple[list[float], list[float]]:
    acc = dict(t.record.history.get(metrics.TEST_ACCURACY, []))
    at = dict(t.record.history.get(metrics.EVAL_ELAPSED_S, []))
    steps = sorted(set(acc) & set(at))
    return [at[s] for s in steps], [acc[s] for s in steps]


def _figure(by_framework: dict[str, list[Trial]], target: float, title: str) -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6))  # no pyplot: nothing global, nothing left open
    ax = fig.subplots()
    for i, (framework, members) in enumerate(sorted(by_framework.items())):
        shade = figures.colour(framework, i)
        for t in members:
            x, y = _curve(t)
            ax.plot(x, y, color=shade, alpha=0.25, linewidth=0.8)
        x, y = _median_curve(members)
        ax.plot(
            x,
            y,
            color=shade,
            linewidth=2.4,
            label=figures.literal(f"{framework} (median of {len(members)})"),
        )
    ax.axhline(target, color="0.4", linestyle=":", linewidth=1, label=f"target {target:g}")
    ax.set_xlabel("wall time from the first timed step (s)")
    ax.set_ylabel("held-out accuracy")
    ax.set_title(figures.literal(title), fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return figures._png(fig)


def _verdict(a: list[Trial], b: list[Trial]) -> list[str]:
    """Time to target of B against A (mean ratio, bootstrap interval) and its two factors."""
    tt = [[t.metric(metrics.TIME_TO_TARGET_S) for t in side] for side in (a, b)]
    ep = [[t.metric(metrics.EPOCHS_TO_TARGET) for t in side] for side in (a, b)]
    per = [
        [t.metric(metrics.TRAIN_TIME_TO_TARGET_S) / t.metric(metrics.EPOCHS_TO_TARGET) for t in s]
        for s in (a, b)
    ]
    ratio, low, high = stats.bootstrap_ratio(tt[0], tt[1])
    r_epochs, lo_e, hi_e = stats.bootstrap_ratio(ep[0], ep[1])
    r_per, lo_p, hi_p = stats.bootstrap_ratio(per[0], per[1])
    if low > 1:
        verdict = "slower to the target"
    elif high < 1:
        verdict = "faster to the target"
    else:
        verdict = "no significant difference"
    # which factor decides: the one whose log-ratio is the larger share of the whole
    decides = (
        "epochs to target" if abs(math.log(r_epochs)) > abs(math.log(r_per)) else ("time per epoch")
    )
    return [
        f"{ratio:.2f}x ({low:.2f}-{high:.2f})",
        verdict,
        f"{r_per:.2f}x ({lo_p:.2f}-{hi_p:.2f})",
        f"{r_epochs:.2f}x ({lo_e:.2f}-{hi_e:.2f})",
        decides,
    ]


def time_to_accuracy(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if not math.isnan(t.metric(metrics.TARGET_REACHED))]
    if not trials:
        return None
    section = Section("Time to accuracy", "time-to-accuracy")
    section.blocks.append(
        "Runs of goal=accuracy (docs/accuracy.md): each trained until its held-out accuracy "
        "reached the target.  Time to target runs from the first timed step to the end of the "
        "evaluation that reached it (evaluations included, initialisation and compilation "
        "not); figures are the median and the range over the runs (seeds).  The verdict's "
        "ratio is B over A with its 95% bootstrap interval, split into time per epoch x "
        "epochs to target; 'decides' names the factor that moves it more."
    )
    rows: list[list[Cell]] = []
    pairs: list[list[Cell]] = []
    for key, members in sorted(group(trials, _key).items()):
        label = ", ".join(f"{k}={v}" for k, v in key if k in ("model.name", "data.name")) or "-"
        by_framework = group(members, lambda t: t.framework)
        target = float(members[0].param("goal.target", str(_DEFAULT_TARGET)))
        for framework, runs in sorted(by_framework.items()):
            reached = [t for t in runs if t.metric(metrics.TARGET_REACHED) == 1.0]
            missed = len(runs) - len(reached)
            best = [t.metric(metrics.BEST_TEST_ACCURACY) for t in runs]
            rows.append(
                [
                    Cell(label),
                    Cell(framework),
                    num(f"{len(reached)}/{len(runs)}"),
                    num(_interval([t.metric(metrics.TIME_TO_TARGET_S) for t in reached])),
                    num(_interval([t.metric(metrics.EPOCHS_TO_TARGET) for t in reached])),
                    num(
                        _interval(
                            [
                                t.metric(metrics.TRAIN_TIME_TO_TARGET_S)
                                / t.metric(metrics.EPOCHS_TO_TARGET)
                                for t in reached
                            ]
                        )
                    ),
                    Cell(f"did not reach ({missed}; best {max(best):.3f})" if missed else ""),
                ]
            )
        names = sorted(by_framework)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ra = [t for t in by_framework[a] if t.metric(metrics.TARGET_REACHED) == 1.0]
                rb = [t for t in by_framework[b] if t.metric(metrics.TARGET_REACHED) == 1.0]
                if len(ra) < 2 or len(rb) < 2:
                    cells = ["-", "not comparable: fewer than 2 runs reached it", "-", "-", "-"]
                else:
                    cells = _verdict(ra, rb)
                pairs.append([Cell(label), Cell(f"{b} vs {a}"), *map(Cell, cells)])
        title = f"{label} · target {target:g}"
        section.blocks.append(
            Figure(
                f"time-to-accuracy-{len(section.blocks)}",
                _figure(by_framework, target, title),
                f"Held-out accuracy against wall time, {title}: one faint line per run, the "
                "median bold",
            )
        )
    columns = ["Configuration", "Framework", "Reached", "Time to target (s)",
               "Epochs to target", "Time per epoch (s)", "Did not reach"]  # fmt: skip
    section.blocks.append(Table(columns, rows, "Time and epochs to the target"))
    if pairs:
        columns = ["Configuration", "Pair", "Time to target", "Verdict", "Time per epoch",
                   "Epochs to target", "Decides"]  # fmt: skip
        section.blocks.append(Table(columns, pairs, "Time to target, B over A"))
    return section
