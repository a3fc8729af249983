"""The search: candidates of a framework's speed settings, each probed in its own process.

A greedy search over :func:`bench.trial.frameworks.spaces.space`: the incumbent starts as the
configuration as given; each setting in turn is tried at its alternatives with the others
at the incumbent's, and a candidate replaces the incumbent only by the rule of
:func:`beats`, checked twice: against the incumbent's first probe, then against both it and
a second probe of the incumbent run right after the candidate (so drift between two probes
cannot pass as a win).  Every candidate is a short trial of its own (``python -m
bench.trial.worker``, the same code that runs every trial): its own process, since threads
and oneDNN are fixed when a framework is imported; its own warm-up, so compilation stays
out of its timing; three auto-sized probe windows.  A candidate that fails (compile error,
out of memory, timeout) is a row of the table with its error.

Under mode=serve a candidate is a short serving trial of the same scenario: three LoadGen
performance runs of ``tuning.probe_s`` each in one process (``serve.runs``), each a window,
ranked by the scenario's figure (:func:`objective`): Offline's samples/s, SingleStream's p90
and MultiStream's p99 latency, Server's p99 at ``serve.target_qps`` (find_peak's probes too:
a search of whole bisections would cost one per candidate).  The same rule picks, with a
latency's windows compared the other way round.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import metrics
from bench.core.config import (
    AUTO,
    TUNING_GRACE_S,
    BenchConfig,
    TelemetryConfig,
    TuningConfig,
    to_dict,
)
from bench.core.result import OK, EpochRecord, TrialResult
from bench.trial.frameworks import spaces
from bench.trial.frameworks.spaces import Knob
from bench.trial.runtime import processes
from bench.trial.runtime.protocol import CONFIG, RESULT, read_result, write_config
from bench.trial.tuning.cache import refusal_key
from bench.trial.tuning.cache import refused as refused_settings

PROBE_WINDOWS = 3
# A serving probe's LoadGen run asks at most this many queries besides its duration (p99's
# early-stopping floor, 459, would take Server's default 50 QPS 9 s a run).
PROBE_QUERIES = 100
# A candidate's process may take this long beyond the search's remaining budget (one
# compilation can take a minute); the search stops trying new ones once its budget is spent.
GRACE_S = TUNING_GRACE_S


@dataclass
class Row:
    """One candidate of a search: its settings (the changed ones), its probe windows'
    samples/s, and what came of it."""

    settings: dict[str, Any]
    rates: list[float] = field(default_factory=list)
    compile_s: float = 0.0
    wall_s: float = 0.0
    status: str = OK
    error: str = ""
    chosen: bool = False
    note: str = ""
    # contention=wait's gate gave up on the probe: its windows were timed under load that did
    # not let go (bench.trial.monitors.contention), so its rates are the shared machine's
    loaded: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "median": self.median}


def beats(candidate: Row, incumbent: Row, lower: bool = False) -> bool:
    """The selection rule: a candidate replaces the incumbent only if its slowest probe
    window is faster than the incumbent's fastest, i.e. it wins by more than both probes'
    own spread; a tie or an overlap keeps the incumbent, which is the simpler setting (the
    configuration as given, or fewer changes from it).  ``lower``: the windows' figures are
    latencies (:class:`Objective`), the slowest window the highest."""
    if candidate.status != OK or not candidate.rates:
        return False
    if incumbent.status != OK or not incumbent.rates:
        return True
    if lower:
        return max(candidate.rates) < min(incumbent.rates)
    return min(candidate.rates) > max(incumbent.rates)


@dataclass(frozen=True)
class Objective:
    """What a search ranks candidates by: one figure of each probe window."""

    name: str  # as the search table heads its column
    metric: str  # the window's figure: "" for its samples/s, else a name in its extras
    lower: bool = False  # a latency: lower is better

    def figure(self, window: EpochRecord) -> float:
        return window.extra[self.metric] if self.metric else window.samples_per_s

    def shown(self, figure: float) -> str:
        return f"{figure:.2f}" if self.lower else f"{figure:.1f}"


SAMPLES_PER_S = Objective("samples/s", "")
# mode=serve: each scenario's figure, as the report's Serving section compares them.
SERVING = {
    "offline": Objective("Offline samples/s", metrics.SERVE_SAMPLES_PER_S),
    "single_stream": Objective("SingleStream p90 ms", metrics.SERVE_LATENCY_P90_MS, True),
    "multi_stream": Objective("MultiStream p99 ms", metrics.SERVE_LATENCY_P99_MS, True),
    "server": Objective("Server p99 ms at target_qps", metrics.SERVE_LATENCY_P99_MS, True),
}


def objective(cfg: BenchConfig) -> Objective:
    """What a search of ``cfg`` ranks by: training's and inference's samples/s, a serving
    scenario's own figure."""
    return SERVING[cfg.serve.scenario] if cfg.mode == "serve" else SAMPLES_PER_S


def probe_config(cfg: BenchConfig, settings: dict[str, Any]) -> BenchConfig:
    """The short trial that probes ``settings`` on ``cfg``'s workload."""
    warmup = max(cfg.warmup_steps, 2 if settings.get("compile", cfg.compile) else 1)
    cfg = spaces.apply(cfg, settings)
    if cfg.mode == "serve":  # PROBE_WINDOWS LoadGen runs, each a window
        s = cfg.serve
        queries = (
            0 if s.scenario == "offline" else min(s.min_queries or PROBE_QUERIES, PROBE_QUERIES)
        )
        cfg = dataclasses.replace(
            cfg,
            serve=dataclasses.replace(
                s,
                mode="performance",
                runs=PROBE_WINDOWS,
                min_duration_s=cfg.tuning.probe_s,
                min_queries=queries,
            ),
        )
    return dataclasses.replace(
        cfg,
        epochs=PROBE_WINDOWS,
        steps_per_epoch=AUTO,
        min_window_s=cfg.tuning.probe_s,
        warmup_steps=warmup,
        breakdown=False,
        profile=False,
        telemetry=TelemetryConfig(enabled=False),
        data=dataclasses.replace(cfg.data, evaluate=False),
        tuning=TuningConfig(),
    )


def run_probe(cfg: BenchConfig, timeout_s: float) -> TrialResult | str:
    """Run one probe trial in a child process; its result, or why there is none."""
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        workdir = Path(tmp)
        write_config(workdir / CONFIG, to_dict(cfg))
        env = {**os.environ, processes.ENV_PARENT_PID: str(os.getpid())}
        log = open(workdir / "log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.trial.worker", str(workdir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout_s:.0f} s"
        finally:
            processes.stop_group(proc, 2.0)  # nothing it started outlives it
            log.close()
        result = read_result(workdir / RESULT)
        if result is None:
            return f"the probe {processes.describe(proc.returncode)} without a result"
        return result


Probe = Callable[[BenchConfig, float], "TrialResult | str"]


def _row(
    settings: dict[str, Any], outcome: TrialResult | str, wall_s: float, goal: Objective
) -> Row:
    row = Row(settings=dict(settings), wall_s=wall_s)
    if isinstance(outcome, str):
        row.status, row.error = "error", outcome
        return row
    row.status = outcome.status
    if outcome.status == OK and any(
        goal.metric not in e.extra for e in outcome.epochs if goal.metric
    ):
        row.status, row.error = "error", f"a probe window without its {goal.name}"
        return row
    row.rates = [goal.figure(e) for e in outcome.epochs] if outcome.status == OK else []
    gate = outcome.environment.get("contention_gate", "")
    row.loaded = gate if gate.startswith("bound hit") else ""
    row.compile_s = outcome.phases.get(metrics.COMPILE_TIME_S, 0.0)
    if outcome.status != OK:
        row.error = outcome.error.strip().splitlines()[-1][:300] if outcome.error else ""
    return row


def search(
    cfg: BenchConfig,
    knobs: list[Knob],
    probe: Probe = run_probe,
    progress: Callable[[str], None] | None = None,
    refused: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[Row]]:
    """Search ``knobs`` for ``cfg``: the winning settings (only those changed from ``cfg``)
    and every candidate's row, in the order they ran.  ``refused``: settings the parity
    check refused (:func:`bench.trial.tuning.cache.refused`), skipped with their reason."""
    refused = refused_settings() if refused is None else refused
    goal = objective(cfg)
    started = time.monotonic()
    budget = cfg.tuning.budget_s
    rows: list[Row] = []

    def try_(settings: dict[str, Any]) -> Row:
        left = budget - (time.monotonic() - started)
        t0 = time.monotonic()
        outcome = probe(probe_config(cfg, settings), max(left, 0.0) + GRACE_S)
        row = _row(settings, outcome, time.monotonic() - t0, goal)
        rows.append(row)
        if progress is not None:
            shown = ", ".join(f"{k}={v}" for k, v in settings.items()) or "as given"
            figure = (
                f"{goal.shown(row.median)} {goal.name}"
                if row.rates
                else f"{row.status}: {row.error}"
            )
            figure += " (under load that did not let go)" if row.loaded else ""
            progress(f"tuning {cfg.framework.name}/{cfg.model.name}: {shown}: {figure}")
        return row

    best = try_({})
    bar = best  # what a candidate must beat: every probe of the incumbent so far
    pick: dict[str, Any] = {}
    for knob in knobs:
        for value in knob.values:
            why = refused.get(refusal_key(cfg.framework.name, cfg.model.name, knob.key, value))
            if why:
                rows.append(Row(settings={**pick, knob.key: value}, status="refused", note=why))
                continue
            if time.monotonic() - started >= budget:
                rows.append(
                    Row(settings={**pick, knob.key: value}, status="skipped", note="budget")
                )
                continue
            row = try_({**pick, knob.key: value})
            if not beats(row, bar, goal.lower):
                continue
            if best.status == OK:
                # A win is confirmed against the incumbent probed again right after it: a
                # machine that drifted between two probes (a neighbour's load ended, the
                # clock rose) must not pass as a faster setting.  Every probe of the
                # incumbent counts, so the candidate must beat its fastest window of any.
                again = try_(dict(pick))
                again.note = "the incumbent again, to confirm a win"
                bar = dataclasses.replace(bar, rates=bar.rates + again.rates)
                if not beats(row, bar, goal.lower):
                    row.note = "faster once, not against the incumbent probed again (drift)"
                    continue
            best, bar, pick = row, row, dict(row.settings)
    if best.status != OK:
        raise SearchFailed(rows)
    best.chosen = True
    return pick, rows


class SearchFailed(RuntimeError):
    """Every candidate failed: the trial fails, with the table."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        lines = [f"{r.settings or 'as given'}: {r.status}: {r.error}" for r in rows]
        super().__init__("tuning: every candidate failed\n" + "\n".join(lines))
