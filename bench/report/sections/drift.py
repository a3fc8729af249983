"""The machine's drift over a sweep's rounds (repeats): which rounds the drift check flagged,
and whether the report's verdicts hold without those rounds' runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from bench.analysis import drift, stats
from bench.report.document import Cell, Section, Table
from bench.report.sections.common import Context
from bench.report.trials import Trial

Verdicts = list[tuple[str, str, stats.Verdict]]


def flagged_rounds(references: Sequence[float]) -> dict[int, float]:
    """The rounds the drift check flags, each with how far its reference moved from the
    sweep's median (a fraction: +0.07 took 7% longer)."""
    rounds = drift.flagged(list(references))
    if not rounds:
        return {}
    middle = statistics.median(references)
    return {r: references[r] / middle - 1 for r in rounds}


def _round(t: Trial) -> int:
    try:
        return int(t.param("repeat", "0"))
    except ValueError:
        return -1


def section(
    ctx: Context,
    references: Sequence[float],
    verdicts_of: Callable[[Context], Verdicts],
) -> Section | None:
    """The drift section, or None when no round was flagged.  ``verdicts_of`` builds the
    report's verdicts on a context (the same sections, without their output)."""
    moved = flagged_rounds(references)
    if not moved:
        return None
    section = Section("Machine drift", "drift")
    shown = ", ".join(f"round {r + 1} ({100 * d:+.1f}%)" for r, d in sorted(moved.items()))
    kept = [t for t in ctx.trials if _round(t) not in moved]
    section.blocks.append(
        f"The sweep timed a fixed reference step before each of its {len(references)} rounds "
        f"(metric reference_step_s on its run).  In {shown} it moved more than "
        f"{100 * drift.THRESHOLD:g}% from the sweep's median: those rounds' trials ran on a "
        f"machine that was not the one the others ran on.  Below, every verdict again without "
        f"those rounds' {len(ctx.trials) - len(kept)} runs."
    )
    without = {(what, label): v for what, label, v in verdicts_of(Context(kept))}
    rows: list[list[Cell]] = []
    changed = 0
    for what, label, verdict in ctx.verdicts:
        other = without.get((what, label))
        same = other is not None and (other.kind, other.faster) == (verdict.kind, verdict.faster)
        changed += not same
        rows.append(
            [
                Cell(what),
                Cell(label),
                Cell(verdict.text, verdict.kind.replace(" ", "-")),
                Cell(other.text if other else "not compared (no runs left a side)"),
                Cell("holds" if same else "changes"),
            ]
        )
    section.blocks.append(
        f"{len(rows) - changed} of {len(rows)} verdicts hold without the flagged rounds"
        + (f"; {changed} change." if changed else ".")
    )
    columns = ["Compared", "Configuration", "Verdict", "Without the flagged rounds", "Holds"]
    section.blocks.append(Table(columns, rows, "Verdicts with and without the drifted rounds"))
    return section
