"""The report as a document: sections of paragraphs, tables and figures (no HTML here)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

# The characters a figure's file name keeps; any other becomes "_".
_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass
class Cell:
    text: str
    # How the HTML shows it: "num" (right-aligned), or a verdict kind for its colour.
    style: str = ""
    # A longer explanation, said once below the table however many cells share it (a
    # verdict's reasons): the cell shows its number.
    note: str = ""


def table_notes(rows: list[list[Cell]]) -> list[str]:
    """The distinct notes of ``rows``' cells, in the order they first appear: note ``i``
    (1-based) is the cell's ``[i]``."""
    notes: list[str] = []
    for row in rows:
        for cell in row:
            if cell.note and cell.note not in notes:
                notes.append(cell.note)
    return notes


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Cell]]
    caption: str = ""


@dataclass
class Figure:
    name: str  # file stem, unique in the report
    png: bytes
    caption: str

    @property
    def file(self) -> str:
        """The figure's file name in the report's ``figures/`` folder: ``name`` where it is
        made of letters, digits, ``_``, ``-`` and inner dots, otherwise those characters
        of it (each other one ``_``, the leading dots dropped, at most 80) and a hash of the
        whole name, so names from the store (``/``, ``..``) never reach another folder and
        two names never share a file."""
        stem = _FILE_CHARS.sub("_", self.name).lstrip(".")
        if stem != self.name or not stem or len(stem) > 80:
            digest = hashlib.sha256(self.name.encode()).hexdigest()[:10]
            stem = f"{stem[:80]}-{digest}"
        return f"{stem}.png"


@dataclass
class Section:
    title: str
    anchor: str
    blocks: list[str | Table | Figure] = field(default_factory=list)


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section] = field(default_factory=list)


def num(text: str) -> Cell:
    return Cell(text, "num")
