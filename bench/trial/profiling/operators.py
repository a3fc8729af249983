"""The operator table of a profiled pass: self time per operator, and per category.

Each framework's profiler module reports :class:`OpTime` records (an operator, the scope it
ran in, how often and how long); here they are categorized (:mod:`.categories`), summed per
(operator, category) and written as ``operators.csv`` (every operator) and ``operators.md``
(the top 20 by self time, and the totals per category).  The per-category totals, in ms per
profiled step, are also logged as ``op_<category>_ms`` metrics so that categories can be
compared across frameworks.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.core.metrics import OP_TOTAL_MS
from bench.trial.profiling.categories import CATEGORIES, categorize, metric_name

CSV_FILE = "operators.csv"
MD_FILE = "operators.md"
TOP = 20


@dataclass
class OpTime:
    operator: str  # as the framework names it: aten::mkldnn_convolution, _MklNativeConv2D
    scope: str  # where it ran: TF's op name path, or the PyTorch profiler events around it
    calls: int
    self_us: float  # time in the operator itself, excluding operators it called


@dataclass
class Row:
    operator: str
    category: str
    calls: int
    self_ms: float


def table(times: Iterable[OpTime]) -> list[Row]:
    """Rows per (operator, category), largest self time first."""
    rows: dict[tuple[str, str], Row] = {}
    for t in times:
        key = (t.operator, categorize(t.operator, t.scope))
        row = rows.setdefault(key, Row(key[0], key[1], 0, 0.0))
        row.calls += t.calls
        row.self_ms += t.self_us / 1e3
    return sorted(rows.values(), key=lambda r: r.self_ms, reverse=True)


def by_category(rows: list[Row]) -> dict[str, float]:
    """Self time (ms) per category, in :data:`CATEGORIES` order, categories seen only."""
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for row in rows:
        totals[row.category] += row.self_ms
    return {c: ms for c, ms in totals.items() if ms > 0}


def metrics(rows: list[Row], steps: int) -> dict[str, float]:
    """``op_<category>_ms`` per profiled step, and ``op_total_ms``."""
    out = {metric_name(c): ms / steps for c, ms in by_category(rows).items()}
    out[OP_TOTAL_MS] = sum(r.self_ms for r in rows) / steps
    return out


def write(rows: list[Row], steps: int, workdir: Path, device: str, note: str) -> list[str]:
    """Write the CSV and Markdown tables into ``workdir``; return their names."""
    total = sum(r.self_ms for r in rows) or 1.0
    with open(workdir / CSV_FILE, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["rank", "operator", "category", "calls", "self_ms", "self_ms_per_step"])
        for rank, r in enumerate(rows, 1):
            writer.writerow(
                [
                    rank,
                    r.operator,
                    r.category,
                    r.calls,
                    f"{r.self_ms:.3f}",
                    f"{r.self_ms / steps:.3f}",
                ]
            )
    lines = [
        f"# Operators by self time ({device}, {steps} profiled steps)",
        "",
        note,
        "",
        "| # | operator | category | calls | self ms/step | % |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for rank, r in enumerate(rows[:TOP], 1):
        lines.append(
            f"| {rank} | `{r.operator}` | {r.category} | {r.calls} | "
            f"{r.self_ms / steps:.3f} | {100 * r.self_ms / total:.1f} |"
        )
    lines += ["", "## By category", "", "| category | self ms/step | % |", "|---|---:|---:|"]
    for category, ms in sorted(by_category(rows).items(), key=lambda kv: -kv[1]):
        lines.append(f"| {category} | {ms / steps:.3f} | {100 * ms / total:.1f} |")
    (workdir / MD_FILE).write_text("\n".join(lines) + "\n")
    return [CSV_FILE, MD_FILE]
