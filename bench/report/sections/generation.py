"""mode=generate (a causal LM's prefill and cached greedy decoding, timed by bench): the
generation figures of every configuration, and the framework pairs' verdicts on time to
first token and time per output token."""

from __future__ import annotations

from dataclasses import replace

from bench.analysis import stats
from bench.core import metrics
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import (
    Context,
    both_sides,
    metric_of,
    ratio_text,
    sample,
    sorted_configs,
    verdict_cell,
)
from bench.report.trials import Labeller, fmt_mean_sd, framework_pairs, group

# The compared figures (lower is better), as trial metrics (bench.trial.generate.summary:
# trial_*, the trial's over all its windows; the plain names are each window's, and a run's
# latest value of those is its last window's).
# With what steadies each when a side is unstable: a generation's window is one prompt batch
# whatever min_window_s says, so more windows (epochs) or runs, and for the decode steps
# more of them per window.
COMPARED = (
    (
        "time to first token",
        metrics.TRIAL_TIME_TO_FIRST_TOKEN_MS,
        "each window times one prefill: more windows (epochs) or more repeats steady its median",
    ),
    (
        "time per output token",
        metrics.TRIAL_TIME_PER_OUTPUT_TOKEN_P50_MS,
        "its p50 is over the decode steps: more of them (new_tokens, epochs) or more "
        "repeats steady it",
    ),
)
# Every figure of the table, with its column's name and the factor to its unit.
SHOWN = (
    ("TTFT ms", metrics.TRIAL_TIME_TO_FIRST_TOKEN_MS, 1.0),
    ("TPOT p50 ms", metrics.TRIAL_TIME_PER_OUTPUT_TOKEN_P50_MS, 1.0),
    ("TPOT p90 ms", metrics.TRIAL_TIME_PER_OUTPUT_TOKEN_P90_MS, 1.0),
    ("prefill tok/s", metrics.TRIAL_PREFILL_TOKENS_PER_S, 1.0),
    ("decode tok/s", metrics.TRIAL_DECODE_TOKENS_PER_S, 1.0),
    ("prefill GFLOP/s", metrics.PREFILL_ACHIEVED_FLOPS_PER_S, 1e-9),
    ("decode GFLOP/s", metrics.DECODE_ACHIEVED_FLOPS_PER_S, 1e-9),
)


def generation(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if t.mode == "generate"]
    if not trials:
        return None
    lab = Labeller(trials)
    section = Section("Generation", "generation")
    section.blocks.append(
        "Causal LMs under mode=generate: time to first token (the prefill of the prompt "
        "batch, median over the windows), time per output token (each cached decode step; "
        "p50 and p90 over every step of every window), and tokens per second, as bench's "
        "own loop times them on both sides; the prefill's and the decode steps' achieved "
        "GFLOP/s, from the forward's FLOPs counted at the prompt's length and the full one.  "
        "Each figure is the mean over a configuration's runs, ± their standard deviation.  "
        "Frameworks are compared on time to first token "
        "and on the p50 time per output token, each by the rules of the training-time "
        "verdicts; a ratio above 1 means the second framework took longer."
    )
    by_config = group(trials, lambda t: t.config)
    rows: list[list[Cell]] = []
    for config in sorted_configs(lab, list(by_config)):
        for framework, members in sorted(group(by_config[config], lambda t: t.framework).items()):
            rows.append(
                [Cell(framework), Cell(lab.label(config))]
                + [
                    num(fmt_mean_sd([t.metric(key) * unit for t in members]))
                    for _, key, unit in SHOWN
                ]
            )
    columns = ["Framework", "Configuration", *(name for name, _, _ in SHOWN)]
    section.blocks.append(Table(columns, rows, "Generation figures"))
    for a, b in framework_pairs(t.framework for t in trials):
        compared: list[list[Cell]] = []
        for config, side_a, side_b in both_sides(lab, by_config, a, b):
            label = lab.label(config)
            for what, key, remedy in COMPARED:
                value = metric_of(key)
                verdict = stats.compare(
                    replace(sample(a, side_a, value), remedy=remedy),
                    replace(sample(b, side_b, value), remedy=remedy),
                )
                ctx.verdicts.append((f"{what}, {b} vs {a}", label, verdict))
                compared.append(
                    [
                        Cell(label),
                        Cell(what),
                        num(fmt_mean_sd([value(t) for t in side_a])),
                        num(fmt_mean_sd([value(t) for t in side_b])),
                        num(ratio_text(verdict)),
                        verdict_cell(verdict),
                    ]
                )
        if compared:
            columns = ["Configuration", "Figure", f"{a} ms", f"{b} ms", f"{b} / {a} [95% CI]",
                       "Verdict"]  # fmt: skip
            section.blocks.append(Table(columns, compared, f"Generation, {b} vs {a}"))
    return section
