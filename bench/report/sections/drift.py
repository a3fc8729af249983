"""Runs measured on a machine that was not the others': the rounds the sweep's drift check
flagged, and runs that shared their CPUs with other processes (tag ``bench.contention``);
for each, whether the report's verdicts hold without those runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from bench.analysis import drift, stats
from bench.report.document import Cell, Section, Table
from bench.report.sections import common
from bench.report.sections.common import Context, verdict_cell
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
    section.blocks += holding(ctx, kept, verdicts_of, "the flagged rounds", "drifted rounds")
    return section


HOLDS, CHANGES, SILENT = "holds", "changes", "no claim either way"


def _claim(verdict: stats.Verdict | None) -> tuple[str, str] | None:
    """What a verdict claims: a faster side or an equivalence; None for one that claims
    nothing (not tested, not comparable, no significant difference) or no verdict at all."""
    if verdict is None or verdict.kind not in (stats.FASTER, stats.EQUIVALENT):
        return None
    return verdict.kind, verdict.faster


def holding(
    ctx: Context, kept: list[Trial], verdicts_of: Callable[[Context], Verdicts], left: str,
    caption: str,
) -> list[str | Table]:  # fmt: skip
    """How many of the report's verdicts hold on ``kept`` alone (``left``: the runs left
    out, in words), and a table of each verdict with and without them."""
    without = {(what, label): v for what, label, v in verdicts_of(Context(kept))}
    rows: list[list[Cell]] = []
    tally = {HOLDS: 0, CHANGES: 0, SILENT: 0}
    for what, label, verdict in ctx.verdicts:
        other = without.get((what, label))
        claimed = _claim(verdict)
        state = CHANGES if claimed != _claim(other) else HOLDS if claimed else SILENT
        tally[state] += 1
        rows.append(
            [
                Cell(what),
                Cell(label),
                verdict_cell(verdict),
                verdict_cell(other) if other else Cell("not compared (no runs left a side)"),
                Cell(state),
            ]
        )
    held, changed, silent = tally[HOLDS], tally[CHANGES], tally[SILENT]
    if held + changed:
        said = f"{held} of {held + changed} verdicts hold without {left}" + (
            f"; {changed} change." if changed else "."
        )
    else:
        said = f"No verdict claims a difference or an equivalence, with or without {left}."
    if silent and held + changed:
        said += (
            f"  {silent} claim nothing either way (not tested, not comparable or no "
            "significant difference, with and without them)."
        )
    columns = ["Compared", "Configuration", "Verdict", f"Without {left}", "Holds"]
    return [said, Table(columns, rows, f"Verdicts with and without the {caption}")]


def _stopped_by_load(ok: list[Trial]) -> str:
    """A repeats=auto sweep's rounds that ended because the machine stayed loaded
    (bench.analysis.drift.loaded_rounds, the sweep's own rule), in a sentence ('' : not)."""
    if not ok or common.sequential_plan(ok)[0] == 0:
        return ""
    by_round: dict[int, list[bool]] = {}
    for t in ok:
        by_round.setdefault(_round(t), []).append(common.gave_up(t))
    rounds = [by_round.get(r, []) for r in range(max(by_round) + 1)]
    if drift.loaded_rounds(rounds) < drift.LOADED_ROUNDS:
        return ""
    return (
        f"  repeats=auto stopped after {len(rounds)} rounds: every ok run of the last "
        f"{drift.LOADED_ROUNDS} was timed under load that contention=wait could not wait out "
        "(tag bench.contention_gate: bound hit), and more rounds would have measured the load, "
        "not the frameworks."
    )


def shared_section(ctx: Context, verdicts_of: Callable[[Context], Verdicts]) -> Section | None:
    """The runs whose host monitor saw other processes hold their CPUs (tag
    ``bench.contention``), and the verdicts without them; None when there are none."""
    shared = [t for t in ctx.ok if common.shared(t)]
    if not shared:
        return None
    section = Section("Shared machine", "shared")
    names = ", ".join(t.record.name or t.record.run_id for t in shared[:10])
    section.blocks.append(
        f"{len(shared)} of {len(ctx.ok)} ok runs were timed while other processes held a share "
        "of their CPUs that was theirs to use (tag bench.contention, with how much; metric "
        f"trial_other_cpu_pct): {names}{'...' if len(shared) > 10 else ''}.  Their rates are the "
        "shared machine's, lower and noisier than the framework's own.  Below, every verdict "
        "again without them; rerun them on a quiet machine to settle any that change."
        + _stopped_by_load(ctx.ok)
    )
    left_out = {id(t) for t in shared}
    kept = [t for t in ctx.trials if id(t) not in left_out]
    section.blocks += holding(ctx, kept, verdicts_of, "those runs", "shared machine's runs")
    return section
