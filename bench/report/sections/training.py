"""Sections on training: distributed scaling, time per epoch and utilization, the
out-of-memory frontier, accuracy per epoch."""

from __future__ import annotations

import math
import statistics

import bench.report.figures as figures
from bench.core import metrics
from bench.report.document import Cell, Figure, Section, Table, num
from bench.report.sections.common import (
    Context,
    sorted_configs,
)
from bench.report.trials import (
    Labeller,
    Trial,
    finite,
    fmt,
    fmt_mean_sd,
    group,
    mean_sd,
    model_of,
)
from bench.trial.distributed.registry import NONE, distributes

# --- distributed training ---


def distributed(ctx: Context) -> Section | None:
    # Every trial logs workers (1 by default): the section shows the distributed ones.
    trials = [
        t
        for t in ctx.ok
        if t.param("workers").isdigit() and distributes(t.param("distributed", NONE))
    ]
    lab = Labeller(trials)
    if not trials:
        return None

    def throughput(t: Trial) -> float:
        value = t.metric(metrics.GLOBAL_SAMPLES_PER_S)
        return t.metric(metrics.TRIAL_SAMPLES_PER_S) if math.isnan(value) else value

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
            t.param("distributed", NONE),
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
                logged = finite(t.metric(metrics.SCALING_EFFICIENCY) for t in group_trials)
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


def _last_accuracy(trial: Trial) -> float:
    """The held-out accuracy after the trial's last epoch (its history's, else its metric)."""
    history = trial.record.history.get(metrics.TEST_ACCURACY)
    return history[-1][1] if history else trial.metric(metrics.TEST_ACCURACY)


def epochs_and_utilization(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if t.mode == "train" and not math.isnan(t.epoch_time_s)]
    lab = Labeller(trials)
    if not trials:
        return None
    by_key = group(trials, lambda t: (t.model, t.framework, t.config))
    utilization = {
        key: finite(t.mean_over_epochs(metrics.GPU_UTIL_PCT) for t in members)
        for key, members in by_key.items()
    }
    gpu = any(utilization.values())  # a column of "not measured" says nothing: left out
    # The study's comparison table puts each cell's accuracy beside its epoch times (seed004);
    # where the runs evaluated a held-out split, its accuracy after the last epoch.
    accuracy = {key: finite(_last_accuracy(t) for t in members) for key, members in by_key.items()}
    evaluated = any(accuracy.values())
    title = "Time per epoch and GPU utilization" if gpu else "Time per epoch and samples/s"
    section = Section(title, "epochs")
    section.blocks.append(
        "Mean timed time per epoch (s)"
        + (", mean GPU utilization over the epochs (%)" if gpu else "")
        + " and samples per second over the trial's timed windows"
        + (", and the test accuracy after the last epoch" if evaluated else "")
        + ", per framework and model; "
        "whether the frameworks differ is in the relative training time."
    )
    rows = []
    for key in sorted(by_key, key=lambda k: (k[0], lab.label(k[2]), k[1])):
        model, framework, config = key
        members = by_key[key]
        util = utilization[key]
        row = [
            Cell(framework),
            Cell(model),
            Cell(lab.label(config, "model.name")),
            num(fmt_mean_sd([t.epoch_time_s for t in members])),
        ]
        if gpu:
            row.append(num(fmt_mean_sd(util) if util else "not measured"))
        rate = finite(t.metric(metrics.TRIAL_SAMPLES_PER_S) for t in members)
        row.append(num(fmt_mean_sd(rate) if rate else "-"))
        if evaluated:
            row.append(num(fmt_mean_sd(accuracy[key]) if accuracy[key] else "not evaluated"))
        rows.append(row)
    columns = ["Framework", "Model", "Configuration", "Time per epoch (s)"]
    columns += ["GPU utilization (%)"] * gpu + ["Samples/s"]
    columns += ["Test accuracy (last epoch)"] * evaluated
    section.blocks.append(Table(columns, rows, title))
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
    trials = [t for t in ctx.ok if t.record.history.get(metrics.TEST_ACCURACY)]
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
    for config in sorted_configs(lab, list(by_config)):
        pairs = dict(config)
        key = (model_of(config), pairs.get("data.name", ""))
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
                for epoch, value in t.record.history[metrics.TEST_ACCURACY]:
                    per_epoch.setdefault(epoch, []).append(value)
            epochs = sorted(per_epoch)
            means = [statistics.fmean(per_epoch[e]) for e in epochs]
            band = ([min(per_epoch[e]) for e in epochs], [max(per_epoch[e]) for e in epochs])
            shade = figures.colour(framework, len(panel.series))
            series = figures.Series(f"{framework} · {rest}", epochs, means, band=band, colour=shade)
            panel.series.append(figures.styled(series, seen.index(rest)))
            final = [t.record.history[metrics.TEST_ACCURACY][-1][1] for t in members]
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
