"""The images bench has built in the local engine, and which of them are superseded.

Every change to what goes into an image (its Dockerfile, constraints, lock, bench's own
sources, the base's digest) gives it a new content-hash tag, and the old image stays: a
few GB each.  An image is *superseded* when a newer bench image of the same kind exists:
the same framework (or service), variant, framework version and base image.  The newest
``keep`` of each kind are kept; a run logged from a superseded image still names its id and
digest (``bench.image.*`` tags), but rerunning it in that exact image needs the image back.

Images built before bench labelled the version (``bench.version``) are a kind of their
own ("?"), so that an image of another version is never taken for a superseded pinned one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.tables import text_table

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
    created: str  # ISO 8601, as the engine reports it (sorts as time)
    size_bytes: int

    @property
    def kind(self) -> tuple[str, str, str, str]:
        return (self.name, self.variant, self.version, self.base)


def held(c: DockerClient) -> list[Held]:
    """bench's tagged images in the engine, by kind, newest first within a kind."""
    out = []
    for img in c.images.list(filters={"label": LABEL}):
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
                    created=str(img.attrs.get("Created", "")),
                    size_bytes=int(img.attrs.get("Size", 0)),
                )
            )
    return _ordered(out)


def _ordered(images: Iterable[Held]) -> list[Held]:
    """By kind, newest first within a kind (ISO 8601 times of one engine sort as times)."""
    newest_first = sorted(images, key=lambda h: (h.created, h.tag), reverse=True)
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
                h.created[:19].replace("T", " "),
                f"{h.size_bytes / 2**20:,.0f} MiB",
                "superseded" if h.tag in stale else "",
            )
        )
    return text_table(("TAG", "VERSION", "BASE", "CREATED", "SIZE", ""), rows)


def size_bytes(images: Iterable[Held]) -> int:
    """The images' size, each image counted once however many of its tags are given."""
    return sum({h.id: h.size_bytes for h in images}.values())
