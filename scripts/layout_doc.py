"""The generated lists of the docs, each line a docstring's first sentence: docs/layout.md's
module list (every module of ``bench/``) and docs/benchmarks.md's script list (every script
of ``scripts/measure/``).

    .venv/bin/python scripts/layout_doc.py --check   # exit 1 naming each stale list (CI)
    .venv/bin/python scripts/layout_doc.py --write   # rewrite the lists from the docstrings

A list sits between two markers in its page, ``<!-- generated: NAME -->`` and ``<!-- end:
NAME -->``; the prose around it is written by hand.  A module's line changes with its
docstring's first sentence, so a module added, moved or reworded changes its line here by
running ``--write``, never by hand.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 92  # the docs' line length
# Words whose full stop ends no sentence.
ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf")
# Sphinx's cross-references (:mod:`~x`) and double backticks, as Markdown's code.
ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`~?([^`]+)`")


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line: up to the first full
    stop (or ? or !) followed by a space or the end, outside ``code`` and not after an
    abbreviation; the whole paragraph where there is none."""
    text = " ".join(doc.strip().split("\n\n", 1)[0].split())
    code = False
    for i, ch in enumerate(text):
        if ch == "`":
            code = not code
        elif ch in ".?!" and not code and (i + 1 == len(text) or text[i + 1] == " "):
            if ch == "." and text[:i].lower().endswith(ABBREVIATIONS):
                continue
            return text[: i + 1]
    return text


def _docstring(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        raise SystemExit(f"{path.relative_to(ROOT)}: no docstring (its line would be empty)")
    return doc


def _item(name: str, doc: str) -> str:
    sentence = ROLE.sub(r"`\1`", first_sentence(doc)).replace("``", "`")
    return textwrap.fill(
        f"- `{name}`: {sentence}",
        WIDTH,
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def modules() -> str:
    """docs/layout.md's list: every module of bench, in ``sorted`` order of its path."""
    paths = sorted(
        p for p in (ROOT / "bench").rglob("*.py")
        if "__pycache__" not in p.parts and "_data" not in p.parts
    )  # fmt: skip
    return "\n".join(_item(p.relative_to(ROOT).as_posix(), _docstring(p)) for p in paths)


def measurements() -> str:
    """docs/benchmarks.md's list: every measurement script, by name."""
    paths = sorted((ROOT / "scripts" / "measure").glob("*.py"))
    return "\n".join(_item(p.relative_to(ROOT).as_posix(), _docstring(p)) for p in paths)


# (page, list name, how the list is made)
LISTS: tuple[tuple[str, str, Callable[[], str]], ...] = (
    ("docs/layout.md", "modules", modules),
    ("docs/benchmarks.md", "measurements", measurements),
)


def rendered(page: str, name: str, body: str) -> str:
    """``page`` with its list ``name`` replaced by ``body``."""
    start, end = f"<!-- generated: {name} -->", f"<!-- end: {name} -->"
    pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
    if len(pattern.findall(page)) != 1:
        raise SystemExit(f"{name}: the page has no single {start} ... {end} block")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a list is stale")
    mode.add_argument("--write", action="store_true", help="rewrite the lists")
    args = parser.parse_args(argv)
    stale = []
    for page, name, make in LISTS:
        path = ROOT / page
        old = path.read_text()
        new = rendered(old, name, make())
        if new == old:
            continue
        if args.write:
            path.write_text(new)
            print(f"{page}: {name} rewritten")
        else:
            stale.append(f"{page}: the {name} list is stale")
    for line in stale:
        print(f"{line} (run: .venv/bin/python scripts/layout_doc.py --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
