"""The report as a self-contained HTML page and as Markdown with its figures beside it."""

from __future__ import annotations

import base64
import html
import re

from bench.report.document import Cell, Figure, Report, Table, table_notes

CSS = """
body { font-family: "DejaVu Sans", system-ui, sans-serif; color: #1d1d1d; margin: 0 auto;
  max-width: 1080px; padding: 1rem 1.5rem 3rem; line-height: 1.45; font-size: 15px;
  overflow-wrap: break-word; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
p.subtitle { color: #555; margin-top: 0; }
nav ol { columns: 2; font-size: .9rem; }
table { border-collapse: collapse; width: 100%; margin: .8rem 0 1.2rem; font-size: .82rem;
  table-layout: auto; }
caption { text-align: left; font-weight: bold; padding: .3rem 0; }
th, td { border: 1px solid #d0d0d0; padding: .25rem .4rem; vertical-align: top;
  text-align: left; overflow-wrap: break-word; }
th { background: #f2f2f2; }
td.num { text-align: right; overflow-wrap: normal; }
td.faster { background: #e3f4e1; }
td.no-significant-difference { background: #f4f4f4; }
td.not-comparable { background: #fdf0dc; }
ol.notes { font-size: .82rem; color: #333; margin-top: -.6rem; }
figure { margin: 1rem 0 1.6rem; }
figure img { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .85rem; color: #444; }
"""


def _with_note(cell: Cell, notes: list[str]) -> str:
    """A cell's text with the number of its note, if it has one."""
    return f"{cell.text} [{notes.index(cell.note) + 1}]" if cell.note else cell.text


def _table_html(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    notes = table_notes(table.rows)
    body = []
    for row in table.rows:
        cells = "".join(
            f'<td class="{html.escape(c.style)}">{html.escape(_with_note(c, notes))}</td>'
            if c.style
            else f"<td>{html.escape(_with_note(c, notes))}</td>"
            for c in row
        )
        body.append(f"<tr>{cells}</tr>")
    caption = f"<caption>{html.escape(table.caption)}</caption>" if table.caption else ""
    said = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    below = f'<ol class="notes">{said}</ol>' if notes else ""
    return (
        f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        + below
    )


def _figure_html(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    alt = html.escape(figure.caption)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{alt}">'
        f"<figcaption>{alt}</figcaption></figure>"
    )


def to_html(report: Report) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(report.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1>",
        f'<p class="subtitle">{html.escape(report.subtitle)}</p>',
        "<nav><ol>",
    ]
    parts += [f'<li><a href="#{s.anchor}">{html.escape(s.title)}</a></li>' for s in report.sections]
    parts.append("</ol></nav>")
    for section in report.sections:
        parts.append(f'<section id="{section.anchor}"><h2>{html.escape(section.title)}</h2>')
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(_table_html(block))
            elif isinstance(block, Figure):
                parts.append(_figure_html(block))
            else:
                parts.append(f"<p>{html.escape(block)}</p>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# Markdown's inline markup (code, emphasis, links and images, table cells, strikethrough,
# GitHub's math) and the backslash that escapes it; ``<``, ``>`` and ``&`` become entities.
_MD_INLINE = re.compile(r"([\\`*\[\]|~$])")
# ``_`` is emphasis only where it does not stand between two letters or digits.
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# What makes a block of a line's start: a heading, a list item (its marker, its number's dot).
_MD_BLOCK_START = re.compile(r"^(\d*)([#+.)-])")


def md(text: str, paragraph: bool = False) -> str:
    """``text`` as Markdown shows it literally, on one line (a ``paragraph`` starts no
    heading or list either): the one place the document's text (names from the store among
    it) enters report.md, as :func:`html.escape` is for report.html.  No name can add a
    table cell, a line, a link, raw HTML or any markup."""
    text = html.escape(" ".join(text.splitlines()).strip(), quote=False)
    text = _MD_UNDERSCORE.sub(r"\\_", _MD_INLINE.sub(r"\\\1", text))
    return _MD_BLOCK_START.sub(r"\1\\\2", text) if paragraph else text


def _table_md(table: Table) -> str:
    lines = []
    if table.caption:
        lines.append(f"**{md(table.caption)}**\n")
    lines.append("| " + " | ".join(md(c) for c in table.columns) + " |")
    lines.append(
        "|"
        + "|".join("---:" if _numeric(table, i) else "---" for i in range(len(table.columns)))
        + "|"
    )
    notes = table_notes(table.rows)
    for row in table.rows:
        lines.append("| " + " | ".join(md(_with_note(c, notes)) for c in row) + " |")
    if notes:
        lines.append("")
        lines += [f"\\[{i}\\] {md(n)}  " for i, n in enumerate(notes, 1)]
    return "\n".join(lines)


def _numeric(table: Table, column: int) -> bool:
    return bool(table.rows) and all(row[column].style == "num" for row in table.rows)


def to_markdown(report: Report, figure_dir: str = "figures") -> str:
    """Markdown with the same tables; figures are linked as ``figure_dir/<name>.png``."""
    parts = [f"# {md(report.title)}", "", md(report.subtitle, paragraph=True), ""]
    for section in report.sections:
        parts += [f"## {md(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(_table_md(block))
            elif isinstance(block, Figure):
                parts.append(f"![{md(block.caption)}]({figure_dir}/{block.file})")
            else:
                parts.append(md(block, paragraph=True))
            parts.append("")
    return "\n".join(parts)
