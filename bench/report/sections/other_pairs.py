"""Other compared pairs: configurations that differ in one compared key other than the
framework (``threads 0 vs 2``, an A/A pair, a strategy, a precision), found by the rule the
rounds of ``repeats=auto`` use (:func:`bench.analysis.pairs.one_key`), each with its verdict
by the rules of the framework comparison (for a ``repeats=auto`` sweep, the sequential one at
the look where the rounds stopped the pair).  The pairs the framework, version and tuning
sections compare are theirs; a claim's sides are the Claims section's."""

from __future__ import annotations

import math

from bench.analysis import pairs, stats
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import Context, ratio_text, sample, verdict_cell
from bench.report.trials import Labeller, Trial, fmt_mean_sd, group

# Keys whose pairs another section compares: framework (frameworks and versions of one) and
# tuning (tuning=default against best, section "At each framework's best").
COVERED = ("framework", "tuning.name")
MODES = (("train", "training"), ("infer", "inference"))


def as_config(trial: Trial) -> pairs.Config:
    """A run's configuration as ``key=value`` strings: its framework and its identity."""
    return (f"framework={trial.framework}", *(f"{k}={v}" for k, v in trial.config))


def _order(a: str, b: str) -> tuple[str, str]:
    """Two values of a key, the smaller first (as numbers where both are numbers)."""
    try:
        return (a, b) if float(a) <= float(b) else (b, a)
    except ValueError:
        return (a, b) if a <= b else (b, a)


def _ms(trial: Trial) -> float:
    return trial.ms_per_sample


def other_pairs(ctx: Context) -> Section | None:
    section = Section("Other compared pairs", "other-pairs")
    section.blocks.append(
        "Configurations that differ in one key other than the framework (the pairs a "
        "repeats=auto sweep runs rounds for): timed wall time per sample (ms), the ratio of "
        "the means (second over first) with its 95% interval, and the verdict, by the rules "
        "of the framework comparison.  Pairs whose sides differ in more than one key are "
        "compared only where a claim names them (section Claims)."
    )
    rows: list[list[Cell]] = []
    for mode, what in MODES:
        trials = [t for t in ctx.ok if t.mode == mode and not math.isnan(t.ms_per_sample)]
        lab = Labeller(trials)
        by_config = group(trials, as_config)
        found = pairs.one_key(sorted(by_config))
        for c in found:
            if c.key in COVERED:
                continue
            va, vb = _order(pairs.split(c.a)[c.key], pairs.split(c.b)[c.key])
            side_a, side_b = (c.a, c.b) if pairs.split(c.a)[c.key] == va else (c.b, c.a)
            runs_a, runs_b = by_config[side_a], by_config[side_b]
            verdict = stats.compare(
                sample(f"{c.key}={va}", runs_a, _ms), sample(f"{c.key}={vb}", runs_b, _ms)
            )
            first = runs_a[0]
            label = f"{first.framework} · {lab.label(first.config, c.key)}"
            compared = f"{what} time, {c.key} {vb} vs {va}"
            ctx.verdicts.append((compared, label, verdict))
            rows.append(
                [
                    Cell(compared),
                    Cell(label),
                    num(fmt_mean_sd(ms(runs_a))),
                    num(fmt_mean_sd(ms(runs_b))),
                    num(ratio_text(verdict)),
                    verdict_cell(verdict),
                ]
            )
    if not rows:
        return None
    columns = ["Compared", "Configuration", "first ms/sample", "second ms/sample",
               "second / first time [95% CI]", "Verdict"]  # fmt: skip
    section.blocks.append(Table(columns, rows, "Pairs that differ in one other key"))
    return section


def ms(trials: list[Trial]) -> list[float]:
    return [t.ms_per_sample for t in trials]
