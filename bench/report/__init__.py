"""The comparison report: the studies' tables and figures from a set of runs, with verdicts.

:func:`build` turns plain run records (:class:`bench.tracking.RunSet`) into a
:class:`~bench.report.document.Report`; :func:`write` renders it as ``report.html`` (self
contained) and ``report.md`` (figures in ``figures/``).  Reading the runs and logging the
result are :mod:`bench.tracking`'s; ``python -m bench.report`` ties them together.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.analysis import stats
from bench.core.result import DIVERGED
from bench.report import claims as claims_mod
from bench.report import render, sections
from bench.report.document import Cell, Report, Section, Table, num
from bench.report.sections import HISTORY_KEYS, Context
from bench.report.sections.claims import claims as claims_section
from bench.report.sections.common import ratio_text, sequential_plan, verdict_cell
from bench.report.sections.drift import section as drift_section
from bench.report.sections.drift import shared_section
from bench.report.trials import REPORT_TAGS, Trial, framework_version, group, to_trial
from bench.tracking import RunSet
from bench.tracking.protocol import HOOKS_TAG

__all__ = ["HISTORY_KEYS", "build", "write", "report_sweep"]

METHOD = (
    "Each verdict compares the runs of one configuration in two frameworks, using the timed "
    "wall time per sample of every run.  It says 'not comparable' when the runs' environments "
    "differ (device, CPU, GPU, Python version or container image between the frameworks; any "
    "version or hardware between repeats of one framework), when their parameter counts "
    "differ, or when a side is unstable (coefficient of variation of 10% or more).  Otherwise "
    "the ratio of mean times gets a 95% percentile-bootstrap confidence interval (10,000 "
    "resamples, fixed seed); with fewer than 8 runs a side a two-sided exact Mann-Whitney U "
    "test must also give p < 0.05.  'A is faster than B by x%' (B takes x% longer) is said "
    "only then.  With too few runs for any test to find a difference (1 run a side; or 3, "
    "where the Mann-Whitney p-value cannot go below 0.1) the verdict is 'not tested', with "
    "the number of runs: use repeats >= 4.  Otherwise 'no significant difference'.  Each row "
    "of the table below names the two sides it compares (B vs A)."
)


# The rule of a repeats=auto sweep's verdicts (bench.analysis.sequential; docs/report.md,
# "Stopping when the answer is known"), in place of METHOD's fixed-level test.
METHOD_AUTO = (
    "Each verdict compares the runs of one configuration in two frameworks, using the timed "
    "wall time per sample of every run.  It says 'not comparable' when the runs' environments "
    "differ (device, CPU, GPU, Python version or container image between the frameworks; any "
    "version or hardware between repeats of one framework), when their parameter counts "
    "differ, or when a side is unstable (coefficient of variation of 10% or more).  This "
    "sweep ran repeats=auto: after each round from the second on, a Welch t interval of the "
    "ratio of geometric mean times was looked at, at a level that spends the 5% over the "
    "{looks} planned looks (Pocock's spending function), so that looking after every round "
    "does not raise the error rate.  'A is faster than B by x%' is said when that interval "
    "excludes 1; 'equivalent within ±{margin:g}%' when its two one-sided tests put the ratio "
    "inside the margin; 'no significant difference' otherwise, with why (max_repeats "
    "reached, or no verdict likely in the rounds left).  A pair keeps the verdict of the "
    "round that settled it, which the row names.  Each row of the table below names the two "
    "sides it compares (B vs A)."
)


def _method(ctx: Context) -> str:
    """How this report's verdicts were reached: the fixed-level rule, or the sequential one
    where every run came from one repeats=auto plan."""
    looks, margin = sequential_plan(ctx.ok)
    return METHOD_AUTO.format(looks=looks, margin=100 * margin) if looks else METHOD


def _overview(ctx: Context, runs: RunSet) -> Section:
    section = Section("Overview", "overview")
    counts: dict[str, int] = {}
    for t in ctx.trials:
        counts[t.status] = counts.get(t.status, 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    frameworks = sorted({t.framework for t in ctx.trials})
    models = sorted({t.model for t in ctx.trials})
    section.blocks.append(
        f"{len(ctx.trials)} runs ({tally or 'none'}); frameworks: {', '.join(frameworks) or '-'}; "
        f"models: {', '.join(models) or '-'}."
    )
    diverged = sorted(t.record.name or t.record.run_id for t in ctx.trials if t.status == DIVERGED)
    if diverged:
        section.blocks.append(
            f"{len(diverged)} run{'s' if len(diverged) != 1 else ''} diverged (an epoch's "
            "training loss was not finite) and "
            f"{'are' if len(diverged) != 1 else 'is'} compared nowhere below: "
            + ", ".join(diverged)
            + "."
        )
    repeats = [len(v) for v in group(ctx.ok, lambda t: (t.framework, t.config)).values()]
    if repeats:
        each = (
            f"{min(repeats)}"
            if min(repeats) == max(repeats)
            else f"{min(repeats)} to {max(repeats)}"
        )
        section.blocks.append(
            f"{len(repeats)} configuration{'s' if len(repeats) != 1 else ''} (framework "
            f"included) ran ok, with {each} run{'s' if each != '1' else ''} each."
        )
    envs = group(ctx.trials, lambda t: (t.framework, tuple(sorted(t.environment.items()))))
    rows = []
    for (framework, env), members in sorted(envs.items()):
        pairs = dict(env)
        version = framework_version(framework, pairs)
        rows.append(
            [
                Cell(framework),
                Cell(version),
                Cell(pairs.get("device", "-")),
                Cell(pairs.get("cpu_model", "-")),
                Cell(pairs.get("gpu_names", "-")),
                Cell(pairs.get("python_version", "-")),
                Cell(pairs.get("image", "-")[:19]),
                num(str(len(members))),
            ]
        )
    columns = ["Framework", "Version", "Device", "CPU", "GPU", "Python", "Image", "Runs"]
    section.blocks.append(Table(columns, rows, "Environments"))
    return section


def _verdicts(ctx: Context) -> Section | None:
    if not ctx.verdicts:
        return None
    section = Section("Verdicts", "verdicts")
    kinds: dict[str, int] = {}
    for _, _, v in ctx.verdicts:
        key = f"{v.faster} faster" if v.kind == stats.FASTER else v.kind
        kinds[key] = kinds.get(key, 0) + 1
    section.blocks.append(
        f"{len(ctx.verdicts)} compared pair{'s' if len(ctx.verdicts) != 1 else ''}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        + ".  "
        + _method(ctx)
    )
    rows = [
        [Cell(what), Cell(label), num(ratio_text(v)), verdict_cell(v)]
        for what, label, v in ctx.verdicts
    ]
    columns = ["Compared", "Configuration", "Ratio [95% CI]", "Verdict"]
    section.blocks.append(Table(columns, rows, "Every verdict"))
    return section


def _builders(ctx: Context) -> list[Callable[[], Section | None]]:
    """The body's sections, in order; building them also fills ``ctx.verdicts``."""
    return [
        lambda: sections.relative_time(ctx, "train"),
        lambda: sections.relative_time(ctx, "infer"),
        lambda: sections.generation(ctx),
        lambda: sections.serving(ctx),
        lambda: sections.versions(ctx),
        lambda: sections.at_best(ctx),
        lambda: sections.inference_vs_batch(ctx),
        lambda: sections.power(ctx),
        lambda: sections.breakdown(ctx),
        lambda: sections.distributed(ctx),
        lambda: sections.epochs_and_utilization(ctx),
        lambda: sections.oom_frontier(ctx),
        lambda: sections.accuracy(ctx),
        lambda: sections.time_to_accuracy(ctx),
        lambda: sections.other_pairs(ctx),  # last: the verdicts above keep their order
    ]


def _verdicts_of(ctx: Context) -> list[tuple[str, str, stats.Verdict]]:
    for make in _builders(ctx):
        make()
    return ctx.verdicts


def verdicts(runs: RunSet) -> list[tuple[str, str, stats.Verdict]]:
    """The report's verdicts on ``runs`` as data, in the report's order: (what is compared,
    the configuration, the verdict); ``bench.compare``'s rows."""
    trials = [to_trial(r) for r in runs.records if not r.tags.get(HOOKS_TAG)]
    return _verdicts_of(Context(trials))


# What the build imports that the read does not: scipy's statistics and matplotlib's Agg
# canvas (2-3 s on a 2-core machine).  ``warm_imports`` loads them in a background thread
# while the runs are read, which over HTTP is mostly waiting on the server.
_BUILD_MODULES = ("scipy.stats", "matplotlib.figure", "matplotlib.backends.backend_agg")
WARM_THREAD = "bench-report-imports"


def warm_imports() -> Callable[[], None]:
    """Import the build's heavy modules in a daemon thread, and return the call that waits
    for it.  Call that before the build: a package imported by two threads at once can hand
    one of them a partly initialized module (matplotlib.patches half-way through
    matplotlib's own imports: ``cannot import name 'Transform'``), so the build starts only
    once the thread is done.  A module that fails here fails again, with its error, where
    the build imports it."""
    import importlib
    import threading

    def load() -> None:
        for name in _BUILD_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - said where the build imports it
                return

    thread = threading.Thread(target=load, name=WARM_THREAD, daemon=True)
    thread.start()
    return thread.join


def build(
    runs: RunSet,
    title: str = "",
    claims: list[claims_mod.Claim] | None = None,
    references: list[float] | None = None,
) -> Report:
    """The report of ``runs``: every section the runs hold data for, the ``claims`` checked
    against them first.  ``references``: the sweep's drift-check times by round
    (:func:`bench.tracking.sweep_references`); rounds that moved get a section of their own."""
    # A run a check harness changed (bench.hooks: the parity check's) is no measurement.
    hooked = [r for r in runs.records if r.tags.get(HOOKS_TAG)]
    trials: list[Trial] = [to_trial(r) for r in runs.records if not r.tags.get(HOOKS_TAG)]
    ctx = Context(trials)
    where = f"sweep {runs.sweep_name or runs.sweep_id}" if runs.sweep_id else "all runs"
    report = Report(
        title=title or f"bench comparison report: {runs.experiment}",
        subtitle=(
            f"{runs.uri}, experiment {runs.experiment!r}, {where}; written "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}"
        ),
    )
    body = [s for s in (b() for b in _builders(ctx)) if s is not None]
    summary = _verdicts(ctx)
    moved = drift_section(ctx, references or [], _verdicts_of)
    shared = shared_section(ctx, _verdicts_of)
    checked = claims_section(ctx, claims or [])
    overview = _overview(ctx, runs)
    if hooked:
        overview.blocks.insert(
            1,
            f"{len(hooked)} run{'s' if len(hooked) != 1 else ''} of a check harness (tag "
            f"{HOOKS_TAG}: the data, weights or probes of the trial were changed) "
            f"{'are' if len(hooked) != 1 else 'is'} left out: "
            + ", ".join(r.name or r.run_id for r in hooked[:10])
            + ("..." if len(hooked) > 10 else "")
            + ".",
        )
    report.sections = (
        [overview]
        + ([checked] if checked else [])
        + ([summary] if summary else [])
        + ([moved] if moved else [])
        + ([shared] if shared else [])
        + body
    )
    if not ctx.trials:
        report.sections[0].blocks.append("There are no trial runs to report on.")
    return report


def write(report: Report, out: Path) -> Path:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    for stale in figures.glob("*.png"):  # an earlier report's figures
        stale.unlink()
    for section in report.sections:
        for block in section.blocks:
            if not isinstance(block, str | Table):
                (figures / block.file).write_bytes(block.png)
    _replace(out / "report.md", render.to_markdown(report))
    page = out / "report.html"
    _replace(page, render.to_html(report))
    return page


def _replace(path: Path, text: str) -> None:
    """Write ``path`` as a new file (mode 0644 less the umask) that takes its name in one
    step: whatever was there (an earlier report, or a FIFO or a link someone left) is
    replaced, never written through or waited on."""
    tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def report_sweep(uri: str, sweep_id: str, claims: list[claims_mod.Claim] | None = None) -> str:
    """Build the report of one sweep (with ``claims`` checked) and log it to the sweep's
    run; return the page's URI."""
    from bench import tracking

    runs = tracking.load_runs(
        uri, sweep=sweep_id, history_keys=HISTORY_KEYS, tag_prefixes=REPORT_TAGS
    )
    with tempfile.TemporaryDirectory() as tmp:
        references = tracking.sweep_references(uri, sweep_id)
        write(build(runs, claims=claims, references=references), Path(tmp))
        return tracking.log_report(uri, sweep_id, Path(tmp))
