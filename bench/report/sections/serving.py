"""mode=serve (MLPerf's LoadGen, bench.trial.serve): each configuration's serving figures with
LoadGen's verdicts and MLPerf's rules beside them (a causal LM's time to first token and per
output token too), a latency-versus-load figure (p99 against offered QPS, one line per
framework: every LoadGen run of a Server trial, each find_peak probe, from the run's metric
history), and the framework pairs' verdicts by the rules of the training-time verdicts:
SingleStream's p90 and MultiStream's p99 latency, Offline's throughput and Server's highest
VALID QPS (find_peak).  A configuration is labelled with ``serve.max_batch`` (serving never
reads ``batch_size``), and a higher-is-better figure's ratio is shown as itself (b's samples/s
over a's), not as the inverse it is compared on."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import replace

import bench.report.figures as figures
from bench.analysis import stats
from bench.core import metrics
from bench.core.config import ServeConfig
from bench.report.document import Cell, Figure, Section, Table, num
from bench.report.sections.common import (
    Context,
    both_sides,
    ratio_text,
    sample,
    sorted_configs,
    verdict_cell,
)
from bench.report.trials import Config, Labeller, Trial, fmt_mean_sd, framework_pairs, group

_DEFAULT_MAX_BATCH = ServeConfig().max_batch

# What each scenario is compared on: (figure, metric, lower is better).  A higher-is-better
# figure is compared as its inverse (time per sample, or per query of the peak load), so that
# "faster" reads as "holds more load".
COMPARED = {
    "SingleStream": ("p90 latency", metrics.TRIAL_SERVE_LATENCY_P90_MS, True),
    "MultiStream": ("p99 latency", metrics.TRIAL_SERVE_LATENCY_P99_MS, True),
    "Offline": ("samples/s", metrics.TRIAL_SERVE_SAMPLES_PER_S, False),
    "Server": ("highest VALID QPS", metrics.SERVE_PEAK_QPS, False),
}
# A causal LM is compared on its token latencies too, in every scenario that has them.
TOKENS_COMPARED = (
    ("p99 time to first token", metrics.TRIAL_SERVE_TTFT_P99_MS, True),
    ("median time per output token", metrics.TRIAL_SERVE_TPOT_P50_MS, True),
)
SHOWN = (
    ("samples/s", metrics.TRIAL_SERVE_SAMPLES_PER_S),
    ("p50 ms", metrics.TRIAL_SERVE_LATENCY_P50_MS),
    ("p90 ms", metrics.TRIAL_SERVE_LATENCY_P90_MS),
    ("p99 ms", metrics.TRIAL_SERVE_LATENCY_P99_MS),
    ("batch", metrics.TRIAL_SERVE_MEAN_BATCH),
    ("peak QPS", metrics.SERVE_PEAK_QPS),
)
# A causal LM's token latencies (LoadGen's use_token_latencies): columns shown only where a
# row has them.
TOKEN_SHOWN = (
    ("first token p50 ms", metrics.TRIAL_SERVE_TTFT_P50_MS),
    ("first token p99 ms", metrics.TRIAL_SERVE_TTFT_P99_MS),
    ("per token p50 ms", metrics.TRIAL_SERVE_TPOT_P50_MS),
    ("per token p99 ms", metrics.TRIAL_SERVE_TPOT_P99_MS),
    ("tokens/s", metrics.TRIAL_SERVE_TOKENS_PER_S),
)
# Each LoadGen run's (a window's) offered load and p99, read from the run's history: the
# latency-versus-load figure draws every run of a Server trial, each find_peak probe.
HISTORY_KEYS = (metrics.SERVE_TARGET_QPS, metrics.SERVE_LATENCY_P99_MS, metrics.SERVE_TTFT_P99_MS)
REMEDY = "LoadGen's runs are seconds long here: more repeats, or a longer serve.min_duration_s"


# bench's scenario names (the serve.scenario param) and LoadGen's.
SCENARIOS = {
    "single_stream": "SingleStream",
    "multi_stream": "MultiStream",
    "server": "Server",
    "offline": "Offline",
}


def _scenario(t: Trial) -> str:
    return SCENARIOS.get(t.param("serve.scenario", "server"), "?")


def _tag(t: Trial, name: str) -> str:
    return t.record.tags.get(f"bench.serve.{name}", "")


def _value(key: str, lower: bool) -> Callable[[Trial], float]:
    def value(t: Trial) -> float:
        v = t.metric(key)
        if lower:
            return v
        return 1.0 / v if v > 0 else math.nan

    return value


def _verdicts(t: list[Trial]) -> str:
    """LoadGen's verdicts of a configuration's runs, counted ('VALID x2, INVALID (...) x1')."""
    counts: dict[str, int] = {}
    for trial in t:
        verdict = _tag(trial, "result") or "?"
        counts[verdict] = counts.get(verdict, 0) + 1
    return ", ".join(f"{v} x{n}" for v, n in sorted(counts.items()))


def _label(lab: Labeller, config: Config, *skip: str) -> str:
    """A serving configuration's label: its ``serve.max_batch`` where a training one shows
    its batch size, which serving does not read (``skip``: keys a column shows)."""
    pairs = dict(config)
    max_batch = pairs.get("serve.max_batch", str(_DEFAULT_MAX_BATCH))
    label = lab.label(config, "batch_size", "serve.max_batch", *skip)
    return f"{label} · max_batch {max_batch}"


def _as_figure(verdict: stats.Verdict) -> stats.Verdict:
    """A verdict compared on a figure's inverse (time per sample) with its ratio and interval
    turned back into the figure's own (b's samples/s over a's)."""
    flip = [
        1.0 / v if v > 0 else math.nan for v in (verdict.ratio, verdict.ci_high, verdict.ci_low)
    ]
    return replace(verdict, ratio=flip[0], ci_low=flip[1], ci_high=flip[2])


def _figure_cell(members: list[Trial], key: str) -> Cell:
    """The mean ± sd of a figure over the runs that have it ('-' where none has)."""
    values = [v for v in (t.metric(key) for t in members) if not math.isnan(v)]
    return num(fmt_mean_sd(values)) if values else Cell("-")


def serving(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if t.mode == "serve"]
    if not trials:
        return None
    lab = Labeller(trials)
    section = Section("Serving", "serving")
    section.blocks.append(
        "Models served under MLPerf's LoadGen (mode=serve): LoadGen's own arrival process, "
        "statistics and verdict, and one batching SUT for every framework (the policy in "
        "each row).  Each figure is the mean over a configuration's runs, ± their standard "
        "deviation; 'LoadGen' counts its verdicts (an INVALID names the rule that failed), "
        "'MLPerf's rules' says whether the runs were as long as MLPerf asks.  Frameworks are "
        "compared per scenario by the rules of the training-time verdicts: SingleStream on "
        "its p90 latency, MultiStream on its p99, Offline on samples/s and Server on the "
        "highest target QPS LoadGen found VALID at the bound (serve.mode=find_peak); "
        "'faster' there means lower latency or more load held."
    )
    by_config = group(trials, lambda t: t.config)
    rows: list[list[Cell]] = []
    shown = SHOWN + tuple(
        (name, key)
        for name, key in TOKEN_SHOWN
        if any(not math.isnan(t.metric(key)) for t in trials)
    )
    for config in sorted_configs(lab, list(by_config)):
        for framework, members in sorted(group(by_config[config], lambda t: t.framework).items()):
            rows.append(
                [
                    Cell(framework),
                    Cell(_label(lab, config, "serve.scenario")),
                    Cell(_scenario(members[0])),
                ]
                + [_figure_cell(members, key) for _, key in shown]
                + [
                    Cell(_verdicts(members)),
                    Cell(_tag(members[0], "rules")),
                    Cell(_tag(members[0], "policy")),
                ]
            )
    columns = ["Framework", "Configuration", "Scenario", *(n for n, _ in shown), "LoadGen",
               "MLPerf's rules", "Batching"]  # fmt: skip
    section.blocks.append(Table(columns, rows, "Serving figures"))
    figure = _latency_vs_load(trials)
    if figure is not None:
        section.blocks.append(figure)
    for a, b in framework_pairs(t.framework for t in trials):
        compared: list[list[Cell]] = []
        for config, side_a, side_b in both_sides(lab, by_config, a, b):
            scenario = _scenario(side_a[0])
            for what, key, lower in (COMPARED.get(scenario, ("", "", True)), *TOKENS_COMPARED):
                value = _value(key, lower)
                if not key or any(math.isnan(value(t)) for t in side_a + side_b):
                    continue  # a causal LM's token figures: where both sides have them
                label = _label(lab, config)
                verdict = stats.compare(
                    replace(sample(a, side_a, value), remedy=REMEDY),
                    replace(sample(b, side_b, value), remedy=REMEDY),
                )
                # a higher-is-better figure is tested on its inverse, whose ratio the list shows
                name = what if lower else f"{what} (tested as its inverse)"
                ctx.verdicts.append((f"serving {name}, {b} vs {a}", label, verdict))
                compared.append(
                    [
                        Cell(label),
                        Cell(what),
                        num(fmt_mean_sd([t.metric(key) for t in side_a])),
                        num(fmt_mean_sd([t.metric(key) for t in side_b])),
                        num(ratio_text(verdict if lower else _as_figure(verdict))),
                        verdict_cell(verdict),
                    ]
                )
        if compared:
            columns = ["Configuration", "Figure", a, b, f"{b} / {a} [95% CI]", "Verdict"]
            section.blocks.append(Table(columns, compared, f"Serving, {b} vs {a}"))
    return section


def probes(t: Trial) -> list[tuple[float, float]]:
    """A Server trial's LoadGen runs as (offered QPS, p99 ms of the bounded latency): each
    window of its history (find_peak's probes, in order), or the trial's own figures where
    the store holds no history of them.  The bounded latency is the query's or, for a causal
    LM, its first token's (``serve.latency_bound_ms`` bounds that, as LoadGen judges it)."""
    lm = t.metric(metrics.TRIAL_SERVE_TTFT_P99_MS) > 0  # NaN where the trial has none
    p99, trial_p99 = (
        (metrics.SERVE_TTFT_P99_MS, metrics.TRIAL_SERVE_TTFT_P99_MS)
        if lm
        else (metrics.SERVE_LATENCY_P99_MS, metrics.TRIAL_SERVE_LATENCY_P99_MS)
    )
    loads = dict(t.record.history.get(metrics.SERVE_TARGET_QPS, []))
    p99s = dict(t.record.history.get(p99, []))
    points = [(loads[step], p99s[step]) for step in sorted(loads) if step in p99s]
    if not points:
        points = [(t.metric(metrics.TRIAL_SERVE_TARGET_QPS), t.metric(trial_p99))]
    return [(x, y) for x, y in points if x > 0 and y > 0]


def _latency_vs_load(trials: list[Trial]) -> Figure | None:
    """p99 against the offered load, one line per framework (and model): every LoadGen run
    of every Server trial (:func:`probes`), the mean p99 at each load."""
    server = [t for t in trials if _scenario(t) == "Server" and probes(t)]
    if not server:
        return None
    panel = figures.Panel("Server: p99 latency against offered load", "target QPS", "p99 ms")
    panel.logy = True
    for i, ((framework, model), members) in enumerate(
        sorted(group(server, lambda t: (t.framework, t.model)).items())
    ):
        by_load: dict[float, list[float]] = {}
        for t in members:
            for load, p99 in probes(t):
                by_load.setdefault(load, []).append(p99)
        xs = sorted(by_load)
        series = figures.Series(
            f"{framework} · {model}",
            xs,
            [statistics.fmean(by_load[x]) for x in xs],
            colour=figures.colour(framework),
        )
        panel.series.append(figures.styled(series, i))
    default = str(ServeConfig().latency_bound_ms)  # a key at its default is not logged
    bounds = sorted({float(t.param("serve.latency_bound_ms", default)) for t in server})
    loads = [x for t in server for x, _ in probes(t)]
    for bound in bounds:  # each bound as a grey dashed line across the loads drawn
        line = figures.Series(f"bound {bound:g} ms", [min(loads), max(loads)], [bound] * 2,
                              colour="#757575", style="--", marker="")  # fmt: skip
        panel.series.append(line)
    caption = (
        "Server's p99 latency against its offered load: every LoadGen run of each trial "
        "(each find_peak probe), the mean p99 at each load"
    )
    if any(t.metric(metrics.TRIAL_SERVE_TTFT_P99_MS) > 0 for t in server):
        caption += "; a causal LM's line is its time to first token, which its bound is on"
    if bounds:
        caption += f"; the latency bound (dashed): {', '.join(f'{b:g} ms' for b in bounds)}"
    return Figure("serving_latency_vs_load", figures.panels([panel], columns=1), caption)
