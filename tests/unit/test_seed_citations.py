"""Every citation of a study in the presets, the claims and the docs names a section, figure,
table, listing or reference that exists in that study's seed file (issue 52, item 3): "seed001,
Table 2" for a paper without tables fails here.  The studies' contents are an index written
once (tests/data/seed_index.yaml); where the seed files are (shared/seeds/), the index is
checked against them too.

A citation belongs to the study its text is about: a preset's or scale's file to its own; in
the docs and in Python, a heading that names a study (``### seed003: ...``) to the end of its
section, and a mention in a paragraph (``seed001``, ``study 004``, ``shared/seeds/001``) to the
end of that paragraph."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INDEX = yaml.safe_load((ROOT / "tests" / "data" / "seed_index.yaml").read_text())
SEEDS = Path(os.environ.get("BENCH_SEEDS_DIR", "/work/shared/seeds"))


def cited_files() -> list[Path]:
    """The presets and scales of the studies, the claims' code, the docs and the README."""
    found = [
        *sorted((ROOT / "conf" / "experiment").glob("*.yaml")),
        *sorted((ROOT / "conf" / "scales").glob("seed*/*.yaml")),
        *sorted((ROOT / "bench" / "report").glob("*.py")),
        *sorted((ROOT / "bench" / "sweep").glob("*.py")),
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "README.md",
    ]
    return [p for p in found if p.is_file()]


_MENTION = re.compile(r"(?:seed|seeds/|[Ss]tud(?:y|ies) |\| )(00[0-4])\b")
_SEP = r"\s*(?:,\s*and|,|and|-|to)\s*"
_ARABIC = rf"\d+[ab]?(?:{_SEP}\d+[ab]?)*"  # 4, 6 and 8; 1-5; Fig. 8a
_ROMAN_OR_ARABIC = rf"(?:[IVX]+(?:{_SEP}[IVX]+)*|\d+(?:{_SEP}\d+)*)"  # Tables III and IV
_PATTERNS = {
    "figures": re.compile(rf"\b(?:Figs?\.|[Ff]igures?)\s*({_ARABIC})"),
    "tables": re.compile(rf"\b[Tt]ables?\s+({_ROMAN_OR_ARABIC})\b"),
    "listings": re.compile(rf"\bListings?\s+({_ARABIC})\b"),
    "sections": re.compile(
        r"\b[Ss]ections?\s+((?:[IVX]+(?:-[A-Z0-9])?)(?:\s*(?:,|and|to)\s*[IVX]+(?:-[A-Z0-9])?)*)"
        r"|(?<![\w.-])([IVX]{1,4}-[A-G1-9])(?![\w-])"
    ),
    "insights": re.compile(r"\binsights?\s+(\d+(?:\s*(?:,|and|-)\s*\d+)*)"),
    "references": re.compile(r"(?<![\w\]])\[(\d+)\](?:\s*-\s*\[(\d+)\])?"),
}
# "seed004, Conclusion": a study's heading cited by name.
_NAMED = re.compile(r"seed(00[0-4]),\s+([A-Z][A-Za-z]+(?: [A-Za-z]+)*?)(?=[:,;('\"]|\s*$)")


@dataclass(frozen=True)
class Citation:
    where: str  # file:line
    seed: str
    kind: str  # sections, figures, tables, listings, insights, references
    id: str

    def exists(self) -> bool:
        entry = INDEX[self.seed]
        if self.kind == "references":
            return 1 <= int(self.id) <= entry["references"]
        return self.id in (entry.get(self.kind) or {})


def _ids(text: str, dash: bool = True) -> list[str]:
    """``4, 6 and 8`` -> 4, 6, 8; ``1-5`` and ``V-B to V-F`` -> each in the range (a
    section's id keeps its dash: ``dash=False``)."""
    out: list[str] = []
    parts = re.split(r"\s*(,\s*and|,|and|to|-)\s*" if dash else r"\s*(,\s*and|,|and|to)\s*", text)
    tokens, seps = parts[::2], parts[1::2]
    for i, token in enumerate(tokens):
        if i and seps[i - 1] in ("-", "to") and out:
            out.extend(_between(out[-1], token))
        out.append(token)
    return list(dict.fromkeys(t for t in out if t))


_ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X"]


def _between(first: str, last: str) -> list[str]:
    if first.isdigit() and last.isdigit():
        return [str(n) for n in range(int(first) + 1, int(last))]
    if first in _ROMAN and last in _ROMAN:
        return _ROMAN[_ROMAN.index(first) + 1 : _ROMAN.index(last)]
    head, _, a = first.rpartition("-")
    tail, _, b = last.rpartition("-")
    if head and head == tail and len(a) == len(b) == 1:  # V-B to V-F
        return [f"{head}-{chr(c)}" for c in range(ord(a) + 1, ord(b))]
    return []


def citations(path: Path) -> Iterator[Citation]:
    """The citations of one file, each with the study it belongs to."""
    rel = path.relative_to(ROOT)
    own = re.search(r"seed(00[0-4])", str(rel))  # a study's preset or scale: its own
    section = paragraph = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if own:
            seed: str | None = own.group(1)
        else:
            mentioned = _MENTION.findall(line)
            if re.match(r"\s*#{1,6} ", line):  # a docs heading: its section's study
                section, paragraph = (mentioned[0] if mentioned else None), None
            elif not line.strip():
                paragraph = None
            seed = None
            # a line's citations belong to the study last named before them
            for piece in re.split(_MENTION, line):
                if re.fullmatch(r"00[0-4]", piece):
                    paragraph = piece
                    continue
                seed = paragraph or section
                if seed:
                    yield from _found(piece, seed, f"{rel}:{number}")
            yield from _named(line, f"{rel}:{number}")
            continue
        if seed:
            yield from _found(line, seed, f"{rel}:{number}")
        yield from _named(line, f"{rel}:{number}")


def _named(line: str, where: str) -> Iterator[Citation]:
    """ "seed004, Conclusion": a heading of the study named after it."""
    for named_seed, name in _NAMED.findall(line):
        if name.split()[0] not in ("Table", "Tables", "Fig", "Figs", "Listing", "Listings"):
            yield Citation(where, named_seed, "named", name)


def _found(text: str, seed: str, where: str) -> Iterator[Citation]:
    for kind, pattern in _PATTERNS.items():
        for match in pattern.finditer(text):
            if kind == "references":
                first, last = match.group(1), match.group(2)
                ids = [first, *_between(first, last), last] if last else [first]
            else:
                ids = _ids(next(g for g in match.groups() if g), dash=kind != "sections")
            for i in ids:
                yield Citation(where, seed, kind, i)


def _named_exists(c: Citation) -> bool:
    entry = INDEX[c.seed]
    names = {*(entry.get("sections") or {}), *(entry.get("tables") or {})}
    return c.id in names or c.id.lower() in {n.lower() for n in names}


def all_citations() -> list[Citation]:
    return list(dict.fromkeys(c for p in cited_files() for c in citations(p)))


def test_every_citation_names_what_its_study_contains() -> None:
    found = all_citations()
    missing = [
        f"{c.where}: seed{c.seed} {c.kind} {c.id}"
        for c in found
        if not (_named_exists(c) if c.kind == "named" else c.exists())
    ]
    print(f"{len(found)} citations checked in {len(cited_files())} files")
    assert len(found) > 150  # the presets, claims and docs cite the studies throughout
    assert not missing, "\n".join(missing)


def test_a_wrong_citation_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check fails on what the issue found: a table of a paper without tables, a figure
    past the last, a section that is not there, in a heading's section or a paragraph."""
    doc = tmp_path / "docs" / "x.md"
    doc.parent.mkdir()
    doc.write_text(
        "### seed003: distributed\n\nTables III and IV, Figs. 4-6, section V-H\n\n"
        'source: "seed001, Table 2"\n\nseed004, insight 5; seed004, Epilogue: x\n'
        "study 001 (Fig. 6, Listing 3, V-1)\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [(c.seed, c.kind, c.id, c.exists() if c.kind != "named" else _named_exists(c))
             for c in citations(doc)]  # fmt: skip
    assert ("003", "tables", "IV", True) in found and ("003", "figures", "5", True) in found
    assert ("003", "sections", "V-H", False) in found
    assert ("001", "tables", "2", False) in found
    assert ("004", "insights", "5", False) in found and ("004", "named", "Epilogue", False) in found
    assert ("001", "figures", "6", False) in found and ("001", "listings", "3", False) in found
    assert ("001", "sections", "V-1", True) in found
    assert ("001", "listings", "V", False) not in found  # a list is of one kind of number


def test_ranges_and_lists_are_each_cited() -> None:
    assert _ids("4, 6 and 8") == ["4", "6", "8"]
    assert _ids("1-5") == ["1", "2", "3", "4", "5"]
    assert _ids("V-B to V-F", dash=False) == ["V-B", "V-C", "V-D", "V-E", "V-F"]
    assert _ids("III and IV") == ["III", "IV"]


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the seed files are not here ({SEEDS})")
def test_the_index_is_the_seed_files() -> None:
    """Each entry of the index is a line of its seed file (the index cannot invent one)."""
    wrong = []
    for seed, entry in INDEX.items():
        text = (SEEDS / entry["file"]).read_text()
        assert entry["title"] in text, seed
        for kind in ("sections", "figures", "tables", "listings", "insights"):
            wrong += [f"{seed} {kind} {k}: {v!r}" for k, v in (entry.get(kind) or {}).items()
                      if v not in text]  # fmt: skip
        numbered = re.findall(r"^\s*(?:- )?\[?(\d+)[\].] ", text, flags=re.M)
        if entry["references"]:
            assert str(entry["references"]) in numbered, seed
    assert not wrong, wrong
