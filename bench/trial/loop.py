"""A trial: a validated config in, a :class:`TrialResult` out.

This module knows nothing of Hydra, MLflow or how it was launched.  The timing loop is
:func:`_timed_epochs`; every window it reports starts and ends with ``session.sync()`` (and,
for a rank of a synchronous multi-process strategy, starts after a barrier with its peers).
Warm-up steps (which include graph tracing, autotuning and compilation: the first step is
timed on its own as ``compile_s``) always run before the first timed window.
"""

from __future__ import annotations

import dataclasses
import math
import resource
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.core import metrics, sysinfo
from bench.core.config import AUTO, AUTO_MIN_STEPS, BenchConfig, resolved_threads, samples_per_step
from bench.core.result import DIVERGED, ERROR, OK, OOM, EpochCallback, EpochRecord, TrialResult
from bench.trial import data as data_mod
from bench.trial import faults, frameworks
from bench.trial.frameworks import parity_hook
from bench.trial.frameworks.base import (
    DeviceEvents,
    EpochProbe,
    Framework,
    Generation,
    OutputCheck,
    PeakProbe,
    Session,
    TestLogits,
    TokenFlops,
    WindowBarrier,
)
from bench.trial.models.flops import TRAIN_FLOPS_PER_FORWARD
from bench.trial.monitors import Findings, Telemetry, contention
from bench.trial.monitors.contention import Gate
from bench.trial.runtime.hooks import NO_HOOKS, TrialHooks

# Builds the session from the loaded adapter, the config and the host data (a distributed
# rank's strategy session; the adapter's own ``prepare`` by default).
Prepare = Callable[[Framework, BenchConfig, Any], Session]
# Per-epoch figures over a closed timed window (start, end in perf_counter s, samples).
WindowCallback = Callable[[float, float, int], dict[str, float]]


def _percentiles_ms(times_s: list[float]) -> tuple[float, float, float]:
    p50, p90, p99 = np.percentile(np.asarray(times_s) * 1e3, [50, 90, 99])
    return float(p50), float(p90), float(p99)


# What timing=auto uses where the session has device events (torch on CUDA).
AUTO_TIMING = "step"


def timing_method(session: Session, cfg: BenchConfig) -> str:
    """The timing a trial of ``cfg`` uses on ``session``: ``events`` only where asked for
    (or auto's choice) and the session records device events; ``step`` otherwise."""
    wanted = AUTO_TIMING if cfg.timing == "auto" else cfg.timing
    if wanted == "events" and isinstance(session, DeviceEvents) and session.mark() is not None:
        return "events"
    return "step"


def _window(session: Session, steps: int, events: bool) -> tuple[float, float, list[float], float]:
    """One timed window of ``steps`` steps: (start, end) on the host's clock, each step's
    time and the time spent waiting for batches, in seconds.  The device is synchronized at
    both edges.  ``events``: step times are the device's, between events recorded after each
    step, and the host never waits for the device inside the window; otherwise the host
    synchronizes after every step, and a step runs from the end of the previous step to the
    end of this one (so it includes waiting for the batch)."""
    perf, next_batch, step, sync = time.perf_counter, session.next_batch, session.step, session.sync
    times = [0.0] * steps
    data_wait = 0.0
    if events:
        assert isinstance(session, DeviceEvents)
        mark = session.mark
        marks = [mark()]
        start = perf()
        for _ in range(steps):
            asked = perf()
            batch = next_batch()
            data_wait += perf() - asked
            step(batch)
            marks.append(mark())
        sync()
        end = perf()
        for i in range(steps):
            times[i] = session.between_s(marks[i], marks[i + 1])
        return start, end, times, data_wait
    start = last = perf()
    for i in range(steps):
        batch = next_batch()
        fetched = perf()
        step(batch)
        sync()
        now = perf()
        data_wait += fetched - last
        times[i] = now - last
        last = now
    return start, last, times, data_wait


def _timed_epochs(
    session: Session,
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    on_window: WindowCallback | None = None,
    step_flops_per_sample: float | None = None,
    probes: bool = True,
    gate: Gate | None = None,
) -> tuple[list[EpochRecord], list[float]]:
    """Run ``cfg.epochs`` timed epochs; return their records and every step time (s).
    ``probes=False``: no per-epoch probe (:class:`EpochProbe`), whose split steps train
    too (the parity check counts every update).

    How a step's time is taken (``cfg.timing``) is :func:`_window`'s; the time spent
    waiting for batches is also summed on its own as the epoch's ``data_time_s``.
    ``gate`` (contention=wait, :mod:`bench.trial.monitors.contention`): a window that other
    processes shared is discarded, and measured again once they let go (bounded).
    """
    perf = time.perf_counter
    steps = cfg.steps_per_epoch or session.steps_per_pass
    records: list[EpochRecord] = []
    all_steps: list[float] = []
    # A rank among several starts each window with its peers, after a barrier.
    barrier = session.barrier if isinstance(session, WindowBarrier) else None
    events = timing_method(session, cfg) == "events"
    for epoch in range(1, cfg.epochs + 1):
        while True:
            session.sync()
            if barrier is not None:
                barrier()
            if gate is not None:
                gate.before()
            start, last, times, data_wait = _window(session, steps, events)
            if gate is None or not gate.again():
                break
            session.take_mean_loss()  # the discarded window's losses
        # Everything below is outside the timed window.
        record = _record(session, cfg, epoch, (start, last, times, data_wait), on_window)
        loss = record.loss
        if step_flops_per_sample is not None:  # model FLOPs a step does per sample
            record.extra[metrics.ACHIEVED_FLOPS_PER_S] = (
                step_flops_per_sample * record.samples_per_s
            )
        evaluated = perf()
        scores = session.evaluate()
        if scores is not None:
            record.extra[metrics.TEST_ACCURACY], record.extra[metrics.TEST_LOSS] = scores
            record.extra[metrics.EVAL_TIME_S] = perf() - evaluated
        if probes and isinstance(session, EpochProbe):  # e.g. communication time
            record.extra.update(session.after_window())
        records.append(record)
        all_steps.extend(times)
        if on_epoch is not None:
            on_epoch(record)
        if barrier is None and loss is not None and not math.isfinite(loss):
            # Diverged: later epochs would time arithmetic on NaN, not training.  (The ranks
            # of a distributed trial go on together: one alone must not leave its peers
            # waiting at the next window's barrier.)
            break
    return records, all_steps


def _record(
    session: Session,
    cfg: BenchConfig,
    epoch: int,
    window: tuple[float, float, list[float], float],
    on_window: WindowCallback | None,
) -> EpochRecord:
    """The record of one closed timed window (:func:`_window`'s start, end, step times and
    data wait), with its mean training loss, telemetry and a distributed session's figures."""
    start, last, times, data_wait = window
    elapsed, steps = last - start, len(times)
    samples = steps * samples_per_step(cfg)
    p50, p90, p99 = _percentiles_ms(times)
    record = EpochRecord(
        epoch=epoch,
        steps=steps,
        samples=samples,
        epoch_time_s=elapsed,
        samples_per_s=samples / elapsed,
        step_time_p50_ms=p50,
        step_time_p90_ms=p90,
        step_time_p99_ms=p99,
        loss=session.take_mean_loss(),
    )
    record.extra[metrics.DATA_WAIT_S] = data_wait
    record.extra[metrics.DATA_WAIT_PCT] = 100.0 * data_wait / elapsed
    if on_window is not None:  # telemetry sampled in the background over the window
        record.extra.update(on_window(start, last, samples))
    per_epoch = getattr(session, "epoch_extra", None)
    if per_epoch is not None:  # a distributed session's own figures for this window
        record.extra.update(per_epoch(elapsed))
    return record


def _to_target(
    session: Session,
    cfg: BenchConfig,
    labels: np.ndarray,
    trained: int,
    on_epoch: EpochCallback | None,
    on_window: WindowCallback | None = None,
) -> tuple[list[EpochRecord], list[float], dict[str, float]]:
    """goal=accuracy: train in windows of ``goal.eval_every`` of a pass, evaluate on the
    held-out split after each (:func:`evaluate`, the logits scored against ``labels``), and
    stop at the first evaluation whose accuracy reaches ``goal.target`` or after
    ``goal.max_epochs`` passes.  ``trained``: the warm-up's steps, which trained the model
    too: the evaluations fall every eval_every of a pass counted from the first step.

    The clock (MLperf's rule, docs/accuracy.md): ``time_to_target_s`` runs from the start
    of the first timed window to the end of the evaluation that reached the target: every
    window, every evaluation and the bookkeeping between them; the warm-up (compilation)
    is before it, reported apart.  Return the records (one per evaluation), every step time
    and the trial's goal figures."""
    perf, goal = time.perf_counter, cfg.goal
    per_pass = session.steps_per_pass
    total = goal.max_epochs * per_pass
    k = 0  # the evaluations fall at round(k * eval_every * per_pass) steps, k = 1, 2, ...:
    # whole steps that do not drift off the passes (at 0.5 of 75 steps: 38, 75, 112, 150)
    events = timing_method(session, cfg) == "events"
    records: list[EpochRecord] = []
    all_steps: list[float] = []
    first, best, evaluations = 0.0, -math.inf, 0
    out: dict[str, float] = {metrics.TARGET_REACHED: 0.0}
    while trained < total:
        while round(k * goal.eval_every * per_pass) <= trained:
            k += 1
        steps = min(round(k * goal.eval_every * per_pass), total) - trained
        session.sync()
        window = _window(session, steps, events)
        first = first or window[0]
        trained += steps
        evaluations += 1
        record = _record(session, cfg, evaluations, window, on_window)
        accuracy, loss = evaluate(session, labels)
        evaluated = perf()
        record.extra.update(
            {
                metrics.TEST_ACCURACY: accuracy,
                metrics.TEST_LOSS: loss,
                metrics.EVAL_TIME_S: evaluated - window[1],
                metrics.EVAL_EPOCH: trained / per_pass,
                metrics.EVAL_ELAPSED_S: evaluated - first,
            }
        )
        records.append(record)
        all_steps.extend(window[2])
        if on_epoch is not None:
            on_epoch(record)
        best = max(best, accuracy)
        if accuracy >= goal.target:
            out.update(
                {
                    metrics.TARGET_REACHED: 1.0,
                    metrics.TIME_TO_TARGET_S: perf() - first,
                    metrics.EPOCHS_TO_TARGET: trained / per_pass,
                    metrics.EVALS_TO_TARGET: float(evaluations),
                    metrics.TRAIN_TIME_TO_TARGET_S: sum(r.epoch_time_s for r in records),
                    metrics.EVAL_TIME_TO_TARGET_S: sum(
                        r.extra[metrics.EVAL_TIME_S] for r in records
                    ),
                }
            )
            break
        if record.loss is not None and not math.isfinite(record.loss):
            break  # diverged (:func:`divergence`)
    out[metrics.BEST_TEST_ACCURACY] = best
    out[metrics.EPOCHS_TRAINED] = trained / per_pass
    return records, all_steps, out


def evaluate(session: Session, labels: np.ndarray) -> tuple[float, float]:
    """(top-1 accuracy, mean cross-entropy) on the held-out split: the session's logits
    scored by :func:`bench.trial.data.score`, the same arithmetic for every framework."""
    if not isinstance(session, TestLogits):
        raise TypeError(f"goal=accuracy: {type(session).__name__} hands over no test logits")
    return data_mod.score(session.test_logits(), labels)


def _warm_up(session: Session, steps: int) -> tuple[float, float]:
    """Return (first step incl. tracing/compilation, remaining warm-up steps) in seconds."""
    perf = time.perf_counter
    session.sync()
    t0 = perf()
    session.step(session.next_batch())
    session.sync()
    t1 = perf()
    for _ in range(steps - 1):
        session.step(session.next_batch())
    session.sync()
    session.take_mean_loss()  # warm-up losses are not reported
    return t1 - t0, perf() - t1


# steps_per_epoch=-1: untimed steps after the warm-up whose fastest step time sizes the
# window.  The warm-up's own later steps still carry one-time costs (lenet5's second step
# took 60 ms against 4.5 ms after it), so they are not used.  A fixed count: the ranks of a
# distributed trial step together.
PROBE_STEPS = 3
SPARE = 1.25  # auto windows aim this much above min_window_s


def _probe(session: Session) -> list[float]:
    perf, out = time.perf_counter, []
    for _ in range(PROBE_STEPS):
        t0 = perf()
        session.step(session.next_batch())
        session.sync()
        out.append(perf() - t0)
    session.take_mean_loss()
    return out


def auto_steps(cfg: BenchConfig, step_times: list[float]) -> int:
    """steps_per_epoch=-1: enough steps, at the probe's fastest step time, for a window of
    ``min_window_s`` (with a quarter to spare), at least AUTO_MIN_STEPS, at most the cap.
    The fastest, not the median, and a quarter, not less: TensorFlow's steps in the window
    ran about a fifth slower than its probe's median (lenet5, 2 cores), and the window
    must not come out short."""
    fastest = min(step_times) if step_times else 0.0
    wanted = (
        math.ceil(SPARE * cfg.min_window_s / fastest) if fastest > 0 else cfg.max_steps_per_epoch
    )
    return max(AUTO_MIN_STEPS, min(wanted, cfg.max_steps_per_epoch))


def _flops_per_sample(cfg: BenchConfig, forward: float | None) -> dict[str, float]:
    """Forward FLOPs per sample, the training estimate (3x forward: the backward pass is
    about twice the forward) and what one step of this trial does per sample."""
    if forward is None:
        return {}
    train = TRAIN_FLOPS_PER_FORWARD * forward
    step = train if cfg.mode == "train" else forward
    return {
        metrics.FLOPS_PER_SAMPLE: forward,
        metrics.TRAIN_FLOPS_PER_SAMPLE: train,
        "step_flops_per_sample": step,
    }


def _utilization(session: Session, cfg: BenchConfig, summary: dict[str, float]) -> dict[str, float]:
    """Model FLOP utilization on a GPU: the trial's achieved FLOP/s (bench's own FLOP
    counts) against the peak a matrix product reaches on the same device at the trial's
    compute precision, measured after the timed windows; {} where either is missing."""
    achieved = summary.get(metrics.TRIAL_ACHIEVED_FLOPS_PER_S)
    if not achieved or not isinstance(session, PeakProbe) or not session.device.startswith("cuda"):
        return {}
    peak = session.peak_flops_per_s(cfg.precision)
    if not peak:
        return {}
    return {metrics.PEAK_FLOPS_PER_S: peak, metrics.MFU_PCT: 100.0 * achieved / peak}


def divergence(records: list[EpochRecord], session: Session | None = None, planned: int = 0) -> str:
    """Why the training diverged ('' if it did not): the first epoch whose mean training
    loss is not finite; in inference (no loss), a model whose output is not finite, found by
    one more forward pass after the timed windows.  Its figures are still kept, but it is
    not an ok run."""
    if session is not None and all(r.loss is None for r in records):
        if isinstance(session, OutputCheck) and not session.output_finite():
            return (
                "the model's output is not finite (NaN or infinite values in a forward pass "
                "after the timed windows): its figures measure no real computation"
            )
    for r in records:
        if r.loss is not None and not math.isfinite(r.loss):
            total = max(planned, len(records))
            stopped = "; the trial stopped there" if len(records) < total else ""
            return (
                f"training diverged: the mean loss of epoch {r.epoch} of {total} is "
                f"{r.loss} (not finite){stopped}; try a lower optimizer.lr"
            )
    return ""


def _summary(records: list[EpochRecord], steps: list[float]) -> dict[str, float]:
    total_time = sum(r.epoch_time_s for r in records)
    samples = sum(r.samples for r in records)
    p50, p90, p99 = _percentiles_ms(steps)
    out: dict[str, float] = {
        metrics.TRIAL_TIME_S: total_time,
        metrics.TRIAL_SAMPLES_PER_S: samples / total_time,
        metrics.TRIAL_STEP_TIME_P50_MS: p50,
        metrics.TRIAL_STEP_TIME_P90_MS: p90,
        metrics.TRIAL_STEP_TIME_P99_MS: p99,
    }
    if records[-1].loss is not None:
        out[metrics.FINAL_LOSS] = records[-1].loss
    return out


def run_trial(
    cfg: BenchConfig,
    on_epoch: EpochCallback | None = None,
    workdir: Path | None = None,
    prepare: Prepare | None = None,
    rank: int = 0,
    agree: Callable[[int], int] | None = None,
    hooks: TrialHooks = NO_HOOKS,
) -> TrialResult:
    """Run one trial in this process (or this process's part of a distributed one: a rank
    passes its strategy's ``prepare``).  Never raises for a failing trial: the failure is
    the result.

    ``rank``: this process's place among a data-parallel trial's processes (its share of
    the parity check's batches, see :mod:`bench.trial.frameworks.parity_hook`); ``agree``: how
    the processes of a distributed trial settle on one auto step count (the largest).

    ``hooks``: what a check harness changes in this trial (:mod:`bench.trial.runtime.hooks`;
    the parity check's: its weights and batches, dropout and per-epoch probes off); the
    result names them (``hooks``, the tag ``bench.hooks``).  None by default: nothing else,
    and no environment variable, switches one on.

    Artifacts (telemetry samples and plots, profiler traces, operator tables) are written
    into ``workdir`` when one is given; ``result.files`` names them relative to it.

    A trial whose strategy starts processes of its own is not run here but by
    :func:`bench.trial.worker.execute`, which hands it to the strategy's runner; each of that
    runner's workers comes back here, so every worker runs this same timing loop.
    """
    result = TrialResult(
        status=ERROR, framework=cfg.framework.name, model=cfg.model.name, mode=cfg.mode
    )
    result.marks["trial_start"] = time.time()
    hooks.mark(result)
    result.environment.update(sysinfo.host_environment())
    adapter: Framework | None = None
    # Telemetry samples in background threads (GPU idle power while the framework imports).
    telemetry = Telemetry(cfg)
    try:
        cfg = faults.config(hooks.fault, cfg)
        result.threads = resolved_threads(cfg)
        frameworks.before_import(cfg, result.threads)
        t0 = time.perf_counter()
        adapter = frameworks.load(cfg.framework.name)
        result.phases[metrics.IMPORT_TIME_S] = time.perf_counter() - t0
        _check_version(cfg)
        adapter.configure(cfg, result.threads)

        t0 = time.perf_counter()
        parity = hooks.parity
        host = data_mod.load(cfg) if parity is None else parity_hook.batches(parity, cfg, rank)
        host = faults.data(hooks.fault, host)  # the convergence check's faults (none here)
        library = None
        if cfg.mode == "serve":  # LoadGen's sample library; the session sees one batch of it
            from bench.trial import serve

            library = serve.library(host)
            host = library.batches(cfg.serve.max_batch)
        result.phases[metrics.DATA_TIME_S] = time.perf_counter() - t0

        telemetry.before_device_use()  # idle power is measured before the device is used
        t0 = time.perf_counter()
        session = adapter.prepare(cfg, host) if prepare is None else prepare(adapter, cfg, host)
        faults.session(hooks.fault, session)
        result.phases[metrics.BUILD_TIME_S] = time.perf_counter() - t0
        if parity is not None:
            parity_hook.start(parity, cfg.framework.name, session)
        result.device = session.device
        result.num_parameters = int(session.num_parameters)
        result.environment.update(adapter.environment())
        result.environment["timing"] = timing_method(session, cfg)
        t0 = time.perf_counter()
        flops = _flops_per_sample(cfg, session.forward_flops_per_sample())
        result.phases[metrics.FLOPS_TIME_S] = time.perf_counter() - t0
        telemetry.start(session.device)
        if cfg.mode == "generate":  # a causal LM's generation windows: their own loop
            records = _generate(result, session, cfg, on_epoch, telemetry.window, flops)
        elif library is not None:  # mode=serve: LoadGen's runs against the batching SUT
            records = serve.serve(
                result, session, library, cfg, on_epoch, telemetry.window, workdir
            )
        else:
            records, cfg = _train_or_infer(
                result,
                session,
                cfg,
                on_epoch,
                telemetry.window,
                flops,
                agree,
                parity,
                rank,
                getattr(host, "test_y", None),
            )
        peak = session.peak_device_memory_mb()
        if peak is not None:
            result.summary[metrics.PEAK_DEVICE_MEM_MB] = peak
        _add(result, telemetry.stop(workdir))
        # After the samplers stop: the peak probe's work is not the trial's.
        result.summary.update(_utilization(session, cfg, result.summary))
        result.error = divergence(records, session, cfg.epochs)
        if result.error:  # a result of its own; further passes would measure nothing useful
            result.status = DIVERGED
        else:
            if cfg.breakdown or cfg.profile:  # extra passes after the headline timing
                from bench.trial import profiling

                _add(result, profiling.run(cfg, session, workdir))
            result.status = OK
    except Exception as exc:  # noqa: BLE001 - every failure becomes a result
        capped = cfg.launcher.memory_limit_mb > 0
        oom = isinstance(exc, MemoryError) or (adapter is not None and adapter.is_oom(exc, capped))
        # Under a cap, the framework's own libraries may not even map (torch's CUDA build
        # under 300 MB: "failed to map segment from shared object"): out of memory too.
        oom = oom or (capped and isinstance(exc, ImportError) and "failed to map" in str(exc))
        result.status = OOM if oom else ERROR
        result.error = "".join(traceback.format_exception(exc))[-20000:]
    finally:
        _add(result, telemetry.stop(workdir))  # stops the samplers if the trial failed
    result.summary[metrics.PEAK_HOST_RSS_MB] = _peak_rss_mb()
    return result


def _train_or_infer(
    result: TrialResult,
    session: Session,
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    on_window: WindowCallback,
    flops: dict[str, float],
    agree: Callable[[int], int] | None,
    parity: Any,
    rank: int,
    labels: np.ndarray | None = None,
) -> tuple[list[EpochRecord], BenchConfig]:
    """Warm-up, the auto window's probe and the timed epochs of mode=train or infer; the
    records and the config with the step count used."""
    if cfg.warmup_steps > 0:
        result.phases[metrics.COMPILE_TIME_S], result.phases[metrics.WARMUP_TIME_S] = _warm_up(
            session, cfg.warmup_steps
        )
    if cfg.goal.name == "accuracy":  # time to accuracy: full passes, an evaluation each
        return _train_to_target(result, session, cfg, on_epoch, on_window, labels), cfg
    auto = 0
    if cfg.steps_per_epoch == AUTO:
        probe = _probe(session)
        result.phases[metrics.PROBE_TIME_S] = sum(probe)
        auto = auto_steps(cfg, probe)
        if agree is not None:  # the ranks of a distributed trial take one count
            auto = agree(auto)
        cfg = dataclasses.replace(cfg, steps_per_epoch=auto)
    # The parity check counts every update: no window of its trials is measured again.
    gate = contention.gate(cfg) if parity is None else None
    result.marks["first_timed_step"] = time.time()
    records, steps = _timed_epochs(
        session,
        cfg,
        on_epoch,
        on_window,
        flops.get("step_flops_per_sample"),
        probes=parity is None,
        gate=gate,
    )
    result.marks["last_timed_step"] = time.time()
    result.epochs = records
    if parity is not None:
        losses = [float("nan") if r.loss is None else r.loss for r in records]
        parity_hook.finish(parity, cfg.framework.name, session, losses, rank)
    result.summary = _summary(records, steps)
    if gate is not None:
        _add(result, gate.findings())
    if auto:
        result.summary[metrics.STEPS_PER_EPOCH_USED] = auto
    if flops:
        result.summary[metrics.FLOPS_PER_SAMPLE] = flops[metrics.FLOPS_PER_SAMPLE]
        result.summary[metrics.TRAIN_FLOPS_PER_SAMPLE] = flops[metrics.TRAIN_FLOPS_PER_SAMPLE]
        result.summary[metrics.TRIAL_ACHIEVED_FLOPS_PER_S] = (
            flops["step_flops_per_sample"] * result.summary[metrics.TRIAL_SAMPLES_PER_S]
        )
    return records, cfg


def _train_to_target(
    result: TrialResult,
    session: Session,
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    on_window: WindowCallback,
    labels: np.ndarray | None,
) -> list[EpochRecord]:
    """goal=accuracy after the warm-up: :func:`_to_target`'s records and figures."""
    if labels is None:
        raise TypeError("goal=accuracy: the trial's data has no held-out labels")
    result.marks["first_timed_step"] = time.time()
    records, steps, goal = _to_target(
        session, cfg, labels, max(cfg.warmup_steps, 0), on_epoch, on_window
    )
    result.marks["last_timed_step"] = time.time()
    result.epochs = records
    result.summary = {**_summary(records, steps), **goal}
    return records


def _generate(
    result: TrialResult,
    session: Session,
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    on_window: WindowCallback,
    flops: dict[str, float],
) -> list[EpochRecord]:
    """mode=generate's warm-up and timed generations (:mod:`bench.trial.generate`)."""
    from bench.trial import generate

    if not isinstance(session, Generation):
        raise TypeError(f"mode=generate: {cfg.model.name}'s session cannot generate")
    events = timing_method(session, cfg) == "events"
    batch, prompt, new = cfg.batch_size, cfg.prompt_len, cfg.new_tokens
    result.phases[metrics.COMPILE_TIME_S], result.phases[metrics.WARMUP_TIME_S] = generate.warm_up(
        session, new, cfg.warmup_steps
    )
    result.marks["first_timed_step"] = time.time()
    records, windows = generate.timed_generations(
        session, cfg.epochs, batch, prompt, new, events, on_epoch, on_window
    )
    result.marks["last_timed_step"] = time.time()
    result.epochs = records
    result.summary = generate.summary(records, windows, batch, prompt)
    if flops:  # the model's, per sample of model.seq_len tokens
        result.summary[metrics.FLOPS_PER_SAMPLE] = flops[metrics.FLOPS_PER_SAMPLE]
        result.summary[metrics.TRAIN_FLOPS_PER_SAMPLE] = flops[metrics.TRAIN_FLOPS_PER_SAMPLE]
    if isinstance(session, TokenFlops):  # counted after the timed windows
        at_prompt, at_full = (
            session.forward_flops_of(prompt),
            session.forward_flops_of(prompt + new),
        )
        if at_prompt and at_full:
            prefill, decode = generate.flops_per_prompt(at_prompt, at_full, prompt, new)
            result.summary.update(generate.achieved(windows, batch, prefill, decode))
    return records


def _check_version(cfg: BenchConfig) -> None:
    """A trial asked for a framework version runs on that version or not at all."""
    import sys

    from bench.core import versions

    asked = versions.own_release(cfg.framework.version)
    module = sys.modules.get(versions.MODULES.get(cfg.framework.name, ""))
    if module is None:
        return
    full = str(getattr(module, "__version__", "?"))
    if asked and versions.base(full) != asked:
        raise RuntimeError(
            f"framework.version: {cfg.framework.name} {asked} was asked for, but this "
            f"environment ({sys.executable}) imported {versions.base(full)}; the trial did not run"
        )
    # framework.installed: what composition found in this interpreter (on another machine,
    # a Slurm node say, the framework may be another build: then the run would lie).
    composed = cfg.framework.installed.split(" ", 1)[0]
    if composed and versions.base(full) != versions.base(composed):
        raise RuntimeError(
            f"framework.installed: the configuration was composed with {cfg.framework.name} "
            f"{composed}, but this environment ({sys.executable}) imported {full}; the trial "
            "did not run"
        )


def _add(result: TrialResult, report: Findings) -> None:
    """Merge what telemetry or profiling reported: metrics, tags and artifact files."""
    result.summary.update(report.summary)
    result.environment.update(report.tags)
    result.files += report.files


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux and bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**20 if sys.platform == "darwin" else 2**10)
