"""Sections on time: relative training and inference time, inference against batch size,
power and energy per sample."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import bench.report.figures as figures
from bench.analysis import stats
from bench.core import metrics
from bench.report.document import Cell, Figure, Section, Table, num
from bench.report.sections.common import (
    Context,
    both_sides,
    legend,
    ratio_text,
    sample,
    verdict_bar,
    verdict_cell,
)
from bench.report.trials import (
    Config,
    Labeller,
    Trial,
    fmt,
    fmt_mean_sd,
    framework_pairs,
    group,
)

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
        for config, side_a, side_b in both_sides(lab, by_config, a, b):
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
            bar = verdict_bar(lab.label(config, "device"), verdict, (a, b))
            bars.setdefault(device, []).append(bar)
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
            png = figures.ratio_bars(device_bars, caption, f"{b} time / {a} time", legend(a, b))
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
    seconds = t.metric(metrics.TRIAL_TIME_S)
    for energy, per_epoch in (
        (metrics.TRIAL_ENERGY_J, metrics.POWER_W),
        (metrics.TRIAL_CPU_ENERGY_J, metrics.CPU_POWER_W),
    ):
        if not math.isnan(t.metric(energy)) and seconds > 0:
            return t.metric(energy) / seconds
        if not math.isnan(t.mean_over_epochs(per_epoch)):
            return t.mean_over_epochs(per_epoch)
    return math.nan


def energy_per_sample_of(t: Trial) -> float:
    value = t.metric(metrics.TRIAL_ENERGY_PER_SAMPLE_J)
    if math.isnan(value):
        value = t.mean_over_epochs(metrics.ENERGY_PER_SAMPLE_J)
    if math.isnan(value):
        rate = t.metric(metrics.TRIAL_SAMPLES_PER_S)
        cpu = t.metric(metrics.TRIAL_CPU_ENERGY_J)
        seconds = t.metric(metrics.TRIAL_TIME_S)
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
