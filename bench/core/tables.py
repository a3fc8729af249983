"""Plain-text tables for the terminal: left-aligned columns two spaces apart, a rule of
dashes under the header.  Shared by the sweep's summary, the parity check and ``bench
images list``."""

from __future__ import annotations

from collections.abc import Sequence


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths).rstrip()  # an empty last column: no dashes
    return "\n".join([line(header), rule, *map(line, rows)])
