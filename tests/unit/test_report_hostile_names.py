"""Names from the store (framework, model, run, tag names: anyone who can write a run
chooses them) reach report.md, the figures' text and their file names only as literal text:
no table cell, line, link, raw HTML or mathtext of their own, and no file outside the
report's folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.report import build, figures, render, write
from bench.report.document import Cell, Figure, Report, Section, Table
from tests.report_data import record, runset

HOSTILE = (
    "to|rch`x` <script>alert(1)</script> <img src=x onerror=alert(1)> "
    "[x](javascript:alert(1)) ![y](http://h/y.png) **b** _i_ ~~s~~ &lt;b&gt; \\| $x$^{2}\n"
    "# heading\r\n- item"
)
UNESCAPED_PIPE = re.compile(r"(?<!\\)(?:\\\\)*\|")


def _markup_in(markdown: str) -> list[str]:
    """What in ``markdown`` a Markdown renderer would read as markup or raw HTML."""
    found = []
    for pattern in ("<script", "<img", "<b>", "&lt;b&gt;"):
        if pattern in markdown:
            found.append(pattern)
    for line in markdown.splitlines():
        figure = re.fullmatch(r"!\[(.*)\]\(figures/[\w.-]+\.png\)", line)
        line = figure.group(1) if figure else line  # the report's own link: its caption
        if line.startswith(("# heading", "- item")):
            found.append(line)
        for mark in ("`", "**b**", "~~", " _i_", "$x$", "[", "]("):
            if re.search(r"(?<!\\)(?:\\\\)*" + re.escape(mark), line):
                found.append(f"{mark} in {line[:40]}")
    return found


def test_every_text_of_the_document_enters_markdown_literally() -> None:
    table = Table([HOSTILE, "n"], [[Cell(HOSTILE), Cell("1", "num")]], HOSTILE)
    section = Section(HOSTILE, "s", [HOSTILE, table, Figure("f", b"", HOSTILE)])
    text = render.to_markdown(Report(HOSTILE, HOSTILE, [section]))
    assert _markup_in(text) == []
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 3 and {len(UNESCAPED_PIPE.findall(row)) for row in rows} == {3}
    # what a reader sees: the name, on one line, entities for what HTML would read
    assert "to\\|rch\\`x\\` &lt;script&gt;" in rows[2] and "&amp;lt;b&amp;gt;" in rows[2]
    assert "\\$x\\$^{2} # heading - item |" in rows[2]  # inside a cell: no block
    assert "\\$x\\$^{2} # heading - item" in text.splitlines()[2]  # the subtitle, one line


def test_everyday_text_stays_readable() -> None:
    assert render.md("resnet50 · batch 32 · vit_b_16 (n=4) 4/5 -1.5") == (
        "resnet50 · batch 32 · vit_b_16 (n=4) 4/5 -1.5"
    )
    assert render.md("1. first", paragraph=True) == "1\\. first"


def test_a_figure_name_never_leaves_the_figures_folder(tmp_path: Path) -> None:
    names = ["../../escaped", "..", "a/b", "a_b", "x" * 300, "/etc/passwd", "ok_name-1.2"]
    blocks: list[str | Table | Figure] = [Figure(n, b"png", n) for n in names]
    write(Report("t", "s", [Section("S", "s", blocks)]), tmp_path / "r")
    written = sorted(p.name for p in (tmp_path / "r" / "figures").iterdir())
    assert sorted(p.name for p in tmp_path.rglob("*.png")) == written
    assert len(written) == len(names) and "ok_name-1.2.png" in written
    assert all(len(n) < 100 and not n.startswith(".") for n in written)
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert all(f"](figures/{n})" in markdown for n in written)


def test_figure_text_is_never_mathtext() -> None:
    names = ["$x$^{2}", r"$\frac$", "a $ b"]
    fig = figures.ratio_figure(
        [figures.Bar(n, 1.2, 1.1, 1.3, "#000000") for n in names], names[1], names[0],
        {n: "#000000" for n in names},
    )  # fmt: skip
    figures._png(fig)  # mathtext's parser would refuse $\frac$ and fail the figure
    texts = [t for t in figures._texts(fig) if "$" in t.get_text()]
    assert len(texts) == 3 + 1 + 1 + 3  # tick labels, the x label, the title, the legend
    assert all(t._preprocess_math(t.get_text())[1] is False for t in texts)
    assert {t._preprocess_math(t.get_text())[0] for t in texts} == set(names)


@pytest.mark.slow  # a whole report with its figures (about 3.5 s): the pieces above are fast
def test_a_report_of_hostile_framework_names_is_written_inside_its_folder(
    tmp_path: Path,
) -> None:
    bad = ["x/../../../escaped $\\frac$", HOSTILE]
    runs = [
        record(f, rate=r, repeat=i) for i in range(4) for f, r in zip(bad, (100, 125), strict=True)
    ]
    write(build(runset(runs)), tmp_path / "r")
    files = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()]
    assert "r/report.md" in files and all(f.startswith("r/") for f in files)
    assert any(f.startswith("r/figures/relative_training_") for f in files)
    assert _markup_in((tmp_path / "r" / "report.md").read_text()) == []
