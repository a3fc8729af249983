"""The report as a document: sections of paragraphs, tables and figures (no HTML here)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Cell:
    text: str
    # How the HTML shows it: "num" (right-aligned), or a verdict kind for its colour.
    style: str = ""


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
