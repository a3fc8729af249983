"""mode=generate: a causal LM's prefill and greedy decoding with its KV cache, timed by bench.

One timed window is one generation: ``batch_size`` prompts of ``prompt_len`` tokens through
the model (the prefill, which fills the cache and chooses the first new token), then
``new_tokens - 1`` decode steps, each one cached forward of the last token and the choice
of the next (as ``generate()`` does with ``max_new_tokens=new_tokens``).  End-of-sequence is
ignored: every window generates ``new_tokens`` tokens per prompt.  The session's own calls
(:class:`bench.trial.frameworks.base.Generation`) are timed here, so time to first token is
measured, not inferred:

- ``timing=step`` (auto's choice): the device is synchronized after the prefill and after
  each decode step, each step timed on the host's clock from the end of the one before;
- ``timing=events`` (torch on CUDA): device events after each of them, the host
  synchronizing only at the window's edges.

A window starts with the device synchronized and the cache empty (dropping the previous
one is outside it) and ends synchronized.  Warm-up: ``warmup_steps`` whole generations
before the first window (the first timed alone as ``compile_time_s``).  ``epochs`` windows
make a trial; repeats are trials, as in the other modes.

Figures per window (an epoch record): ``time_to_first_token_ms`` (the prefill),
``time_per_output_token_p50_ms``/``p90`` (the decode steps), ``prefill_tokens_per_s``
(prompt tokens over the prefill), ``decode_tokens_per_s`` (tokens chosen by the decode steps
over their time), the record's ``samples_per_s`` being every generated token over the whole
window and its step times the decode steps'.  Per trial, as ``trial_*`` metrics
(``trial_time_to_first_token_ms``...): the same over all windows (time to first token: their
median; per output token: the percentiles of every decode step; the rates: tokens over time
summed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.core import metrics
from bench.core.result import EpochRecord
from bench.trial.frameworks.base import DeviceEvents, Generation

WindowCallback = Callable[[float, float, int], dict[str, float]]
EpochCallback = Callable[[EpochRecord], None]


@dataclass
class Window:
    """One timed generation: its edges on the host's clock and its steps' times (s)."""

    start: float
    end: float
    prefill_s: float
    decode_s: list[float]


def generation(session: Generation, new_tokens: int, events: bool) -> Window:
    """Generate ``new_tokens`` tokens per prompt once, timing the prefill and every decode
    step (``events``: by the session's device events, the host waiting only at the end)."""
    perf, sync = time.perf_counter, session.sync
    session.start_generation()
    sync()
    if events:
        assert isinstance(session, DeviceEvents)
        marks = [session.mark()]
        start = perf()
        session.prefill()
        marks.append(session.mark())
        for _ in range(new_tokens - 1):
            session.decode()
            marks.append(session.mark())
        sync()
        end = perf()
        times = [session.between_s(a, b) for a, b in zip(marks, marks[1:], strict=False)]
        return Window(start, end, times[0], times[1:])
    start = perf()
    session.prefill()
    sync()
    last = perf()
    prefill_s = last - start
    decode_s = [0.0] * (new_tokens - 1)
    for i in range(new_tokens - 1):
        session.decode()
        sync()
        now = perf()
        decode_s[i] = now - last
        last = now
    return Window(start, last, prefill_s, decode_s)


def figures(windows: list[Window], batch: int, prompt_len: int) -> dict[str, float]:
    """The generation figures of one window or of a trial's windows (see the docstring)."""
    decode = np.asarray([t for w in windows for t in w.decode_s])
    prefill = sum(w.prefill_s for w in windows)
    p50, p90 = np.percentile(decode * 1e3, [50, 90]) if decode.size else (np.nan, np.nan)
    return {
        metrics.TIME_TO_FIRST_TOKEN_MS: float(np.median([w.prefill_s for w in windows]) * 1e3),
        metrics.TIME_PER_OUTPUT_TOKEN_P50_MS: float(p50),
        metrics.TIME_PER_OUTPUT_TOKEN_P90_MS: float(p90),
        metrics.PREFILL_TOKENS_PER_S: batch * prompt_len * len(windows) / prefill,
        metrics.DECODE_TOKENS_PER_S: batch * decode.size / float(decode.sum()),
    }


def flops_per_prompt(
    at_prompt: float, at_full: float, prompt_len: int, new_tokens: int
) -> tuple[float, float]:
    """(prefill, decode) FLOPs of one prompt's generation, from the forward's count on one
    sample of ``prompt_len`` tokens and of ``prompt_len + new_tokens``.

    A forward of L tokens counts a L + b L^2: the per-token layers, and attention over
    every position pair (b L^2).  The two counts give a and b.  The prefill is the forward
    of the prompt; decode step i (1 .. new_tokens - 1) is one token's layers and its query
    against the P + i keys in the cache: a + b (P + i).
    """
    p, q = prompt_len, prompt_len + new_tokens
    b = (at_full / q - at_prompt / p) / (q - p)
    a = at_prompt / p - b * p
    steps = new_tokens - 1
    return at_prompt, steps * (a + b * p) + b * steps * (steps + 1) / 2


def achieved(
    windows: list[Window], batch: int, prefill_flops: float, decode_flops: float
) -> dict[str, float]:
    """Achieved FLOP/s of the prefill and of the decode steps over ``windows`` (each
    generation's FLOPs per prompt, :func:`flops_per_prompt`)."""
    prefill = sum(w.prefill_s for w in windows)
    decode = sum(t for w in windows for t in w.decode_s)
    out: dict[str, float] = {
        metrics.PREFILL_ACHIEVED_FLOPS_PER_S: batch * prefill_flops * len(windows) / prefill
    }
    if decode > 0:
        out[metrics.DECODE_ACHIEVED_FLOPS_PER_S] = batch * decode_flops * len(windows) / decode
    return out


def warm_up(session: Generation, new_tokens: int, generations: int) -> tuple[float, float]:
    """(the first generation, the others) in seconds; none of it is timed as a result."""
    perf = time.perf_counter
    t0 = perf()
    if generations > 0:
        generation(session, new_tokens, events=False)
    t1 = perf()
    for _ in range(generations - 1):
        generation(session, new_tokens, events=False)
    return t1 - t0, perf() - t1


def timed_generations(
    session: Generation,
    epochs: int,
    batch: int,
    prompt_len: int,
    new_tokens: int,
    events: bool,
    on_epoch: EpochCallback | None = None,
    on_window: WindowCallback | None = None,
) -> tuple[list[EpochRecord], list[Window]]:
    """``epochs`` timed generations, each an epoch record (steps: the forward passes;
    samples: the tokens generated)."""
    records, windows = [], []
    for epoch in range(1, epochs + 1):
        w = generation(session, new_tokens, events)
        elapsed = w.end - w.start
        tokens = batch * new_tokens
        # the record's step times are the decode steps' (the prefill is time to first token)
        p50, p90, p99 = np.percentile(np.asarray(w.decode_s) * 1e3, [50, 90, 99])
        record = EpochRecord(
            epoch=epoch,
            steps=new_tokens,
            samples=tokens,
            epoch_time_s=elapsed,
            samples_per_s=tokens / elapsed,
            step_time_p50_ms=float(p50),
            step_time_p90_ms=float(p90),
            step_time_p99_ms=float(p99),
            loss=None,
        )
        record.extra.update(figures([w], batch, prompt_len))
        if on_window is not None:
            record.extra.update(on_window(w.start, w.end, tokens))
        records.append(record)
        windows.append(w)
        if on_epoch is not None:
            on_epoch(record)
    return records, windows


def summary(
    records: list[EpochRecord], windows: list[Window], batch: int, prompt_len: int
) -> dict[str, float]:
    """The trial's figures: the usual ones over its windows, and generation's own."""
    total = sum(r.epoch_time_s for r in records)
    steps = np.asarray([t for w in windows for t in w.decode_s]) * 1e3
    p50, p90, p99 = np.percentile(steps, [50, 90, 99])
    return {
        metrics.TRIAL_TIME_S: total,
        metrics.TRIAL_SAMPLES_PER_S: sum(r.samples for r in records) / total,
        metrics.TRIAL_STEP_TIME_P50_MS: float(p50),
        metrics.TRIAL_STEP_TIME_P90_MS: float(p90),
        metrics.TRIAL_STEP_TIME_P99_MS: float(p99),
        # the trial's figures as trial_* metrics: a window's, logged at its epoch's step, keep
        # the plain names, and MLflow's latest value of a name is its last step's
        **{f"trial_{k}": v for k, v in figures(windows, batch, prompt_len).items()},
    }
