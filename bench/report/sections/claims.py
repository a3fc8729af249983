"""The report's first section: each claim (a study's finding, or a user's expectation) with
its source, the verdict the runs give it, the measured effect and its interval, the runs it
used, and its caveat: where the claim as checked differs from the study's finding and what
its cause needs (``caveat:`` and ``requires:``, :mod:`bench.report.claims`), so that a
verdict never reads without its scope."""

from __future__ import annotations

from collections.abc import Sequence

from bench.report import claims as claims_mod
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import Context


def claims(ctx: Context, given: Sequence[claims_mod.Claim]) -> Section | None:
    if not given:
        return None
    checked = [claims_mod.check(c, ctx.trials) for c in given]
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
    section.blocks.append(
        Table(
            ["Claim", "Source", "Verdict", "Effect and interval", "Runs", "Caveat"],
            rows,
            "Every claim",
        )  # fmt: skip
    )
    return section
