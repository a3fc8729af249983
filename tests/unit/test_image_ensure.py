"""bench.images.ensure with a fake engine: a missing image is built once however many
processes (here threads, each with its own lock handle) want it at the same time."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from bench import images


class FakeEngine:
    """Holds the tags `_build` made; `images.get` of a missing tag raises as Docker's does."""

    def __init__(self) -> None:
        self.tags: dict[str, Any] = {}
        self.images = self

    def get(self, tag: str) -> Any:
        if tag not in self.tags:
            raise docker.errors.ImageNotFound(tag)
        return self.tags[tag]


class FakeImage:
    id = "sha256:" + "1" * 64
    attrs = {"Size": 2**20, "RepoDigests": []}


def test_a_missing_image_is_built_once_for_concurrent_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    engine = FakeEngine()
    built: list[str] = []
    spec = images.BuildSpec("torch", "cpu", "bench-base:bookworm")
    plan = images.Plan(spec, "bench/torch:cpu-0123456789ab", {}, {}, "")
    monkeypatch.setattr(images, "plan", lambda spec, c: plan)

    def build(p: images.Plan) -> None:
        built.append(p.tag)
        time.sleep(0.3)  # the other callers arrive while this one builds
        engine.tags[p.tag] = FakeImage()

    monkeypatch.setattr(images, "_build", build)
    found: list[images.Image] = []

    def want() -> None:
        images._ensured.pop(spec, None)  # as a separate process: nothing remembered
        found.append(images.ensure(spec, engine, log=open("/dev/null", "w")))  # noqa: SIM115

    threads = [threading.Thread(target=want) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert built == [plan.tag]
    assert [f.tag for f in found] == [plan.tag] * 3
    assert sorted(f.build_s > 0 for f in found) == [False, False, True]
    images._ensured.pop(spec, None)
