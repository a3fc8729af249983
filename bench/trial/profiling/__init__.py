"""Where the time goes: extra passes run after a trial's timed epochs, never during them.

- ``breakdown=true``: a pass of ``breakdown_steps(cfg)`` steps, each split into phases with a
  device sync between them (``time_data_ms``, ``time_forward_ms``, ``time_backward_ms``,
  ``time_optimizer_ms``), each paired with an ordinary step timed whole (``time_step_ms``),
  so the parts can be checked against a step measured on its own; ``breakdown_sum_pct``
  is the parts' sum in percent of ``time_step_ms`` (see :func:`breakdown`).  A distributed
  session measures its own instead (its ``breakdown``), or adds its exposed communication
  to the phases (its ``exposed_comm``: the JAX strategies).
- ``profile=true``: ``profile_steps(cfg)`` steps under the framework's profiler; the trace
  and the operator table (:mod:`.operators`) are written as artifacts and the per-category
  times logged as ``op_<category>_ms``.

One module per framework implements :class:`~bench.trial.profiling.base.Profiler`; it is
imported only for a trial that asks for one of these passes.
"""

from __future__ import annotations

import importlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS
from bench.trial.monitors.base import Findings
from bench.trial.profiling import operators
from bench.trial.profiling.base import Profiler

_MODULES = {name: spec.profiler for name, spec in FRAMEWORKS.items()}


def breakdown_steps(cfg: BenchConfig) -> int:
    """An epoch's worth of steps, at least 5 and at most 20."""
    return min(max(cfg.steps_per_epoch, 5), 20) if cfg.steps_per_epoch > 0 else 20


def profile_steps(cfg: BenchConfig) -> int:
    """An epoch's worth of steps, at most 5: traces grow quickly."""
    return min(cfg.steps_per_epoch, 5) if cfg.steps_per_epoch > 0 else 5


def breakdown(profiler: Profiler, session: Any, cfg: BenchConfig, steps: int) -> dict[str, float]:
    """``steps`` pairs of a split step and a whole one, back to back (which goes first
    alternates); the medians over the least disturbed quarter of the pairs.

    On a shared machine the slow pairs are other processes' doing.  The pairs that took
    least time (at least 3) are the least disturbed, and a pair's two steps ran under the
    same conditions, so each call of the split step and the whole step are taken as their
    medians over those pairs: the parts and the step they are compared with come from the
    same moments.
    """
    perf, sync = time.perf_counter, session.sync
    split = profiler.splitter(session, cfg)
    pairs: list[tuple[float, dict[str, float], float]] = []  # (pair's time, calls, whole)
    for i in range(steps):
        took: dict[str, float] = {}
        whole = 0.0
        for is_split in (True, False) if i % 2 == 0 else (False, True):
            sync()
            t0 = perf()
            if is_split:
                took = split()
                continue
            session.step(session.next_batch())
            sync()
            whole = perf() - t0
        pairs.append((sum(took.values()) + whole, took, whole))
    session.take_mean_loss()  # the losses of these extra steps are not reported
    calm = sorted(pairs, key=lambda pair: pair[0])[: max(3, steps // 4)]
    calls = {name: statistics.median(c[name] for _, c, _ in calm) for name in calm[0][1]}
    phases = profiler.phases(calls)
    step_s = statistics.median(w for _, _, w in calm)
    out = {metrics.TIME_PHASE_MS.of(phase): 1e3 * seconds for phase, seconds in phases.items()}
    out[metrics.TIME_STEP_MS] = 1e3 * step_s
    out[metrics.BREAKDOWN_SUM_PCT] = 100.0 * sum(phases.values()) / step_s
    out[metrics.BREAKDOWN_STEPS] = float(steps)
    return out


def load(framework: str) -> Profiler:
    profiler: Profiler = importlib.import_module(_MODULES[framework]).Profiler()
    return profiler


def run(cfg: BenchConfig, session: Any, workdir: Path | None) -> Findings:
    """The passes ``cfg`` asks for, on a session that has finished its timed epochs."""
    report = Findings()
    if not (cfg.breakdown or cfg.profile):
        return report
    own = getattr(session, "breakdown", None)
    if cfg.breakdown and own is not None:
        # A distributed session measures its own: exposed communication, push and pull.
        report.summary.update(own(cfg))
        return report
    profiler = load(cfg.framework.name)
    if cfg.breakdown:
        report.summary.update(breakdown(profiler, session, cfg, breakdown_steps(cfg)))
        method = getattr(profiler, "method", None)  # where some phases are derived, how
        if method is not None:
            report.tags["breakdown_method"] = method(cfg)
        # A data-parallel session whose all-reduces sit inside its compiled step (jax_dp,
        # jax_distributed): its exposed communication beside the phases.
        comm = getattr(session, "exposed_comm", None)
        if comm is not None:
            report.summary.update(comm(cfg))
    if cfg.profile:
        steps = profile_steps(cfg)
        with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
            outdir = workdir if workdir is not None else Path(tmp)
            outdir.mkdir(parents=True, exist_ok=True)
            got = profiler.profile(session, cfg, steps, outdir)
            rows = operators.table(got.ops)
            what = "GPU kernel time" if got.timeline == "device" else "CPU time"
            note = f"Self time is {what}, per operator, excluding operators it called."
            files = operators.write(rows, steps, outdir, session.device, note)
        report.summary.update(operators.metrics(rows, steps))
        report.summary["profile_steps"] = float(steps)
        report.tags["profile_timeline"] = got.timeline
        if workdir is not None:
            report.files += [got.trace, *files]
    return report
