"""The images bench has built in the local engine, and which of them are superseded.

Every change to what goes into an image (its Dockerfile, constraints, lock, bench's own
sources, the base's digest, its labels) gives it a new content-hash tag, and the old image
stays (a few MiB of its own when only bench's sources changed, GBs when a pin did).  An
image is *superseded* when a newer bench image of the same kind exists: the same framework
(or service), variant, framework version and base image.
"Newer" is when the engine last tagged it, which for bench's images is when they were
built (BuildKit gives an image rebuilt from cached layers the creation time of the first
build, so that time cannot tell two builds apart).  The newest ``keep`` of each kind are
kept; a run logged from a superseded image still names its id and digest (``bench.image.*``
tags), but rerunning it in that exact image needs the image back.

Images built before bench labelled the version (``bench.version``) are a kind of their own
("?"); bench no longer builds any of them (the labels are part of the content hash), and of
those too the newest are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.core.tables import text_table

if TYPE_CHECKING:
    from docker import DockerClient

LABEL = "bench.image"  # on every image bench builds (bench.images.Plan.labels)
UNLABELLED = "?"


@dataclass(frozen=True)
class Held:
    """One tag of a bench image in the engine."""

    tag: str
    id: str
    name: str  # torch, tf, mxnet, mlflow
    variant: str
    version: str  # "" for the pinned one, UNLABELLED where the image does not say
    base: str
    built: str  # ISO 8601 UTC, as the engine reports it (so it sorts as time)
    size_bytes: int  # the whole image, its base and every layer it shares included
    # What no other image shares: what removing it alone frees (None: the engine did not say)
    unique_bytes: int | None

    @property
    def kind(self) -> tuple[str, str, str, str]:
        return (self.name, self.variant, self.version, self.base)


def held(c: DockerClient, usage: dict[str, Any] | None = None) -> list[Held]:
    """bench's tagged images in the engine, by kind, newest first within a kind; ``usage``:
    the engine's ``df()``, if the caller has it already."""
    usage = c.df() if usage is None else usage
    shared = {i["Id"]: i.get("SharedSize", -1) for i in usage.get("Images") or []}
    out = []
    for img in c.images.list(filters={"label": LABEL}):
        size = int(img.attrs.get("Size", 0))
        common = shared.get(img.id, -1)
        labels = img.labels or {}
        for tag in img.tags or []:
            out.append(
                Held(
                    tag=str(tag),
                    id=str(img.id),
                    name=labels[LABEL],
                    variant=labels.get("bench.variant", ""),
                    version=labels.get("bench.version", UNLABELLED),
                    base=labels.get("bench.base_image", ""),
                    built=_built(img.attrs),
                    size_bytes=size,
                    unique_bytes=size - common if common >= 0 else None,
                )
            )
    return _ordered(out)


def _built(attrs: dict[str, Any]) -> str:
    """When the engine last tagged the image, else when it was created."""
    tagged = str((attrs.get("Metadata") or {}).get("LastTagTime") or "")
    return tagged if tagged and not tagged.startswith("0001-") else str(attrs.get("Created", ""))


def _when(iso: str) -> tuple[str, float]:
    """An engine's ISO 8601 time as a sort key: nanosecond fractions (more than Python's
    datetime reads) and none at all compare as numbers."""
    fraction = re.match(r"\.(\d+)", iso[19:])
    return iso[:19], float(f"0.{fraction.group(1)}") if fraction else 0.0


def _ordered(images: Iterable[Held]) -> list[Held]:
    """By kind, newest first within a kind."""
    newest_first = sorted(images, key=lambda h: (_when(h.built), h.tag), reverse=True)
    return sorted(newest_first, key=lambda h: h.kind)  # a stable sort keeps that order


def superseded(images: Iterable[Held], keep: int = 1) -> list[Held]:
    """The images beyond the newest ``keep`` of their kind (``keep`` >= 1)."""
    if keep < 1:
        raise ValueError(f"--keep: at least 1 image of each kind is kept, got {keep}")
    seen: dict[tuple[str, str, str, str], set[str]] = {}
    out = []
    for h in _ordered(images):
        ids = seen.setdefault(h.kind, set())
        if h.id in ids or len(ids) < keep:
            ids.add(h.id)  # a second tag of a kept image is kept with it
        else:
            out.append(h)
    return out


def remove(c: DockerClient, images: Iterable[Held]) -> list[tuple[Held, str]]:
    """Untag each image (the engine deletes an image with its last tag); per image, '' or
    why it stays (a container uses it, the engine refused)."""
    import docker

    out = []
    for h in images:
        try:
            c.images.remove(h.tag)
            out.append((h, ""))
        except docker.errors.APIError as exc:
            out.append((h, str(exc.explanation or exc)))
    return out


def table(images: list[Held], stale: set[str]) -> str:
    """The listing ``bench images list`` prints."""
    rows = []
    for h in images:
        version = {"": "pinned", UNLABELLED: "?"}.get(h.version, h.version)
        rows.append(
            (
                h.tag,
                version,
                h.base,
                h.built[:19].replace("T", " "),
                amount(h.size_bytes),
                "?" if h.unique_bytes is None else amount(h.unique_bytes),
                "superseded" if h.tag in stale else "",
            )
        )
    return text_table(("TAG", "VERSION", "BASE", "BUILT", "SIZE", "UNIQUE", ""), rows)


def amount(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


def unique_bytes(images: Iterable[Held]) -> int:
    """What the images hold that no other image shares, each image counted once: at least
    what removing them frees (layers they share only among themselves come on top)."""
    return sum({h.id: h.unique_bytes or 0 for h in images}.values())


def layers_bytes(usage: dict[str, Any]) -> int:
    """The space all the engine's image layers take, from its ``df()``."""
    return int(usage.get("LayersSize") or 0)
