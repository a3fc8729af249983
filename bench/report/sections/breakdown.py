"""Sections on where the time goes: the phases of a step and the operator categories."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import bench.report.figures as figures
from bench.analysis import stats
from bench.report.document import Cell, Figure, Section, Table, num
from bench.report.sections.common import (
    MAX_OPERATOR_ROWS,
    PHASES,
    Context,
    metric_of,
    operator_of,
    ratio_text,
    sample,
    sorted_configs,
    verdict_cell,
)
from bench.report.trials import (
    Labeller,
    Trial,
    finite,
    fmt,
    fmt_mean_sd,
    framework_pairs,
    group,
)

# --- time breakdown and operator categories (CPU-cluster study) ---


def breakdown(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if any(not math.isnan(t.metric(m)) for _, m in PHASES)]
    phases = [(name, m) for name, m in PHASES if any(not math.isnan(t.metric(m)) for t in trials)]
    operators = [t for t in ctx.ok if t.operators_ms]
    lab = Labeller([*trials, *operators])
    if not trials and not operators:
        return None
    section = Section("Time breakdown", "breakdown")
    if trials:
        section.blocks.append(
            "Mean time per step in each phase (ms), measured in separate passes after the "
            "timed epochs, per framework and configuration."
        )
        by_bar = group(trials, lambda t: (t.config, t.framework))
        keys = sorted(by_bar, key=lambda k: (lab.label(k[0]), k[1]))
        labels, rows = [], []
        segments: dict[str, list[float]] = {name: [] for name, _ in phases}
        for key in keys:
            config, framework = key
            members = by_bar[key]
            labels.append(f"{framework} · {lab.label(config)}")
            means = []
            for name, metric in phases:
                values = finite(t.metric(metric) for t in members)
                means.append(statistics.fmean(values) if values else math.nan)
                segments[name].append(means[-1])
            total = sum(finite(means))
            rows.append(
                [Cell(lab.label(config)), Cell(framework)]
                + [num(fmt(m)) for m in means]
                + [num(fmt(total))]
            )
        columns = ["Configuration", "Framework"] + [n for n, _ in phases] + ["total"]
        section.blocks.append(Table(columns, rows, "Time per step by phase (ms)"))
        png = figures.stacked_bars(labels, segments, "Time per step by phase", "ms per step")
        section.blocks.append(Figure("breakdown", png, "Time per step by phase (stacked)"))
        section.blocks.extend(_phase_comparisons(ctx, lab, trials, phases))
    if operators:
        section.blocks.extend(_operator_table(ctx, lab, operators))
    return section


def _phase_comparisons(
    ctx: Context, lab: Labeller, trials: Sequence[Trial], phases: Sequence[tuple[str, str]]
) -> list[Table]:
    by_config = group(trials, lambda t: t.config)
    out = []
    for a, b in framework_pairs(t.framework for t in trials):
        rows = []
        for config in sorted_configs(lab, list(by_config)):
            side_a = [t for t in by_config[config] if t.framework == a]
            side_b = [t for t in by_config[config] if t.framework == b]
            for name, metric in phases:
                va = [t for t in side_a if not math.isnan(t.metric(metric))]
                vb = [t for t in side_b if not math.isnan(t.metric(metric))]
                if not va or not vb:
                    continue
                verdict = stats.compare(
                    sample(a, va, metric_of(metric)),
                    sample(b, vb, metric_of(metric)),
                )
                label = lab.label(config)
                ctx.verdicts.append((f"{name} phase, {b} vs {a}", label, verdict))
                rows.append(
                    [Cell(label), Cell(name), num(ratio_text(verdict)), verdict_cell(verdict)]
                )
        if rows:
            columns = ["Configuration", "Phase", f"{b} / {a} time [95% CI]", "Verdict"]
            out.append(Table(columns, rows, f"Phases compared, {b} vs {a}"))
    return out


def _operator_table(ctx: Context, lab: Labeller, trials: Sequence[Trial]) -> list[str | Table]:
    blocks: list[str | Table] = [
        "Profiled self time per step by operator category (ms, the op_<category>_ms metrics); "
        f"the {MAX_OPERATOR_ROWS} costliest categories per configuration."
    ]
    by_config = group(trials, lambda t: t.config)
    for a, b in framework_pairs(t.framework for t in trials):
        rows = []
        for config in sorted_configs(lab, list(by_config)):
            side_a = [t for t in by_config[config] if t.framework == a]
            side_b = [t for t in by_config[config] if t.framework == b]
            if not side_a or not side_b:
                continue
            totals: dict[str, float] = {}
            for t in [*side_a, *side_b]:
                for category, ms in t.operators_ms.items():
                    totals[category] = totals.get(category, 0.0) + ms
            ranked = sorted(totals, key=lambda c: -totals[c])[:MAX_OPERATOR_ROWS]
            label = lab.label(config)
            for category in ranked:
                va = [t for t in side_a if category in t.operators_ms]
                vb = [t for t in side_b if category in t.operators_ms]
                cells = [
                    Cell(label),
                    Cell(category),
                    num(fmt_mean_sd([t.operators_ms[category] for t in va])),
                    num(fmt_mean_sd([t.operators_ms[category] for t in vb])),
                ]
                if va and vb:
                    verdict = stats.compare(
                        sample(a, va, operator_of(category)),
                        sample(b, vb, operator_of(category)),
                    )
                    ctx.verdicts.append((f"operators: {category}, {b} vs {a}", label, verdict))
                    cells += [num(ratio_text(verdict)), verdict_cell(verdict)]
                else:
                    only = a if va else b
                    cells += [num("-"), Cell(f"only {only} has this category")]
                rows.append(cells)
        if rows:
            columns = ["Configuration", "Category", f"{a} ms", f"{b} ms", f"{b} / {a}", "Verdict"]
            blocks.append(Table(columns, rows, f"Operator categories, {b} vs {a}"))
    return blocks
