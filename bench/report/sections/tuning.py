"""At each framework's best: where the runs hold ``tuning=default`` and ``tuning=best`` runs of
the same configurations, every framework pair's verdict at defaults and at best side by side,
and each framework's own speed-up from its search, with the settings that gave it."""

from __future__ import annotations

import math

from bench.analysis import stats
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import Context, ratio_text, sample, verdict_cell
from bench.report.sections.versions import words
from bench.report.trials import Config, Labeller, Trial, fmt_mean_sd, framework_pairs, group
from bench.trial.frameworks.spaces import DEFAULTS

TUNED = "tuned."


def tuning_of(trial: Trial) -> str:
    return trial.param("tuning.name", "default") or "default"


def workload(trial: Trial) -> Config:
    """The configuration without its tuning: what the default and best runs share."""
    return tuple((k, v) for k, v in trial.config if k != "tuning.name" and not k.startswith(TUNED))


def settings(trials: list[Trial]) -> str:
    """The settings the search chose away from bench's defaults, as the runs logged them
    (``tuned.*``); the threads as counts; several picks are listed apart."""
    picks = set()
    for t in trials:
        chosen = []
        for key, default in DEFAULTS.items():
            value = t.param(TUNED + key)
            if key in ("threads", "inter_threads") or value.lower() != str(default).lower():
                chosen.append(f"{key}={value}" if value else "")
        picks.add(", ".join(c for c in chosen if c))
    return " | ".join(sorted(picks)) or "-"


def _ms(trials: list[Trial]) -> list[float]:
    return [t.ms_per_sample for t in trials]


def at_best(ctx: Context) -> Section | None:
    # A served model's search ranks by its scenario's own figure (a p90 latency, say), not
    # by time per sample: its runs at best are rows of the Serving section, by tuning.name.
    trials = [t for t in ctx.ok if not math.isnan(t.ms_per_sample) and t.mode != "serve"]
    if not any(tuning_of(t) == "best" for t in trials):
        return None
    lab = Labeller(trials)
    cells = group(trials, lambda t: (workload(t), t.framework, tuning_of(t)))
    workloads = sorted({w for w, _, _ in cells}, key=lambda w: lab.label(w))
    frameworks = sorted({f for _, f, _ in cells})
    section = Section("At each framework's best", "tuning")
    section.blocks.append(
        "Each framework as given (tuning=default) and at the fastest of its own speed "
        "settings on this machine (tuning=best; docs/tuning.md): timed wall time per sample "
        "(ms), its ratio with the 95% bootstrap interval, and the verdict, by the rules of "
        "the framework comparison. Settings that change the arithmetic (precision) are never "
        "searched."
    )
    rows: list[list[Cell]] = []
    for fw in frameworks:
        for w in workloads:
            default, best = cells.get((w, fw, "default")), cells.get((w, fw, "best"))
            if not best:
                continue
            row = [Cell(fw), Cell(lab.label(w)), Cell(settings(best))]
            row.append(num(fmt_mean_sd(_ms(default)) if default else "-"))
            row.append(num(fmt_mean_sd(_ms(best))))
            if default:
                v = stats.compare(sample("default", default, _ms_of), sample("best", best, _ms_of))
                speedup = 1 / v.ratio if v.ratio > 0 else math.nan
                known = v.ci_high > 0 and v.ci_low > 0
                interval = f"[{1 / v.ci_high:.2f}, {1 / v.ci_low:.2f}]" if known else "-"
                row += [num(f"{speedup:.2f}x" if not math.isnan(speedup) else "-")]
                row += [num(interval)]
                row += [verdict_cell(v)]
                ctx.verdicts.append((f"tuning, {fw} best vs default", lab.label(w), v))
            else:
                row += [num("-"), num("-"), Cell("no tuning=default runs")]
            rows.append(row)
    if rows:
        columns = ["Framework", "Configuration", "Chosen settings", "default ms/sample",
                   "best ms/sample", "speed-up", "95% CI", "Verdict"]  # fmt: skip
        section.blocks.append(Table(columns, rows, "Each framework: best against default"))
    for a, b in framework_pairs(frameworks):
        pair_rows: list[list[Cell]] = []
        for w in workloads:
            row = [Cell(lab.label(w))]
            seen = False
            for tuning in ("default", "best"):
                side_a, side_b = cells.get((w, a, tuning)), cells.get((w, b, tuning))
                if side_a and side_b:
                    seen = True
                    # The framework comparison's own verdict, side by side: it is listed
                    # once, under the relative time (each comparison once).
                    v = stats.compare(sample(a, side_a, _ms_of), sample(b, side_b, _ms_of))
                    row += [num(ratio_text(v)), Cell(words(v, a, b), v.kind.replace(" ", "-"))]
                else:
                    missing = [f for f, side in ((a, side_a), (b, side_b)) if not side]
                    row += [num("-"), Cell(f"no ok {tuning} run of {' or '.join(missing)}")]
            if seen:
                pair_rows.append(row)
        if pair_rows:
            columns = ["Configuration", f"{b} / {a} time at default [95% CI]", "Verdict at default",
                       f"{b} / {a} time at best [95% CI]", "Verdict at best"]  # fmt: skip
            section.blocks.append(Table(columns, pair_rows, f"{b} against {a}, default and best"))
    return section if len(section.blocks) > 1 else None


def _ms_of(trial: Trial) -> float:
    return trial.ms_per_sample
