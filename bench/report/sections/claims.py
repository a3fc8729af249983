"""The report's first section: each claim (a study's finding, or a user's expectation) with
its source, the verdict the runs give it, the measured effect and its interval, the runs it
used, and its caveat: where the claim as checked differs from the study's finding and what
its cause needs (``caveat:`` and ``requires:``, :mod:`bench.report.claims`), so that a
verdict never reads without its scope."""

from __future__ import annotations

from collections.abc import Sequence

from bench.report.claims import Claim
from bench.report.claims import check as check_claim
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import Context


def claims(ctx: Context, given: Sequence[Claim]) -> Section | None:
    if not given:
        return None
    # The studies measured defaults: claims are checked on tuning=default runs, and on
    # tuning=best runs apart, in a column of their own, where the sweep has them.
    default = [t for t in ctx.trials if t.param("tuning.name", "default") == "default"]
    best = [t for t in ctx.trials if t.param("tuning.name", "default") == "best"]
    checked = [check_claim(c, default) for c in given]
    at_best = [check_claim(c, best) for c in given] if any(t.ok for t in best) else []
    section = Section("Claims", "claims")
    counts: dict[str, int] = {}
    for c in checked:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    section.blocks.append(
        f"{len(checked)} claim{'s' if len(checked) != 1 else ''}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + ".  Each is checked over the ok runs its filter selects, per configuration, with "
        "the statistics of the verdicts below (docs/report.md, 'Claims'); a claim whose "
        "stated cause the runs lack (its requirements) reads 'not measured here'.  The "
        "caveat says how the claim as checked differs from the study's finding."
    )
    rows = [
        [Cell(c.claim.text), Cell(c.claim.source or "-"),
         Cell(c.verdict, c.verdict.replace(" ", "-")), Cell(c.effect), num(str(c.runs)),
         Cell(c.claim.scope or "-")]
        for c in checked
    ]  # fmt: skip
    columns = ["Claim", "Source", "Verdict", "Effect and interval", "Runs", "Caveat"]
    if at_best:
        columns += ["Verdict at best", "Effect at best"]
        for row, b in zip(rows, at_best, strict=True):
            row += [Cell(b.verdict, b.verdict.replace(" ", "-")), Cell(b.effect)]
    section.blocks.append(Table(columns, rows, "Every claim"))
    return section
