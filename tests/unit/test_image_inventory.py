"""``bench images list|prune`` (bench.images.inventory) against a fake engine that answers
`images.list` with a label filter and `images.remove` as Docker's does: which images are
superseded, which stay, and what a container's hold on one does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import docker
import pytest

from bench.cli import images as images_cli
from bench.images import inventory

GIB = 2**30
MIB = 2**20
BASE = 1 * GIB  # what every image here shares


@dataclass
class FakeImage:
    id: str
    tags: list[str]
    labels: dict[str, str]
    attrs: dict[str, Any] = field(default_factory=dict)


def image(
    n: int, tag: str, day: int, name: str = "torch", version: str | None = "", **labels: str
) -> FakeImage:
    found = {"bench.image": name, "bench.variant": "cpu", "bench.base_image": "bench-base:bookworm"}
    if version is not None:
        found["bench.version"] = version
    found.update(labels)
    created = f"2026-11-{day:02d}T10:00:00.123456789Z"
    attrs = {"Created": created, "Size": BASE + n * 100 * MIB, "own": n * 100 * MIB}
    return FakeImage(f"sha256:{n:064x}", [tag], found, attrs)


class FakeEngine:
    def __init__(self, *images: FakeImage, in_use: str = "") -> None:
        self.held = list(images)
        self.in_use = in_use
        self.images = self
        self.filters: list[dict[str, str]] = []

    def list(self, filters: dict[str, str]) -> list[FakeImage]:
        self.filters.append(filters)
        return [i for i in self.held if filters["label"] in i.labels]

    def remove(self, tag: str) -> None:
        for img in self.held:
            if tag in img.tags:
                if tag == self.in_use:
                    raise docker.errors.APIError(
                        "409", explanation=f"conflict: unable to remove {tag}: in use"
                    )
                img.tags.remove(tag)
                if not img.tags:
                    self.held.remove(img)
                return
        raise docker.errors.ImageNotFound(tag)

    def df(self) -> dict[str, Any]:
        """As the engine's /system/df: what each image shares, and all layers' size."""
        images = [{"Id": i.id, "SharedSize": i.attrs["Size"] - i.attrs["own"]} for i in self.held]
        return {"Images": images, "LayersSize": BASE + sum(i.attrs["own"] for i in self.held)}

    def tags(self) -> list[str]:
        return sorted(t for i in self.held for t in i.tags)


def engine() -> FakeEngine:
    return FakeEngine(
        image(1, "bench/torch:cpu-aaaa", 20),
        image(2, "bench/torch:cpu-bbbb", 24),  # newer: supersedes aaaa
        image(3, "bench/torch:cpu-cccc", 22),
        image(4, "bench/torch:cpu-dddd", 10, version="2.13"),  # another version: kept
        image(5, "bench/torch:cuda-eeee", 9, **{"bench.variant": "cuda"}),  # another variant
        image(6, "bench/torch:cpu-ffff", 8, **{"bench.base_image": "python:3.11-slim"}),
        image(7, "bench/tf:cpu-0000", 21, name="tf"),
        image(8, "bench/tf:cpu-1111", 5, name="tf", version=None),  # built before the label
        FakeImage("sha256:" + "9" * 64, ["someone/else:1"], {}, {"Size": 1, "own": 1}),
    )


def test_the_older_images_of_a_kind_are_superseded_and_no_other() -> None:
    fake = engine()
    held = inventory.held(fake)  # type: ignore[arg-type]
    assert fake.filters == [{"label": "bench.image"}]
    assert "someone/else:1" not in {h.tag for h in held}
    assert [h.tag for h in inventory.superseded(held)] == [
        "bench/torch:cpu-cccc",
        "bench/torch:cpu-aaaa",
    ]
    assert [h.tag for h in inventory.superseded(held, keep=2)] == ["bench/torch:cpu-aaaa"]
    assert inventory.unique_bytes(inventory.superseded(held)) == 400 * MIB  # 300 + 100
    with pytest.raises(ValueError, match="--keep"):
        inventory.superseded(held, keep=0)


def test_newer_is_when_the_engine_last_tagged_an_image() -> None:
    """BuildKit gives an image rebuilt from cached layers its first build's creation time:
    the tag time tells the two apart (and a time without a fraction sorts as a number)."""
    first, again = image(1, "bench/mlflow:cpu-aaaa", 20), image(2, "bench/mlflow:cpu-bbbb", 20)
    first.attrs["Metadata"] = {"LastTagTime": "2026-11-20T10:00:05Z"}
    again.attrs["Metadata"] = {"LastTagTime": "2026-11-20T10:00:05.000000001Z"}
    held = inventory.held(FakeEngine(again, first))  # type: ignore[arg-type]
    assert [h.tag for h in inventory.superseded(held)] == ["bench/mlflow:cpu-aaaa"]
    unset = image(3, "bench/mlflow:cpu-cccc", 21)  # the engine's zero time: never tagged
    unset.attrs["Metadata"] = {"LastTagTime": "0001-01-01T00:00:00Z"}
    held = inventory.held(FakeEngine(again, first, unset))  # type: ignore[arg-type]
    assert [h.tag for h in held] == ["bench/mlflow:cpu-cccc", *(h.tag for h in held[1:])]
    assert held[0].built.startswith("2026-11-21")


def test_a_second_tag_of_a_kept_image_is_kept_with_it() -> None:
    kept = image(2, "bench/torch:cpu-bbbb", 24)
    kept.tags.append("bench/torch:cpu-bbbb-again")
    held = inventory.held(FakeEngine(image(1, "bench/torch:cpu-aaaa", 20), kept))  # type: ignore[arg-type]
    assert [h.tag for h in inventory.superseded(held)] == ["bench/torch:cpu-aaaa"]
    assert inventory.unique_bytes(held) == 300 * MIB  # two images (100 + 200), three tags


def test_list_marks_the_superseded_and_says_what_prune_frees(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = engine()
    monkeypatch.setattr(images_cli, "client", lambda: fake)
    assert images_cli.main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TAG", "VERSION", "BASE", "BUILT", "SIZE", "UNIQUE"]
    rows = {line.split()[0]: line for line in out[2:-1]}
    assert len(rows) == 8
    assert rows["bench/torch:cpu-aaaa"].endswith("superseded")
    assert not rows["bench/torch:cpu-bbbb"].endswith("superseded")
    assert " 2.13 " in rows["bench/torch:cpu-dddd"] and " ? " in rows["bench/tf:cpu-1111"]
    assert "2026-11-24 10:00:00" in rows["bench/torch:cpu-bbbb"]
    assert "  1.1 GiB  100 MiB  superseded" in rows["bench/torch:cpu-aaaa"]
    assert out[-1] == (
        "8 bench image tag(s); 2 superseded: `bench images prune` frees at least 400 MiB "
        "(the layers only they hold)"
    )
    assert len(fake.tags()) == 9  # listing removes nothing


def test_prune_removes_the_superseded_and_a_dry_run_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = engine()
    monkeypatch.setattr(images_cli, "client", lambda: fake)
    assert images_cli.main(["prune", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "would remove bench/torch:cpu-cccc",
        "would remove bench/torch:cpu-aaaa",
        "2 superseded: removing them frees at least 400 MiB",
    ]
    assert len(fake.tags()) == 9
    assert images_cli.main(["prune"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "removed 2 of 2; 400 MiB freed"
    assert "bench/torch:cpu-aaaa" not in fake.tags() and "bench/torch:cpu-bbbb" in fake.tags()
    assert len(fake.tags()) == 7
    assert images_cli.main(["prune"]) == 0  # nothing left to remove
    assert capsys.readouterr().out.splitlines() == ["removed 0 of 0; 0 MiB freed"]


def test_an_image_a_container_uses_stays_and_prune_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = engine()
    fake.in_use = "bench/torch:cpu-cccc"
    monkeypatch.setattr(images_cli, "client", lambda: fake)
    assert images_cli.main(["prune"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("kept bench/torch:cpu-cccc: conflict: unable to remove")
    assert out[1:] == ["removed bench/torch:cpu-aaaa", "removed 1 of 2; 100 MiB freed"]
    assert "bench/torch:cpu-cccc" in fake.tags()


@pytest.mark.parametrize("keep", ["0", "-1", "two"])
def test_a_bad_keep_exits_2_naming_the_option(
    keep: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        images_cli.main(["prune", "--keep", keep])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--keep" in err and "at least 1" in err and repr(keep) in err
