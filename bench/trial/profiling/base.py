"""The protocol each framework's profiling module implements."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.core.config import BenchConfig
from bench.trial.profiling.operators import OpTime


@dataclass
class Profile:
    """What a profiled pass produced."""

    ops: list[OpTime]
    trace: str  # the trace file or directory, relative to the output directory
    # "device" (GPU kernel time) or "host" (CPU time of the ops themselves).
    timeline: str


class Profiler(Protocol):
    def splitter(self, session: Any, cfg: BenchConfig) -> Callable[[], dict[str, float]]:
        """A function that runs one step of ``session`` as separately timed calls, with a
        device sync after each, and returns each call's duration in seconds.  Anything it
        needs compiled is compiled (and run once) before it is returned."""

    def phases(self, calls: dict[str, float]) -> dict[str, float]:
        """The step's phases (``data``, ``forward``, ``backward``, ``optimizer``; in
        inference only the first two) from the calls' durations."""

    def profile(self, session: Any, cfg: BenchConfig, steps: int, outdir: Path) -> Profile:
        """``steps`` steps under the framework's profiler; the trace is written to ``outdir``."""


def derived_phases(calls: dict[str, float]) -> dict[str, float]:
    """The phases of a compiled step that cannot be cut where they meet (TF's and JAX's):
    ``data`` and ``forward`` timed alone; ``backward`` the forward-and-gradients call less the
    forward, ``optimizer`` the whole step less forward-and-gradients (training only)."""
    out = {"data": calls["data"], "forward": calls["forward"]}
    if "gradients" in calls:
        out["backward"] = calls["gradients"] - calls["forward"]
        out["optimizer"] = calls["step"] - calls["gradients"]
    return out
