"""What every section builder shares: the context, samples of a metric, verdict cells."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import bench.report.figures as figures
from bench.analysis import sequential, stats
from bench.core import metrics
from bench.report.document import Cell
from bench.report.trials import (
    Config,
    Labeller,
    Trial,
    fmt,
    model_of,
)

# Per-epoch metrics whose history the report reads (when a run logged them).
# (Power and energy per sample come from the whole-trial energy metrics, with the last
# epoch's value as a fallback, so their histories are not needed.)
HISTORY_KEYS = (metrics.TEST_ACCURACY, metrics.GPU_UTIL_PCT, metrics.EVAL_ELAPSED_S)
PHASES = (
    ("data", metrics.TIME_DATA_MS),
    ("forward", metrics.TIME_FORWARD_MS),
    ("backward", metrics.TIME_BACKWARD_MS),
    ("optimizer", metrics.TIME_OPTIMIZER_MS),
    ("communication", metrics.TIME_COMM_MS),
)
MAX_OPERATOR_ROWS = 12


@dataclass
class Context:
    trials: list[Trial]
    # (what was compared, configuration, verdict) for the summary at the top.
    verdicts: list[tuple[str, str, stats.Verdict]] = field(default_factory=list)

    @property
    def ok(self) -> list[Trial]:
        return [t for t in self.trials if t.ok]


def shared(trial: Trial) -> bool:
    """Whether other processes held the run's CPUs in its timed windows: the host monitor's
    tag bench.contention, or contention=wait's gate gave up on the load
    (bench.trial.monitors.contention)."""
    tags = trial.record.tags
    return bool(tags.get("bench.contention")) or gave_up(trial)


def gave_up(trial: Trial) -> bool:
    """Whether contention=wait's gate kept shared windows: the load did not let go."""
    return trial.record.tags.get("bench.contention_gate", "").startswith("bound hit")


def load_remedy(trials: Sequence[Trial]) -> str:
    """What a side's spread comes from where its runs shared the machine ('' : they did
    not): the load, not the windows' length, which is the lever otherwise."""
    loaded = sum(shared(t) for t in trials)
    if not loaded:
        return ""
    return (
        f"{loaded} of its {len(trials)} runs shared their CPUs with other processes (tag "
        "bench.contention): the load spread them, not the windows' length; rerun on a quiet "
        "machine"
    )


def sample(name: str, trials: Sequence[Trial], value: Callable[[Trial], float]) -> stats.Sample:
    looks, margin = sequential_plan(trials)
    return stats.Sample(
        name=name,
        values=[value(t) for t in trials],
        environments=[t.environment for t in trials],
        num_parameters=[t.num_parameters for t in trials],
        windows_s=[t.epoch_time_s for t in trials],
        looks=looks,
        margin=margin,
        # the rounds of repeats=auto look at time per sample: a verdict on it is the one at
        # the look that stopped the pair; another metric's, at the look its runs reach
        rounds=[round_of(t) for t in trials] if looks and _per_sample(trials, value) else [],
        remedy=load_remedy(trials),
    )


def _per_sample(trials: Sequence[Trial], value: Callable[[Trial], float]) -> bool:
    """Whether ``value`` is the runs' time per sample (what the rounds compared)."""
    return all(value(t) == t.ms_per_sample for t in trials)


def round_of(trial: Trial) -> int:
    """The round (0-based repeat) a run ran in; -1 when its params do not say."""
    try:
        return int(trial.param("repeat", "-1"))
    except ValueError:
        return -1


def sequential_plan(trials: Sequence[Trial]) -> tuple[int, float]:
    """The looks (max_repeats - 1) and equivalence margin of the repeats=auto sweep every
    one of ``trials`` came from; (0, the default margin) when any came from a fixed number
    of repeats, or the runs disagree (their verdict is then the fixed-level one)."""
    plans = set()
    for t in trials:
        if t.param("repeats").strip().lower() != "auto":
            return 0, stats.DEFAULT_MARGIN
        try:
            looks = int(t.param("max_repeats", "10")) - 1
            margin = float(t.param("equivalence_margin", str(stats.DEFAULT_MARGIN)))
        except ValueError:
            return 0, stats.DEFAULT_MARGIN
        plans.add((looks, margin))
    if len(plans) != 1:
        return 0, stats.DEFAULT_MARGIN
    looks, margin = plans.pop()
    return (looks, margin) if looks >= 1 and 0 < margin < 1 else (0, stats.DEFAULT_MARGIN)


def metric_of(key: str) -> Callable[[Trial], float]:
    return lambda t: t.metric(key)


def operator_of(category: str) -> Callable[[Trial], float]:
    return lambda t: t.operators_ms[category]


def verdict_cell(verdict: stats.Verdict) -> Cell:
    """The verdict in a table: its short form in the cell, its reasons once below the table
    (a note every cell with the same reasons shares)."""
    short, note = verdict_parts(verdict.text)
    return Cell(short, verdict.kind.replace(" ", "-"), note)


def verdict_parts(text: str) -> tuple[str, str]:
    """A verdict's text as (what it says, why): ``not comparable: R`` -> (not comparable,
    R); ``K (D)E`` -> (K, D + E), the parenthesis' match found by depth; a text without
    either is all short."""
    head, colon, rest = text.partition(": ")
    if colon and head == stats.NOT_COMPARABLE:
        return head, rest
    head, paren, rest = text.partition(" (")
    if not paren:
        return text, ""
    depth = 1
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return head, rest[:i] + rest[i + 1 :]
    return head, "(" + rest  # unbalanced: said as it is


def ratio_text(verdict: stats.Verdict) -> str:
    if math.isnan(verdict.ratio):
        return "-"
    if not math.isnan(verdict.ci_low) and not sequential.bounded(verdict.ci_low, verdict.ci_high):
        return f"{fmt(verdict.ratio, 4)} (too few runs for a bounded interval)"
    if math.isnan(verdict.ci_low) or verdict.ci_low == verdict.ci_high:
        return f"{fmt(verdict.ratio, 4)} (one run a side: no interval)"
    return f"{fmt(verdict.ratio, 4)} [{fmt(verdict.ci_low, 4)}, {fmt(verdict.ci_high, 4)}]"


# Each verdict that names no faster side, drawn apart from the others: (colour, hatch).
VERDICT_STYLES: dict[str, tuple[str, str]] = {
    stats.SAME: (figures.SAME_COLOUR, ""),
    stats.EQUIVALENT: ("#5d6d7e", ""),
    stats.NOT_TESTED: ("#9e9e9e", ".."),
    stats.NOT_COMPARABLE: ("#616161", "///"),
}


def verdict_bar(label: str, verdict: stats.Verdict, pair: tuple[str, str]) -> figures.Bar:
    if verdict.kind == stats.FASTER:
        shade, hatch = figures.colour(verdict.faster, pair.index(verdict.faster)), ""
    else:
        shade, hatch = VERDICT_STYLES.get(verdict.kind, VERDICT_STYLES[stats.NOT_COMPARABLE])
    return figures.Bar(label, verdict.ratio, verdict.ci_low, verdict.ci_high, shade, hatch)


def legend(a: str, b: str) -> dict[str, figures.LegendEntry]:
    return {
        f"{a} faster": figures.colour(a),
        f"{b} faster": figures.colour(b, 1),
        **VERDICT_STYLES,
    }


def sorted_configs(lab: Labeller, configs: Sequence[Config]) -> list[Config]:
    def key(config: Config) -> tuple[str, str, int, int, str]:
        pairs = dict(config)
        return (
            model_of(config),
            pairs.get("device", ""),
            int(pairs.get("batch_size", "0") or 0),
            int(pairs.get("image_size", "0") or 0),
            lab.label(config),
        )

    return sorted(configs, key=key)


def both_sides(
    lab: Labeller, by_config: dict[Config, list[Trial]], a: str, b: str
) -> Iterator[tuple[Config, list[Trial], list[Trial]]]:
    """(configuration, runs of ``a``, runs of ``b``) for every configuration both ran, in the
    report's order of configurations."""
    for config in sorted_configs(lab, list(by_config)):
        members = by_config[config]
        side_a = [t for t in members if t.framework == a]
        side_b = [t for t in members if t.framework == b]
        if side_a and side_b:
            yield config, side_a, side_b
