"""A study's cell whose strategy needs a package ``bench setup`` builds (Horovod) is listed as
not run here where it is not built, with what to run, instead of refusing the whole sweep
(issue 52, item 5: seed004's plans exited 2 without Horovod)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from bench.checks.availability import not_here, split_unavailable
from bench.core.config import BenchConfig
from bench.core.strategies.horovod import HorovodConfig


def _horovod(built: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        if name == "horovod":
            return object() if built else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_a_horovod_cell_without_horovod_is_not_run_here(monkeypatch: pytest.MonkeyPatch) -> None:
    _horovod(False, monkeypatch)
    cfg = BenchConfig(device="cpu", skip_unavailable=True, distributed=HorovodConfig())
    assert not_here(cfg) == "needs horovod, not built here (`bench setup horovod` builds it, once)"
    plain = BenchConfig(device="cpu", skip_unavailable=True)
    kept, skipped = split_unavailable(
        [("framework=tf distributed=horovod repeat=0", [], cfg), ("framework=tf", [], plain)]
    )
    assert [label for label, _, _ in kept] == ["framework=tf"]
    assert skipped == [("framework=tf distributed=horovod", not_here(cfg))]
    assert not_here(cfg, slurm=True) == ""  # the cluster's environment may have it


def test_a_horovod_cell_with_horovod_built_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    _horovod(True, monkeypatch)
    cfg = BenchConfig(device="cpu", skip_unavailable=True, distributed=HorovodConfig())
    assert not_here(cfg) == ""
