"""The coordinator: runs a distributed trial from the trial's own process.

It starts the strategy's processes (:mod:`.launch`), streams one assembled epoch record as
soon as every timed rank has finished that epoch, and assembles ONE
:class:`~bench.core.result.TrialResult` from the ranks' own results (``WORKDIR/rank{i}/``):

- data-parallel strategies (each worker trains on its own samples): the global epoch's
  samples are the sum over workers and its time the slowest worker's window, so
  ``samples_per_s`` is the global rate; each worker's own rate is ``worker{i}_samples_per_s``;
- model parallelism (every sample passes through both stages): the global rate is the
  slowest stage's rate.

A process that dies, a rank that fails, or a trial still running at its deadline (90 % of
``timeout_s``, so that the coordinator reports before the launcher's own timeout) ends the
trial at once with status ``dist_failure`` (``timeout`` if every rank was still running
normally), naming each rank's state; every process is stopped before it returns.  A rank
whose training diverged (a non-finite loss) makes the whole trial ``diverged``, whatever the
others did after it (stopped by the coordinator, or failed when it left): never ``ok``, and
never a distributed failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path
from types import FrameType

from bench.core import metrics
from bench.core.config import BenchConfig, to_dict
from bench.core.result import (
    DIST_FAILURE,
    DIVERGED,
    ERROR,
    OK,
    TIMEOUT,
    EpochCallback,
    EpochRecord,
    TrialResult,
)
from bench.trial.distributed import launch, nodes
from bench.trial.distributed.base import CONFIG, Proc, Strategy, deadline_s, rank_command
from bench.trial.distributed.registry import STRATEGIES, load
from bench.trial.runtime.hooks import NO_HOOKS, TrialHooks
from bench.trial.runtime.protocol import (
    EVENTS,
    RESULT,
    STOPPED,
    EventReader,
    read_result,
    write_config,
)


class _Stop(BaseException):
    """SIGTERM arrived (the launcher is stopping the trial): stop the ranks, then exit."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def run(
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    workdir: Path | None,
    hooks: TrialHooks = NO_HOOKS,
) -> TrialResult:
    """Run the distributed trial ``cfg`` in ``workdir``; each rank runs with ``hooks``."""
    import tempfile

    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="bench-dist-") as tmp:
            result = _run(cfg, on_epoch, Path(tmp), hooks)
            result.files = []
            return result
    workdir.mkdir(parents=True, exist_ok=True)
    return _run(cfg, on_epoch, workdir, hooks)


def _run(
    cfg: BenchConfig, on_epoch: EpochCallback | None, workdir: Path, hooks: TrialHooks
) -> TrialResult:
    result = TrialResult(ERROR, cfg.framework.name, cfg.model.name, cfg.mode)
    result.marks["trial_start"] = time.time()
    strategy = load(cfg.distributed.name)
    write_config(workdir / CONFIG, to_dict(cfg))
    hooks.write(workdir)  # where the ranks read them (python -m bench.trial.distributed.rank)
    if cfg.nodes > 1:
        problem = nodes.allocation_problem(cfg)
        if problem:
            result.error = problem
            return result
        shutil.rmtree(workdir / nodes.NODES_DIR, ignore_errors=True)
        (workdir / nodes.NODES_DIR).mkdir()
        procs = [Proc("srun", nodes.step_command(cfg, workdir))]
    else:
        procs = strategy.processes(cfg, workdir)
    for p in procs:
        p.argv = p.argv or rank_command(workdir)
    timed = timed_ranks(strategy, cfg)
    for i in range(timed):
        (workdir / f"rank{i}").mkdir(exist_ok=True)
    for stale in workdir.glob("rank*/*"):
        if stale.is_file():
            stale.unlink()
    result.files = [f"{p.name}.log" for p in procs]
    env = dict(os.environ, PYTHONUNBUFFERED="1", BENCH_PARENT_PID="")
    stream = _Stream(workdir, timed, strategy, cfg, on_epoch)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    running: list[launch.Running] = []
    try:
        running = launch.spawn(procs, workdir, env)
        deadline = time.monotonic() + deadline_s(cfg)
        outcome = launch.wait(running, deadline, stream.poll)
        launch.stop_all(running, cfg.launcher.kill_grace_s if not outcome.ok else 1.0)
        running = []
        stream.poll()
        result.files += [f"{name}.log" for name in _node_logs(workdir)]
        return _assemble(cfg, strategy, workdir, timed, outcome, result)
    except _Stop:
        launch.stop_all(running, cfg.launcher.kill_grace_s)
        running = []
        sys.exit(128 + signal.SIGTERM)
    finally:
        if running:  # an exception or Ctrl-C: no process outlives the trial
            launch.stop_all(running, cfg.launcher.kill_grace_s)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def timed_ranks(strategy: Strategy, cfg: BenchConfig) -> int:
    """How many ranks time epochs: rank0..rank{n-1} (the others are servers)."""
    return int(getattr(strategy, "timed_ranks", lambda c: c.workers * c.nodes)(cfg))


class _Stream:
    """Emits each global epoch once every timed rank has logged it."""

    def __init__(
        self,
        workdir: Path,
        ranks: int,
        strategy: Strategy,
        cfg: BenchConfig,
        on_epoch: EpochCallback | None,
    ) -> None:
        self.readers = [EventReader(workdir / f"rank{i}" / EVENTS) for i in range(ranks)]
        self.strategy, self.on_epoch = strategy, on_epoch
        self.emitted: list[EpochRecord] = []

    def poll(self) -> None:
        for reader in self.readers:
            reader.poll()
        ready = min(len(r.epochs) for r in self.readers)
        while len(self.emitted) < ready:
            e = len(self.emitted)
            record = combine([r.epochs[e] for r in self.readers], data_parallel(self.strategy))
            self.emitted.append(record)
            if self.on_epoch is not None:
                self.on_epoch(record)


def data_parallel(strategy: Strategy) -> bool:
    """Whether the strategy splits the data (the ranks' rates add up), not the model: its
    spec's ``whole_batch`` (bench.core.strategy_configs), read by its name."""
    return not STRATEGIES[strategy.name].whole_batch


def combine(records: list[EpochRecord], summed: bool) -> EpochRecord:
    """One global epoch from each timed rank's record of it."""
    if len(records) == 1:
        return records[0]  # one process timed the whole job (it logged per-worker rates)
    time_s = max(r.epoch_time_s for r in records)
    samples = sum(r.samples for r in records) if summed else min(r.samples for r in records)
    losses = [r.loss for r in records if r.loss is not None]
    out = EpochRecord(
        epoch=records[0].epoch,
        steps=records[0].steps,
        samples=samples,
        epoch_time_s=time_s,
        samples_per_s=samples / time_s,
        step_time_p50_ms=max(r.step_time_p50_ms for r in records),
        step_time_p90_ms=max(r.step_time_p90_ms for r in records),
        step_time_p99_ms=max(r.step_time_p99_ms for r in records),
        loss=statistics.fmean(losses) if losses else None,
    )
    out.extra.update(records[0].extra)  # worker 0's own figures (telemetry runs there)
    for i, r in enumerate(records):
        out.extra[f"worker{i}_samples_per_s"] = r.samples_per_s
    return out


def _rank_result(workdir: Path, i: int) -> TrialResult | None:
    return read_result(workdir / f"rank{i}" / RESULT)


def _rank_state(workdir: Path, i: int, got: TrialResult | None) -> str:
    if got is not None:
        if got.status == OK:
            return "ok"
        last = got.error.strip().splitlines()[-1] if got.error.strip() else ""
        return f"{got.status}: {last[:300]}"
    if (workdir / f"rank{i}" / STOPPED).exists():
        return "stopped by the coordinator after another process failed"
    return "ended without a result (it died, or hung and was stopped)"


def _assemble(
    cfg: BenchConfig,
    strategy: Strategy,
    workdir: Path,
    ranks: int,
    outcome: launch.Outcome,
    result: TrialResult,
) -> TrialResult:
    got = [_rank_result(workdir, i) for i in range(ranks)]
    first = next((g for g in got if g is not None), None)
    if first is not None:
        result.device, result.threads = first.device, first.threads
        result.num_parameters = first.num_parameters
        result.environment.update(first.environment)
        result.phases.update(first.phases)
        result.marks.update({k: v for k, v in first.marks.items() if k != "trial_start"})
    result.environment["distributed"] = cfg.distributed.name
    result.environment["dist_processes"] = str(len(outcome.codes))
    if outcome.ok and all(g is not None and g.status == OK for g in got):
        results = [g for g in got if g is not None]
        _merge(result, results, data_parallel(strategy))
        result.status = OK
        return result
    states = [_rank_state(workdir, i, g) for i, g in enumerate(got)]
    statuses = {g.status for g in got if g is not None}
    diverged = [(i, g) for i, g in enumerate(got) if g is not None and g.status == DIVERGED]
    if diverged:
        result.status = DIVERGED  # what stopped the others; the trial measured nothing sound
    elif all(g is not None for g in got) and len(statuses) == 1 and statuses != {OK}:
        result.status = statuses.pop()  # every rank failed alike (a bug, out of memory)
    elif outcome.failed.endswith("at the deadline") and all(
        s.startswith("ended without") for s in states
    ):
        result.status = TIMEOUT
    else:
        result.status = DIST_FAILURE
    named = [f"worker {i} (rank{i}): {s}" for i, s in enumerate(states)]
    result.error = (
        f"distributed={cfg.distributed.name}: {outcome.failed or 'a rank failed'}; "
        f"every worker stopped within {deadline_s(cfg):g} s of its start\n"
        + "\n".join(named)
        + "\n\n"
        + "\n".join(_log_tails(workdir, [f[: -len(".log")] for f in result.files]))
    )[-20000:]
    for g in got:
        if g is not None and g.status != OK and g.error:
            result.error = (result.error + "\n\nfirst rank error:\n" + g.error)[-20000:]
            break
    if diverged:  # its own line first, as a single-process trial's
        i, g = diverged[0]
        why = (g.error.strip().splitlines() or ["diverged"])[0][:1000]
        line = f"worker {i} (rank{i}): {why}\n"
        result.error = line + result.error[-(20000 - len(line)) :]
    done = min((len(g.epochs) for g in got if g is not None), default=0)
    if done and all(g is not None for g in got):
        per_rank = [g.epochs for g in got if g is not None]
        result.epochs = [combine([r[e] for r in per_rank], True) for e in range(done)]
    return result


def _node_logs(workdir: Path) -> list[str]:
    """The node agents' logs and their processes' (``nodes/...``, without ``.log``)."""
    found = sorted((workdir / nodes.NODES_DIR).glob("**/*.log"))
    return [str(f.relative_to(workdir))[: -len(".log")] for f in found]


def _log_tails(workdir: Path, names: list[str], lines: int = 15) -> list[str]:
    out = []
    for name in names:
        try:
            text = (workdir / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            continue
        out.append(f"--- {name}.log (last {lines} lines) ---")
        out += text[-lines:]
    return out


def _merge(result: TrialResult, results: list[TrialResult], summed: bool) -> None:
    n = len(results[0].epochs)
    result.epochs = [combine([r.epochs[e] for r in results], summed) for e in range(n)]
    total_time = sum(e.epoch_time_s for e in result.epochs)
    total = sum(e.samples for e in result.epochs)
    result.summary.update(results[0].summary)  # worker 0's telemetry and step figures
    result.summary[metrics.TRIAL_TIME_S] = total_time
    result.summary[metrics.TRIAL_SAMPLES_PER_S] = total / total_time
    result.summary[metrics.GLOBAL_SAMPLES_PER_S] = total / total_time
    for key in (
        metrics.TRIAL_STEP_TIME_P50_MS,
        metrics.TRIAL_STEP_TIME_P90_MS,
        metrics.TRIAL_STEP_TIME_P99_MS,
    ):
        result.summary[key] = max(r.summary[key] for r in results)
    losses = [r.summary[metrics.FINAL_LOSS] for r in results if metrics.FINAL_LOSS in r.summary]
    if losses:
        result.summary[metrics.FINAL_LOSS] = statistics.fmean(losses)
    result.summary[metrics.PEAK_HOST_RSS_MB] = sum(
        r.summary.get(metrics.PEAK_HOST_RSS_MB, 0) for r in results
    )
    if len(results) > 1:
        for i, r in enumerate(results):
            result.summary[f"worker{i}_trial_samples_per_s"] = r.summary[
                metrics.TRIAL_SAMPLES_PER_S
            ]
    for key in (
        metrics.TIME_COMM_MS,
        metrics.PS_PUSH_MS,
        metrics.PS_PULL_MS,
        metrics.TIME_STEP_MS,
        metrics.TIME_LOCAL_STEP_MS,
    ):
        values = [r.summary[key] for r in results if key in r.summary]
        if values:
            result.summary[key] = statistics.fmean(values)
            if len(results) > 1:
                for i, r in enumerate(results):
                    if key in r.summary:
                        result.summary[f"worker{i}_{key}"] = r.summary[key]
    for i, r in enumerate(results):
        result.files += [f"rank{i}/{f}" for f in r.files]


def format_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))
