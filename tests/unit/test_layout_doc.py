"""docs/layout.md keeps up with the package: its packages table names every package of
bench and which side of a trial it is on (the trial side being exactly
``bench.core.paths.TRIAL_SIDE``), and its module list names every module, in order: the
list scripts/layout_doc.py generates from the docstrings (``--check`` in scripts/test.sh)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from bench.core.paths import TRIAL_SIDE

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "layout.md").read_text()


def _packages_table() -> dict[str, str]:
    section = DOC.split("## Packages", 1)[1].split("\n## ", 1)[0]
    sides: dict[str, str] = {}
    for row in re.findall(r"^\| (`[^|]+) \| (\w+) \|", section, re.M):
        for name in re.findall(r"`(\w+)/`", row[0]):
            sides[name] = row[1]
    return sides


def _rows() -> dict[str, str]:
    section = DOC.split("## Packages", 1)[1].split("\n## ", 1)[0]
    return {
        name.rstrip("/"): side
        for cell, side in re.findall(r"^\| (`[^|]+) \| (\w+) \|", section, re.M)
        for name in re.findall(r"`([\w/]+/)`", cell)
    }


def test_every_package_has_a_row_with_its_side() -> None:
    """Every package of bench and of its trial tree has a row, and the trial tree's rows say
    *trial*: the folder tells the side."""
    top = [p for p in (ROOT / "bench").iterdir() if (p / "__init__.py").is_file()]
    packages = {p.name for p in top} | {
        f"trial/{p.name}"
        for p in (ROOT / "bench" / "trial").iterdir()
        if (p / "__init__.py").is_file()
    }
    rows = _rows()
    assert sorted(rows) == sorted(packages)
    assert set(rows.values()) <= {"trial", "host", "both"}
    assert all(side == "trial" for name, side in rows.items() if name.startswith("trial"))


def test_the_trial_side_is_the_packages_the_table_marks_so() -> None:
    sides = _packages_table()
    marked = {f"bench.{name}" for name, side in sides.items() if side in {"trial", "both"}}
    assert marked == set(TRIAL_SIDE)


def test_every_module_is_listed_in_order() -> None:
    modules = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "bench").rglob("*.py")
        if "__pycache__" not in p.parts and "_data" not in p.parts
    )  # fmt: skip
    listed = re.findall(r"^- `(bench/[^`]+\.py)`", DOC.split("## Modules", 1)[1], re.M)
    assert listed == modules, "run: .venv/bin/python scripts/layout_doc.py --write"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layout_doc", ROOT / "scripts/layout_doc.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ("One thing.  Then more.", "One thing."),
        ("Wrapped\nover lines, e.g. this.  Not this.", "Wrapped over lines, e.g. this."),
        ("Names ``bench.core.paths``. Next.", "Names ``bench.core.paths``."),
        ("Asks why? Then says.", "Asks why?"),
        ("No full stop\n\nSecond paragraph.", "No full stop"),
    ],
)
def test_a_list_line_is_the_docstring_s_first_sentence(doc: str, line: str) -> None:
    assert _generator().first_sentence(doc) == line


def test_the_generated_lists_replace_only_their_block() -> None:
    gen = _generator()
    page = "prose\n<!-- generated: x -->\n- old\n<!-- end: x -->\nmore prose\n"
    assert gen.rendered(page, "x", "- new") == page.replace("- old", "- new")
    with pytest.raises(SystemExit):
        gen.rendered("no block", "x", "- new")
