"""The result record a trial returns, and the statuses it can end with."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.core.metrics import (
    EPOCH_TIME_S,
    LOSS,
    SAMPLES_PER_S,
    STEP_TIME_P50_MS,
    STEP_TIME_P90_MS,
    STEP_TIME_P99_MS,
)

OK = "ok"
OOM = "oom"
TIMEOUT = "timeout"
ERROR = "error"
KILLED = "killed"
# The kernel's out-of-memory killer ended the trial's container (at its memory limit).
HOST_OOM = "host_oom"
# A distributed trial's worker died, hung or lost its peers (bench.trial.distributed).
DIST_FAILURE = "dist_failure"
# Training diverged: an epoch's mean loss was not finite (NaN or infinite).  A result, not
# an ok run: never reused by a rerun, never compared by the report.
DIVERGED = "diverged"
STATUSES = (OK, OOM, TIMEOUT, ERROR, KILLED, HOST_OOM, DIST_FAILURE, DIVERGED)


@dataclass
class EpochRecord:
    """One epoch's timed window: ``steps`` steps of ``batch_size`` samples each.

    ``epoch_time_s`` runs from a device sync before the first step to a device sync after
    the last one.  ``step_time_*`` are percentiles of per-step times (each step also ends
    with a sync).  In ``mode=infer`` a step is one batch's forward pass, so the step times
    are per-batch latencies and ``loss`` is None.
    """

    epoch: int
    steps: int
    samples: int
    epoch_time_s: float
    samples_per_s: float
    step_time_p50_ms: float
    step_time_p90_ms: float
    step_time_p99_ms: float
    loss: float | None = None
    # Further per-epoch figures from other parts of a trial (telemetry, accuracy, FLOP/s...),
    # already named with their units; logged beside the ones above.
    extra: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            EPOCH_TIME_S: self.epoch_time_s,
            SAMPLES_PER_S: self.samples_per_s,
            STEP_TIME_P50_MS: self.step_time_p50_ms,
            STEP_TIME_P90_MS: self.step_time_p90_ms,
            STEP_TIME_P99_MS: self.step_time_p99_ms,
        }
        if self.loss is not None:
            out[LOSS] = self.loss
        out.update(self.extra)
        return out


# What a trial calls after each timed window (the sweep logs the window as it ends).
EpochCallback = Callable[[EpochRecord], None]


@dataclass
class TrialResult:
    status: str
    framework: str
    model: str
    mode: str
    device: str = ""
    threads: int = 0
    num_parameters: int = 0
    epochs: list[EpochRecord] = field(default_factory=list)
    # Whole-trial figures: trial_samples_per_s, trial_step_time_p50_ms, peak_host_rss_mb, ...
    summary: dict[str, float] = field(default_factory=dict)
    # Untimed phases: import_time_s, data_time_s, build_time_s, compile_time_s, warmup_time_s.
    phases: dict[str, float] = field(default_factory=dict)
    # Software and hardware seen by the trial: versions, CPU and GPU names.
    environment: dict[str, str] = field(default_factory=dict)
    error: str = ""
    # perf_counter-free wall-clock marks (time.time()) used to measure harness overhead.
    marks: dict[str, float] = field(default_factory=dict)
    # Artifacts the trial wrote into its working directory (telemetry samples and plots,
    # profiler traces, operator tables), relative to it; files or directories.
    files: list[str] = field(default_factory=list)
    # tuning=best: the effective value of every setting the search may set (logged as the
    # run's tuned.* params); empty otherwise.
    tuned: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """The result in ``data`` (a trial's ``result.json``, a spooled record's), every field
        of its type: a trial's result is untrusted, and a string where a number belongs (or a
        mapping where a string does) once failed only when MLflow or SQLite met it, after the
        record was spooled.  ValueError names the first field that is not."""
        data = dict(data)
        _check_types("result", data, _RESULT_TYPES)
        for i, epoch in enumerate(data.get("epochs", [])):
            _check_types(f"result.epochs[{i}]", epoch, _EPOCH_TYPES)
        data["epochs"] = [EpochRecord(**e) for e in data.get("epochs", [])]
        tuned = data.get("tuned", {})
        if not isinstance(tuned, dict) or not all(
            isinstance(k, str)
            and _SETTING.fullmatch(k)
            and isinstance(v, str)
            and _VALUE.fullmatch(v)
            for k, v in tuned.items()
        ):  # a trial's result is untrusted: these become param names and values
            raise ValueError("result.tuned: names and values must be short plain words")
        return cls(**data)


_SETTING = re.compile(r"[a-z_]{1,40}")
_VALUE = re.compile(r"[A-Za-z0-9_.-]{1,40}")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _mapping(check: Any) -> Any:
    return lambda v: (
        isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items())
    )


_STR = (lambda v: isinstance(v, str), "text")
_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number")
_NUM = (_number, "a number")
_NUMBERS = (_mapping(_number), "a mapping of names to numbers")
_RESULT_TYPES: dict[str, tuple[Any, str]] = {
    "status": _STR,
    "framework": _STR,
    "model": _STR,
    "mode": _STR,
    "device": _STR,
    "threads": _INT,
    "num_parameters": _INT,
    "epochs": (lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v), "a list"),
    "summary": _NUMBERS,
    "phases": _NUMBERS,
    "environment": (_mapping(_scalar), "a mapping of names to plain values"),
    "error": _STR,
    "marks": _NUMBERS,
    "files": (lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v), "names"),
}
_EPOCH_TYPES: dict[str, tuple[Any, str]] = {
    "epoch": _INT,
    "steps": _INT,
    "samples": _INT,
    EPOCH_TIME_S: _NUM,
    SAMPLES_PER_S: _NUM,
    STEP_TIME_P50_MS: _NUM,
    STEP_TIME_P90_MS: _NUM,
    STEP_TIME_P99_MS: _NUM,
    LOSS: (lambda v: v is None or _number(v), "a number or null"),
    "extra": _NUMBERS,
}


def _check_types(where: str, data: object, types: dict[str, tuple[Any, str]]) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a mapping")
    for key, value in data.items():
        if key in types and not types[key][0](value):
            raise ValueError(f"{where}.{key}: {type(value).__name__} where {types[key][1]} belongs")
