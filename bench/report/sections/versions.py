"""Version against version: for a framework run at more than one version in the experiment
(``framework.version``), the relative time of each configuration, as the framework
comparison has it: mean ms per sample, the ratio with its bootstrap interval, and a verdict
(faster / slower / no significant difference / not comparable)."""

from __future__ import annotations

import math

from bench.analysis import stats
from bench.core.frameworks import FRAMEWORKS
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import Context, both_sides, ratio_text, sample
from bench.report.trials import Labeller, Trial, fmt_mean_sd, group, version_pairs

VERSION_TAGS = {name: spec.tag for name, spec in FRAMEWORKS.items()}


def side_name(name: str, trials: list[Trial]) -> str:
    """``tf 2.21.0 (pinned)`` or ``tf 2.20.0``: the version the runs imported."""
    base, _, asked = name.partition("==")
    seen = sorted({t.record.tags.get(f"bench.{VERSION_TAGS.get(base, '')}", "") for t in trials})
    version = (asked or ",".join(v.split("+")[0] for v in seen if v)) or "?"
    return f"{base} {version}" + ("" if asked else " (pinned)")


def words(verdict: stats.Verdict, a: str, b: str) -> str:
    """The verdict, as "b faster/slower than a by x% [CI]", or what it is."""
    if verdict.kind != stats.FASTER:
        return verdict.text
    pct = abs(verdict.ratio - 1) * 100
    ci = f"[{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"
    how = "faster" if verdict.faster == b else "slower"
    return f"{b} {how} than {a}: time ratio {verdict.ratio:.3f} {ci} ({pct:.1f}%)"


def versions(ctx: Context) -> Section | None:
    trials = [t for t in ctx.ok if not math.isnan(t.ms_per_sample)]
    pairs = version_pairs(t.framework for t in trials)
    if not pairs:
        return None
    lab = Labeller(trials)
    by_config = group(trials, lambda t: t.config)
    section = Section("Version against version", "versions")
    section.blocks.append(
        "The same configuration at two versions of one framework: timed wall time per sample "
        "(ms), the ratio of the means (second over first) with its 95% bootstrap interval, "
        "and the verdict, by the rules of the framework comparison."
    )
    for a, b in pairs:
        rows: list[list[Cell]] = []
        names = (a, b)
        for config, side_a, side_b in both_sides(lab, by_config, a, b):
            names = (side_name(a, side_a), side_name(b, side_b))
            verdict = stats.compare(
                sample(names[0], side_a, lambda t: t.ms_per_sample),
                sample(names[1], side_b, lambda t: t.ms_per_sample),
            )
            ctx.verdicts.append((f"version, {names[1]} vs {names[0]}", lab.label(config), verdict))
            rows.append(
                [
                    Cell(lab.label(config)),
                    num(fmt_mean_sd([t.ms_per_sample for t in side_a])),
                    num(fmt_mean_sd([t.ms_per_sample for t in side_b])),
                    num(ratio_text(verdict)),
                    Cell(words(verdict, *names), verdict.kind.replace(" ", "-")),
                ]
            )
        if rows:
            columns = ["Configuration", f"{names[0]} ms/sample", f"{names[1]} ms/sample",
                       f"{names[1]} / {names[0]} time [95% CI]", "Verdict"]  # fmt: skip
            section.blocks.append(Table(columns, rows, f"{names[1]} against {names[0]}"))
    return section if len(section.blocks) > 1 else None
