"""The report's sections.  Each builder returns None when the runs hold no data for it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import bench.report.figures as figures
from bench import stats
from bench.report.document import Cell, Figure, Section, Table, num
from bench.report.trials import (
    Config,
    Labeller,
    Trial,
    finite,
    fmt,
    fmt_mean_sd,
    framework_pairs,
    group,
    mean_sd,
)

# Per-epoch metrics whose history the report reads (when a run logged them).
# (Power and energy per sample come from the whole-trial energy metrics, with the last
# epoch's value as a fallback, so their histories are not needed.)
HISTORY_KEYS = ("test_accuracy", "gpu_util_pct")
PHASES = (
    ("data", "time_data_ms"),
    ("forward", "time_forward_ms"),
    ("backward", "time_backward_ms"),
    ("optimizer", "time_optimizer_ms"),
    ("communication", "time_comm_ms"),
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


def sample(name: str, trials: Sequence[Trial], value: Callable[[Trial], float]) -> stats.Sample:
    return stats.Sample(
        name=name,
        values=[value(t) for t in trials],
        environments=[t.environment for t in trials],
        num_parameters=[t.num_parameters for t in trials],
        windows_s=[t.epoch_time_s for t in trials],
    )


def metric_of(key: str) -> Callable[[Trial], float]:
    return lambda t: t.metric(key)


def operator_of(category: str) -> Callable[[Trial], float]:
    return lambda t: t.operators_ms[category]


def verdict_cell(verdict: stats.Verdict) -> Cell:
    return Cell(verdict.text, verdict.kind.replace(" ", "-"))


def ratio_text(verdict: stats.Verdict) -> str:
    if math.isnan(verdict.ratio):
        return "-"
    return f"{fmt(verdict.ratio, 4)} [{fmt(verdict.ci_low, 4)}, {fmt(verdict.ci_high, 4)}]"


def _bar(label: str, verdict: stats.Verdict, pair: tuple[str, str]) -> figures.Bar:
    if verdict.kind == stats.FASTER:
        shade, hatch = figures.colour(verdict.faster, pair.index(verdict.faster)), ""
    elif verdict.kind in (stats.SAME, stats.NOT_TESTED):
        shade, hatch = figures.SAME_COLOUR, ""
    else:
        shade, hatch = figures.SAME_COLOUR, "///"
    return figures.Bar(label, verdict.ratio, verdict.ci_low, verdict.ci_high, shade, hatch)


def _legend(a: str, b: str) -> dict[str, str]:
    return {
        f"{a} faster": figures.colour(a),
        f"{b} faster": figures.colour(b, 1),
        stats.SAME: figures.SAME_COLOUR,
        stats.NOT_TESTED: figures.SAME_COLOUR,
        stats.NOT_COMPARABLE: figures.SAME_COLOUR,
    }


def _sorted_configs(lab: Labeller, configs: Sequence[Config]) -> list[Config]:
    def key(config: Config) -> tuple[str, str, int, int, str]:
        pairs = dict(config)
        return (
            pairs.get("model.name", ""),
            pairs.get("device", ""),
            int(pairs.get("batch_size", "0") or 0),
            int(pairs.get("image_size", "0") or 0),
            lab.label(config),
        )

    return sorted(configs, key=key)


# --- relative training and inference time (PyTorch-vs-TensorFlow study, figures 1 to 3) ---


def relative_time(ctx: Context, mode: str) -> Section | None:
    what = "training" if mode == "train" else "inference"
    trials = [t for t in ctx.ok if t.mode == mode and not math.isnan(t.ms_per_sample)]
    lab = Labeller(trials)
    by_config = group(trials, lambda t: t.config)
    section = Section(f"Relative {what} time", f"relative-{what}")
    section.blocks.append(
        "Timed wall time per sample (ms), the mean over each configuration's runs, and the "
        "ratio of the two frameworks' means with its 95% bootstrap interval.  A ratio above "
        "1 means the second framework took longer."
    )
    found = False
    for a, b in framework_pairs(t.framework for t in trials):
        rows: list[list[Cell]] = []
        bars: dict[str, list[figures.Bar]] = {}
        for config in _sorted_configs(lab, list(by_config)):
            members = by_config[config]
            side_a = [t for t in members if t.framework == a]
            side_b = [t for t in members if t.framework == b]
            if not side_a or not side_b:
                continue
            verdict = stats.compare(
                sample(a, side_a, lambda t: t.ms_per_sample),
                sample(b, side_b, lambda t: t.ms_per_sample),
            )
            label = lab.label(config)
            ctx.verdicts.append((f"{what} time, {b} vs {a}", label, verdict))
            rows.append(
                [
                    Cell(label),
                    num(fmt_mean_sd([t.ms_per_sample for t in side_a])),
                    num(fmt_mean_sd([t.ms_per_sample for t in side_b])),
                    num(ratio_text(verdict)),
                    verdict_cell(verdict),
                ]
            )
            device = dict(config).get("device", "?")
            bars.setdefault(device, []).append(_bar(lab.label(config, "device"), verdict, (a, b)))
        if not rows:
            continue
        found = True
        columns = [
            "Configuration",
            f"{a} ms/sample",
            f"{b} ms/sample",
            f"{b} / {a} time [95% CI]",
            "Verdict",
        ]
        section.blocks.append(Table(columns, rows, f"Relative {what} time, {b} vs {a}"))
        for device, device_bars in sorted(bars.items()):
            caption = f"Relative {what} time {b} / {a} on {device} (bars: 95% CI; log scale)"
            png = figures.ratio_bars(device_bars, caption, f"{b} time / {a} time", _legend(a, b))
            name = f"relative_{what}_{b}_vs_{a}_{device}".replace(":", "")
            section.blocks.append(Figure(name, png, caption))
    return section if found else None


# --- inference time against batch size (figure 4) and power (figure 5) ---


def _by_batch(trials: Sequence[Trial], value: Callable[[Trial], float]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for t in trials:
        v = value(t)
        if not math.isnan(v):
            out.setdefault(t.batch_size, []).append(v)
    return dict(sorted(out.items()))


def _series(label: str, by_x: dict[int, list[float]], shade: str) -> figures.Series:
    xs = list(by_x)
    means = [statistics.fmean(v) for v in by_x.values()]
    sds = [statistics.stdev(v) if len(v) > 1 else math.nan for v in by_x.values()]
    return figures.Series(label, xs, means, yerr=sds, colour=shade)


def _compact(by_x: dict[int, list[float]], digits: int = 3) -> str:
    return " · ".join(f"{x}: {fmt(statistics.fmean(v), digits)}" for x, v in by_x.items())


def _lines(trials: Sequence[Trial]) -> dict[tuple[str, str, Config], list[Trial]]:
    found = group(trials, lambda t: (t.model, t.framework, t.config_without("batch_size")))
    return dict(sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))))


def inference_vs_batch(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if t.mode == "infer" and not math.isnan(t.ms_per_sample)]
    lab = Labeller(trials)
    lines = {k: v for k, v in _lines(trials).items() if len({t.batch_size for t in v}) >= 2}
    if not lines:
        return None
    section = Section("Inference time against batch size", "inference-batch")
    section.blocks.append(
        "Inference time per sample (ms) at each batch size; points are means over runs, bars "
        "one standard deviation.  The trend is tested with Spearman's rank correlation over "
        "every run of a line."
    )
    panels: dict[str, figures.Panel] = {}
    styles_by_panel: dict[str, list[str]] = {}
    rows = []
    for (model, framework, config), members in lines.items():
        by_batch = _by_batch(members, lambda t: t.ms_per_sample)
        label = lab.label(config, "batch_size")
        panel = panels.setdefault(
            model,
            figures.Panel(model, "batch size", "ms per sample", logx=True, logy=True),
        )
        rest = lab.label(config, "batch_size", "model.name")
        shade = figures.colour(framework, len(panel.series))
        styles = styles_by_panel.setdefault(model, [])
        if rest not in styles:
            styles.append(rest)
        series = _series(f"{framework} · {rest}", by_batch, shade)
        panel.series.append(figures.styled(series, styles.index(rest)))
        xs = [t.batch_size for t in members]
        found = stats.trend(xs, [t.ms_per_sample for t in members], "time per sample", "batch")
        fastest = min(by_batch, key=lambda b: statistics.fmean(by_batch[b]))
        rows.append(
            [
                Cell(f"{framework} · {label}"),
                Cell(_compact(by_batch)),
                num(str(fastest)),
                Cell(found.text),
            ]
        )
    columns = ["Line", "ms/sample by batch size (batch: mean)", "Fastest batch", "Trend"]
    section.blocks.append(Table(columns, rows, "Inference time per sample by batch size"))
    caption = "Inference time per sample against batch size (log-log)"
    section.blocks.append(
        Figure("inference_vs_batch", figures.panels(list(panels.values())), caption)
    )
    return section


def power_of(t: Trial) -> float:
    """Mean power over the timed windows (W): the GPU's where measured, else the CPU's."""
    seconds = t.metric("trial_time_s")
    for energy, per_epoch in (("trial_energy_j", "power_w"), ("trial_cpu_energy_j", "cpu_power_w")):
        if not math.isnan(t.metric(energy)) and seconds > 0:
            return t.metric(energy) / seconds
        if not math.isnan(t.mean_over_epochs(per_epoch)):
            return t.mean_over_epochs(per_epoch)
    return math.nan


def energy_per_sample_of(t: Trial) -> float:
    value = t.metric("trial_energy_per_sample_j")
    if math.isnan(value):
        value = t.mean_over_epochs("energy_per_sample_j")
    if math.isnan(value):
        rate = t.metric("trial_samples_per_s")
        cpu = t.metric("trial_cpu_energy_j")
        seconds = t.metric("trial_time_s")
        if rate > 0 and seconds > 0:
            value = cpu / (rate * seconds)
    return value


def power(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if not math.isnan(power_of(t))]
    lab = Labeller(trials)
    if not trials:
        return None
    section = Section("Power and energy against batch size", "power")
    section.blocks.append(
        "Mean power over the timed windows (energy / time; the GPU's from NVML where it was "
        "measured, otherwise the CPU package's from RAPL) and energy per sample, at each batch "
        "size.  Trends are tested with Spearman's rank correlation."
    )
    watts = figures.Panel("Power", "batch size", "W", logx=True)
    joules = figures.Panel("Energy per sample", "batch size", "J per sample", logx=True, logy=True)
    rows = []
    styles: list[str] = []
    for (_, framework, config), members in _lines(trials).items():
        by_w = _by_batch(members, power_of)
        by_j = _by_batch(members, energy_per_sample_of)
        rest = lab.label(config, "batch_size")
        label = f"{framework} · {rest}"
        shade = figures.colour(framework, len(watts.series))
        if rest not in styles:
            styles.append(rest)
        watts.series.append(figures.styled(_series(label, by_w, shade), styles.index(rest)))
        if by_j:
            joules.series.append(figures.styled(_series(label, by_j, shade), styles.index(rest)))
        xs = [t.batch_size for t in members]
        power_trend = stats.trend(xs, [power_of(t) for t in members], "power", "batch")
        energy = [energy_per_sample_of(t) for t in members]
        energy_trend = (
            stats.trend(xs, energy, "energy per sample", "batch")
            if not any(math.isnan(e) for e in energy)
            else None
        )
        rows.append(
            [
                Cell(label),
                Cell(_compact(by_w)),
                Cell(_compact(by_j) if by_j else "-"),
                Cell(power_trend.text + ("; " + energy_trend.text if energy_trend else "")),
            ]
        )
    columns = ["Line", "Power W by batch", "Energy J/sample by batch", "Trends"]
    section.blocks.append(Table(columns, rows, "Power and energy per sample by batch size"))
    items = [watts] + ([joules] if joules.series else [])
    section.blocks.append(Figure("power", figures.panels(items), "Power and energy per sample"))
    return section


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
        for config in _sorted_configs(lab, list(by_config)):
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
        for config in _sorted_configs(lab, list(by_config)):
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


# --- distributed training ---


def distributed(ctx: Context) -> Section | None:
    # Every trial logs workers (1 by default): the section shows the distributed ones.
    trials = [
        t
        for t in ctx.ok
        if t.param("workers").isdigit() and t.param("distributed", "none") != "none"
    ]
    lab = Labeller(trials)
    if not trials:
        return None

    def throughput(t: Trial) -> float:
        value = t.metric("global_samples_per_s")
        return t.metric("trial_samples_per_s") if math.isnan(value) else value

    section = Section("Distributed training", "distributed")
    section.blocks.append(
        "Global throughput (samples/s over all workers) and scaling efficiency, throughput / "
        "(workers x the one-worker throughput of the same line), against the number of workers, "
        "per strategy.  Where a line has no one-worker run, the efficiency the runs logged is "
        "shown."
    )
    lines = group(
        trials,
        lambda t: (
            t.framework,
            t.param("distributed", "none"),
            t.config_without("workers", "nodes", "distributed"),
        ),
    )
    rate = figures.Panel("Global throughput", "workers", "samples/s", integer_x=True)
    efficiency = figures.Panel("Scaling efficiency", "workers", "%", ylim=(0, 110), integer_x=True)
    rows = []
    styles: list[str] = []
    for key in sorted(lines, key=str):
        framework, strategy, config = key
        members = lines[key]
        by_workers: dict[int, list[Trial]] = {}
        for t in members:
            by_workers.setdefault(int(t.param("workers")), []).append(t)
        by_workers = dict(sorted(by_workers.items()))
        base = by_workers.get(1)
        base_rate = statistics.fmean(throughput(t) for t in base) if base else math.nan
        label = f"{framework} · {strategy} · {lab.label(config)}"
        shade = figures.colour(framework, len(rate.series))
        xs, ys, sds, effs = [], [], [], []
        for workers, group_trials in by_workers.items():
            mean, sd = mean_sd([throughput(t) for t in group_trials])
            if base:
                eff = 100 * mean / (workers * base_rate)
            else:
                logged = finite(t.metric("scaling_efficiency") for t in group_trials)
                eff = 100 * statistics.fmean(logged) if logged else math.nan
            xs.append(workers)
            ys.append(mean)
            sds.append(sd)
            effs.append(eff)
            nodes = sorted({t.param("nodes", "1") for t in group_trials})
            rows.append(
                [
                    Cell(label),
                    num(f"{workers} ({'/'.join(nodes)})"),
                    num(fmt_mean_sd([throughput(t) for t in group_trials])),
                    num(fmt(eff) + " %" if not math.isnan(eff) else "-"),
                ]
            )
        rest = f"{strategy} · {lab.label(config)}"
        if rest not in styles:
            styles.append(rest)
        style = styles.index(rest)
        rate.series.append(figures.styled(figures.Series(label, xs, ys, sds, colour=shade), style))
        efficiency.series.append(
            figures.styled(figures.Series(label, xs, effs, colour=shade), style)
        )
        if base:
            ideal = [w * base_rate for w in xs]
            rate.series.append(figures.Series("", xs, ideal, colour=shade, style=":"))
    columns = [
        "Line (framework · strategy · configuration)",
        "Workers (nodes)",
        "Samples/s",
        "Efficiency",
    ]
    section.blocks.append(Table(columns, rows, "Throughput and scaling efficiency by workers"))
    png = figures.panels([rate, efficiency])
    section.blocks.append(Figure("distributed", png, "Throughput and scaling (dotted: linear)"))
    return section


# --- time per epoch and GPU utilization (CIFAR-10 study's comparison table) ---


def epochs_and_utilization(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if t.mode == "train" and not math.isnan(t.epoch_time_s)]
    lab = Labeller(trials)
    if not trials:
        return None
    section = Section("Time per epoch and GPU utilization", "epochs")
    section.blocks.append(
        "Mean timed time per epoch (s) and mean GPU utilization over the epochs (%), per "
        "framework and model; whether the frameworks differ is in the relative training time."
    )
    by_key = group(trials, lambda t: (t.model, t.framework, t.config))
    rows = []
    for key in sorted(by_key, key=lambda k: (k[0], lab.label(k[2]), k[1])):
        model, framework, config = key
        members = by_key[key]
        util = finite(t.mean_over_epochs("gpu_util_pct") for t in members)
        rows.append(
            [
                Cell(framework),
                Cell(model),
                Cell(lab.label(config, "model.name")),
                num(fmt_mean_sd([t.epoch_time_s for t in members])),
                num(fmt_mean_sd(util) if util else "not measured"),
            ]
        )
    columns = ["Framework", "Model", "Configuration", "Time per epoch (s)", "GPU utilization (%)"]
    section.blocks.append(Table(columns, rows, "Time per epoch and GPU utilization"))
    return section


# --- the out-of-memory frontier ---


def oom_frontier(ctx: Context) -> Section | None:
    if not any(t.status == "oom" for t in ctx.trials):
        return None
    lab = Labeller(ctx.trials)
    section = Section("Out-of-memory frontier", "oom")
    section.blocks.append(
        "The largest batch size that ran and the smallest that ran out of memory, per "
        "framework and configuration (all runs, failed ones included)."
    )
    lines = group(ctx.trials, lambda t: (t.framework, t.config_without("batch_size")))
    rows = []
    for key in sorted(lines, key=lambda k: (lab.label(k[1], "batch_size"), k[0])):
        framework, config = key
        members = lines[key]
        ran = [t.batch_size for t in members if t.ok]
        oom = [t.batch_size for t in members if t.status == "oom"]
        tried: dict[int, set[str]] = {}
        for t in members:
            tried.setdefault(t.batch_size, set()).add(t.status)
        rows.append(
            [
                Cell(framework),
                Cell(lab.label(config, "batch_size")),
                num(str(max(ran)) if ran else "none"),
                num(str(min(oom)) if oom else "-"),
                Cell(" · ".join(f"{b}: {'/'.join(sorted(s))}" for b, s in sorted(tried.items()))),
            ]
        )
    columns = [
        "Framework",
        "Configuration",
        "Largest batch that ran",
        "Smallest OOM batch",
        "Tried",
    ]
    section.blocks.append(Table(columns, rows, "Largest batch size that ran"))
    return section


# --- accuracy per epoch (labelled data) ---


def accuracy(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if t.record.history.get("test_accuracy")]
    lab = Labeller(trials)
    if not trials:
        return None
    section = Section("Test accuracy per epoch", "accuracy")
    section.blocks.append(
        "Test accuracy after each epoch, on runs that trained on labelled data: the mean over "
        "runs, shaded from the lowest to the highest run."
    )
    by_config = group(trials, lambda t: t.config)
    panels: dict[tuple[str, str], figures.Panel] = {}
    styles: dict[tuple[str, str], list[str]] = {}
    rows = []
    for config in _sorted_configs(lab, list(by_config)):
        pairs = dict(config)
        key = (pairs.get("model.name", "?"), pairs.get("data.name", ""))
        panel = panels.setdefault(
            key,
            figures.Panel(
                " · ".join(k for k in key if k), "epoch", "test accuracy", integer_x=True
            ),
        )
        rest = lab.label(config, "model.name", "data.name")
        label = lab.label(config)
        seen = styles.setdefault(key, [])
        if rest not in seen:
            seen.append(rest)
        for framework, members in sorted(group(by_config[config], lambda t: t.framework).items()):
            per_epoch: dict[int, list[float]] = {}
            for t in members:
                for epoch, value in t.record.history["test_accuracy"]:
                    per_epoch.setdefault(epoch, []).append(value)
            epochs = sorted(per_epoch)
            means = [statistics.fmean(per_epoch[e]) for e in epochs]
            band = ([min(per_epoch[e]) for e in epochs], [max(per_epoch[e]) for e in epochs])
            shade = figures.colour(framework, len(panel.series))
            series = figures.Series(f"{framework} · {rest}", epochs, means, band=band, colour=shade)
            panel.series.append(figures.styled(series, seen.index(rest)))
            final = [t.record.history["test_accuracy"][-1][1] for t in members]
            rows.append(
                [
                    Cell(label),
                    Cell(framework),
                    num(fmt_mean_sd(final)),
                    num(str(max(epochs))),
                ]
            )
    columns = ["Configuration", "Framework", "Final test accuracy", "Epochs"]
    section.blocks.append(Table(columns, rows, "Test accuracy after the last epoch"))
    png = figures.panels(list(panels.values()))
    section.blocks.append(
        Figure("accuracy", png, "Test accuracy per epoch (shaded: lowest to highest run)")
    )
    return section
