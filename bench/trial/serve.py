"""mode=serve: a model served under MLPerf's LoadGen (``mlperf_loadgen``), one scenario a trial.

LoadGen is the load: its arrival process (SingleStream, MultiStream, Server's Poisson
arrivals, Offline's one big query), its statistics and its verdict (VALID/INVALID, and which
rule failed), all its own; bench never re-implements them.  bench supplies:

- the query sample library: bench's usual data bytes (:func:`library`), every sample in host
  memory before the run (LoadGen's load and unload calls have nothing left to do);
- the system under test, one batching policy for every framework (:class:`Batcher`): the
  samples LoadGen issues are queued; a worker thread takes a batch as soon as it is free, up
  to ``serve.max_batch`` samples, waiting at most ``serve.batch_timeout_ms`` after the first
  queued sample's arrival for more; it runs the framework session's ``predict``
  (:class:`bench.trial.frameworks.base.Predict`: host samples in, host outputs out), synchronizes
  the device, and only then tells LoadGen the samples are complete.

Before LoadGen starts, every batch size from 1 to ``serve.max_batch`` runs ``warmup_steps``
times (tracing and compilation happen there; the first call is ``compile_time_s``); the
single sample's and the full batch's times give LoadGen its expected latency and Offline's
expected QPS unless ``serve.expected_qps`` is set.

A causal LM (model=hf, or model=py with a cached forward) is served with LoadGen's token
latencies (``use_token_latencies``): a query is a prompt of ``prompt_len`` tokens from the
library, and the SUT's batch is one greedy generation of ``new_tokens`` tokens per prompt
with the session's KV cache (:class:`bench.trial.frameworks.base.Generation`, as mode=generate
runs it): after the prefill the SUT tells LoadGen each prompt's first token
(``FirstTokenComplete``), after the last decode step the whole answer with its token count
(``QuerySamplesComplete``, ``n_tokens``), so LoadGen reports time to first token and time per
output token (its ``(latency - first token latency) / (n_tokens - 1)``).  The batching policy
is the same: a batch is taken when the worker is free, and it generates all its tokens before
the next is taken (static batching: a prompt that arrives mid-generation waits for the whole
batch, and that wait is in its time to first token; continuous batching, which joins new
prompts between decode steps, would be a policy of its own in each framework's cache code,
not done).  Under Server, LoadGen's bounds are then on the time to first token
(``serve.latency_bound_ms``) and per output token (``serve.tpot_bound_ms``), at
``serve.latency_percentile``, as MLPerf's LLM benchmarks bound them.

One trial is one LoadGen run (``serve.mode=performance|accuracy``; ``serve.runs`` performance
runs back to back, each a window, the trial's figures the last one's) or, for Server,
``serve.mode=find_peak``: a bisection of performance runs for the highest target QPS that
LoadGen reports VALID at the latency bound (:func:`find_peak`).  Why not LoadGen's own
FindPeakPerformance mode, which the Python bindings do run: it refuses to start unless the
first target is already VALID, it writes one summary (its last probe's, not the peak's) and
logs only the QPS it tried, not each probe's latency, so the run's history could not show
every probe's QPS and p99.  Each LoadGen run is one record (a window, ``step`` = its index),
its files kept under ``loadgen/<run>/`` as artifacts (``mlperf_log_summary.txt``,
``mlperf_log_detail.txt``; ``mlperf_log_accuracy.json`` in accuracy mode).

The summary file is parsed as untrusted input (:func:`parse_summary`): bounded, each figure
checked, a malformed file an error naming the line.  A run shorter than MLPerf's own rules
(:data:`MLPERF_MIN_DURATION_S`, :data:`MLPERF_MIN_QUERIES`) says so in its ``serve.rules``
tag; LoadGen's own VALID/INVALID stays beside it, never replaced.

Stopping: LoadGen's ``StartTest`` runs in a thread of its own while this thread waits in
Python, so Ctrl-C and the inline launcher's timeout arrive here; the SUT then answers every
queued and later query at once (LoadGen has no call to abort a test, so it ends at its own
pace: its minimum duration) and the threads are joined before the exception goes on.
LoadGen's ``max_duration`` is the trial's time left, so a run never outlives its timeout.
"""

from __future__ import annotations

import functools
import math
import re
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.core import metrics
from bench.core.config import BenchConfig, early_stopping_queries
from bench.core.result import EpochRecord, TrialResult
from bench.trial.data import ArrayBatches, LabelledData, SequenceBatches

EpochCallback = Callable[[EpochRecord], None]
WindowCallback = Callable[[float, float, int], dict[str, float]]
# A framework's forward on host samples, returning host outputs (the device synchronized).
Predict = Callable[[np.ndarray], np.ndarray]
# Tells LoadGen that samples (their response ids) are done; ``outputs`` their rows, or None
# for samples answered without running (a drained SUT).
Complete = Callable[[Sequence[int], "np.ndarray | None"], None]
# A causal LM's greedy generation on host prompts (N, prompt_len) int64: the new tokens
# (N, new_tokens) int64 on the host; it calls ``first`` with the first new tokens (N, 1) as
# soon as the prefill has chosen them (on the host, so the device has finished them).
Generate = Callable[[np.ndarray, Callable[[np.ndarray], None]], np.ndarray]

# bench's scenario names and LoadGen's.
SCENARIOS = {
    "single_stream": "SingleStream",
    "multi_stream": "MultiStream",
    "server": "Server",
    "offline": "Offline",
}
MODES = {"performance": "PerformanceOnly", "accuracy": "AccuracyOnly", "find_peak": ""}

# MLPerf Inference's own rules (LoadGen's mlperf.conf, v4 and later): every scenario runs at
# least 600 s; MultiStream at least 662 queries, Offline's one query at least 24,576 samples.
MLPERF_MIN_DURATION_S = 600.0
MLPERF_MIN_QUERIES = {"multi_stream": 662, "offline": 24_576}

# The figures a serving trial records, declared in bench.core.metrics: a LoadGen run's (a
# window's, logged at step = the run's index) and the trial's (trial_<name>) never share a name.
SERVE_SAMPLES_PER_S = metrics.SERVE_SAMPLES_PER_S  # LoadGen's throughput figure
SERVE_LATENCY_P50_MS = metrics.SERVE_LATENCY_P50_MS
SERVE_LATENCY_P90_MS = metrics.SERVE_LATENCY_P90_MS
SERVE_LATENCY_P99_MS = metrics.SERVE_LATENCY_P99_MS
SERVE_LATENCY_P999_MS = metrics.SERVE_LATENCY_P999_MS
SERVE_LATENCY_MEAN_MS = metrics.SERVE_LATENCY_MEAN_MS
SERVE_VALID = metrics.SERVE_VALID  # 1: LoadGen's VALID, 0: INVALID
SERVE_TARGET_QPS = metrics.SERVE_TARGET_QPS  # Server: the offered load
SERVE_SCHEDULED_QPS = metrics.SERVE_SCHEDULED_QPS  # Server: the load LoadGen scheduled
SERVE_MEAN_BATCH = metrics.SERVE_MEAN_BATCH  # samples per batch the SUT ran
SERVE_PEAK_QPS = metrics.SERVE_PEAK_QPS  # find_peak: the highest VALID target QPS (0: none)
SERVE_PEAK_LATENCY_P99_MS = metrics.SERVE_PEAK_LATENCY_P99_MS  # find_peak: that run's p99
SERVE_PROBES = metrics.SERVE_PROBES  # find_peak: LoadGen runs made
# A causal LM's token latencies (ms) by percentile, and its tokens/s.
SERVE_TTFT_MS = {
    50.0: metrics.SERVE_TTFT_P50_MS,
    90.0: metrics.SERVE_TTFT_P90_MS,
    99.0: metrics.SERVE_TTFT_P99_MS,
}
SERVE_TPOT_MS = {
    50.0: metrics.SERVE_TPOT_P50_MS,
    90.0: metrics.SERVE_TPOT_P90_MS,
    99.0: metrics.SERVE_TPOT_P99_MS,
}
SERVE_TOKENS_PER_S = metrics.SERVE_TOKENS_PER_S
# Each window figure's trial figure (the trial's run's, or find_peak's peak run's).
TRIAL_OF: dict[str, str] = {
    SERVE_SAMPLES_PER_S: metrics.TRIAL_SERVE_SAMPLES_PER_S,
    SERVE_LATENCY_P50_MS: metrics.TRIAL_SERVE_LATENCY_P50_MS,
    SERVE_LATENCY_P90_MS: metrics.TRIAL_SERVE_LATENCY_P90_MS,
    SERVE_LATENCY_P99_MS: metrics.TRIAL_SERVE_LATENCY_P99_MS,
    SERVE_LATENCY_P999_MS: metrics.TRIAL_SERVE_LATENCY_P999_MS,
    SERVE_LATENCY_MEAN_MS: metrics.TRIAL_SERVE_LATENCY_MEAN_MS,
    SERVE_VALID: metrics.TRIAL_SERVE_VALID,
    SERVE_MEAN_BATCH: metrics.TRIAL_SERVE_MEAN_BATCH,
    SERVE_TARGET_QPS: metrics.TRIAL_SERVE_TARGET_QPS,
    SERVE_SCHEDULED_QPS: metrics.TRIAL_SERVE_SCHEDULED_QPS,
    metrics.SERVE_TTFT_P50_MS: metrics.TRIAL_SERVE_TTFT_P50_MS,
    metrics.SERVE_TTFT_P90_MS: metrics.TRIAL_SERVE_TTFT_P90_MS,
    metrics.SERVE_TTFT_P99_MS: metrics.TRIAL_SERVE_TTFT_P99_MS,
    metrics.SERVE_TPOT_P50_MS: metrics.TRIAL_SERVE_TPOT_P50_MS,
    metrics.SERVE_TPOT_P90_MS: metrics.TRIAL_SERVE_TPOT_P90_MS,
    metrics.SERVE_TPOT_P99_MS: metrics.TRIAL_SERVE_TPOT_P99_MS,
    SERVE_TOKENS_PER_S: metrics.TRIAL_SERVE_TOKENS_PER_S,
}


def trial_name(name: str) -> str:
    """The trial figure of a serving window figure."""
    return TRIAL_OF[name]


# --- the query sample library ---------------------------------------------------------------


@dataclass
class Library:
    """Every sample a LoadGen run may ask for, in host memory, in bench's layout (images
    (N, 3, H, W) float32, normalized as the framework loaders normalize them; tokens
    (N, L) int64); ``labels`` where the data set has them (else None)."""

    samples: np.ndarray
    labels: np.ndarray | None

    def __len__(self) -> int:
        return len(self.samples)

    def batches(self, max_batch: int) -> ArrayBatches | SequenceBatches:
        """What the framework session is prepared with: the first ``max_batch`` samples as
        one batch (its warm-up and shape; the served samples come from the library)."""
        x = self.samples[:max_batch]
        y = self.labels[:max_batch] if self.labels is not None else np.zeros(len(x), dtype=np.int64)
        if x.ndim == 4:
            return ArrayBatches([x], [y])
        return SequenceBatches("serve", [x], [(y,)])


def library(host: ArrayBatches | LabelledData | SequenceBatches) -> Library:
    """The query sample library of ``host`` data: synthetic batches concatenated; a labelled
    set's held-out split, normalized with its training statistics (as the loaders do)."""
    if isinstance(host, ArrayBatches):
        return Library(np.concatenate(host.images), np.concatenate(host.labels))
    if isinstance(host, SequenceBatches):
        return Library(np.concatenate(host.inputs), None)
    x = host.test_x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    mean = np.asarray(host.mean, np.float32).reshape(1, 3, 1, 1)
    std = np.asarray(host.std, np.float32).reshape(1, 3, 1, 1)
    return Library(np.ascontiguousarray((x - mean) / std), host.test_y.astype(np.int64))


# --- the system under test's batching policy ------------------------------------------------


@dataclass
class Batcher:
    """The SUT: samples queued as LoadGen issues them; a worker thread runs them in batches.

    A batch is taken as soon as the worker is free and a sample is queued: up to
    ``max_batch`` samples, waiting for more until ``timeout_s`` after the first queued
    sample's arrival (0: no wait, whatever is queued).  ``predict`` runs the batch (its
    outputs are on the host, so the device has finished), ``sync`` synchronizes the device
    anyway, then ``complete`` tells LoadGen.  A failing ``predict`` keeps its exception
    (``error``) and drains: every queued and later sample is answered at once, unrun, so
    that LoadGen ends and the trial can report the failure."""

    predict: Predict
    samples: np.ndarray
    max_batch: int
    timeout_s: float
    complete: Complete
    sync: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.perf_counter
    # A causal LM's batches: ``generate`` runs them instead of ``predict``, and ``first``
    # tells LoadGen each sample's first token as soon as the prefill has chosen it.
    generate: Generate | None = None
    first: Complete | None = None
    # What ran: each batch's time (take to complete, s) and size.
    batch_s: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    error: BaseException | None = None
    _queue: deque[tuple[int, int, float]] = field(default_factory=deque)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stopping: bool = False
    _draining: bool = False
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopping = self._draining = False
        self._thread = threading.Thread(target=self._work, name="bench-serve-sut", daemon=True)
        self._thread.start()

    def issue(self, items: Sequence[tuple[int, int]]) -> None:
        """LoadGen's IssueQuery: (response id, library index) pairs, queued."""
        now = self.clock()
        with self._cond:
            if not self._draining:
                self._queue.extend((rid, index, now) for rid, index in items)
                self._cond.notify()
                return
        self.complete([rid for rid, _ in items], None)

    def flush(self) -> None:
        """LoadGen's FlushQueries: nothing is held back beyond the timeout; nothing to do."""

    def drain(self) -> None:
        """Answer every queued and later sample at once, unrun (a stop, or a failure)."""
        with self._cond:
            self._draining = True
            pending = [rid for rid, _, _ in self._queue]
            self._queue.clear()
            self._cond.notify_all()
        if pending:
            self.complete(pending, None)

    def stop(self) -> None:
        """End the worker (after draining what is queued) and join it."""
        self.drain()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _take(self) -> list[tuple[int, int, float]] | None:
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if not self._queue:
                return None
            deadline = self._queue[0][2] + self.timeout_s
            while len(self._queue) < self.max_batch and not self._draining:
                left = deadline - self.clock()
                if left <= 0:
                    break
                self._cond.wait(left)
            n = min(self.max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def _work(self) -> None:
        while (batch := self._take()) is not None:
            ids = [rid for rid, _, _ in batch]
            if self.error is not None:
                self.complete(ids, None)
                continue
            start = self.clock()
            x = self.samples[[index for _, index, _ in batch]]
            try:
                if self.generate is not None:
                    out = self.generate(x, functools.partial(self._first, ids))
                else:
                    out = self.predict(x)
                self.sync()
            except BaseException as exc:  # noqa: BLE001 - the trial reports it after LoadGen
                self.error = exc
                self.complete(ids, None)
                self.drain()
                continue
            self.complete(ids, out)
            self.batch_s.append(self.clock() - start)
            self.batch_sizes.append(len(batch))

    def _first(self, ids: Sequence[int], tokens: np.ndarray) -> None:
        if self.first is not None:
            self.first(ids, tokens)


# --- LoadGen's summary, as untrusted input ---------------------------------------------------


class SummaryError(ValueError):
    """A LoadGen summary that cannot be read: the message names the file's line or field."""


MAX_SUMMARY_BYTES = 1 << 20
_LINE = re.compile(r"^\s*([^:]{1,120}?)\s*:\s*(.{0,200}?)\s*$")
_PERCENTILE = re.compile(r"^(\d{1,2}(?:\.\d{1,2})?) percentile latency \(ns\)$")
# use_token_latencies: the first token's latency and the time per output token (LoadGen
# names the latter "time to output token" in its percentile lines); none under Offline.
_FIRST_TOKEN = re.compile(r"^(\d{1,2}(?:\.\d{1,2})?) percentile first token latency \(ns\)$")
_PER_TOKEN = re.compile(r"^(\d{1,2}(?:\.\d{1,2})?) percentile time to output token \(ns\)$")
_CHECKS = {
    "Performance constraints satisfied": "performance",
    "Min duration satisfied": "min_duration",
    "Min queries satisfied": "min_queries",
    "Early stopping satisfied": "early_stopping",
}
# The scenario's headline throughput, as LoadGen names it (MultiStream has none).
_THROUGHPUT = {
    "SingleStream": "QPS w/ loadgen overhead",
    "Server": "Completed samples per second",
    "Offline": "Samples per second",
}
# Tokens per second under use_token_latencies, as each scenario names it.
_TOKENS = {
    "SingleStream": "TPS w/ loadgen overhead",
    "Server": "Completed tokens per second",
    "Offline": "Tokens per second",
}


@dataclass
class Summary:
    """What ``mlperf_log_summary.txt`` says: the scenario and mode, LoadGen's verdict and
    each of its rules (``checks``: rule -> satisfied), the throughput (samples/s; None for
    MultiStream, which reports latencies only), latency percentiles (ms, by percentile
    in %), the mean latency (ms), and the parameters it ran with."""

    scenario: str
    mode: str
    valid: bool
    checks: dict[str, bool]
    samples_per_s: float | None
    latency_ms: dict[float, float]
    mean_latency_ms: float
    scheduled_qps: float | None
    samples_per_query: int
    target_qps: float
    target_latency_ms: float
    # use_token_latencies (a causal LM): first token's latency and time per output token
    # percentiles (ms, by percentile in %; empty where LoadGen reports none), tokens/s.
    first_token_ms: dict[float, float] = field(default_factory=dict)
    per_token_ms: dict[float, float] = field(default_factory=dict)
    tokens_per_s: float | None = None

    @property
    def failed(self) -> list[str]:
        """The rules LoadGen found unsatisfied, in its order."""
        return [rule for rule, ok in self.checks.items() if not ok]

    def verdict(self) -> str:
        """``VALID``, or ``INVALID (rule, rule)``."""
        if self.valid:
            return "VALID"
        return f"INVALID ({', '.join(self.failed)})" if self.failed else "INVALID"


def _number(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SummaryError(f"mlperf_log_summary.txt: {key}: not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise SummaryError(f"mlperf_log_summary.txt: {key}: not a finite number >= 0: {text!r}")
    return value


def parse_summary(text: str) -> Summary:
    """Read a LoadGen summary; refuse one that is too long, lacks a field every summary
    has, or holds a figure that is not a finite number >= 0 (:class:`SummaryError`)."""
    if len(text) > MAX_SUMMARY_BYTES:
        raise SummaryError(f"mlperf_log_summary.txt: longer than {MAX_SUMMARY_BYTES} bytes")
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and not line.lstrip().startswith("*"):
            fields.setdefault(match.group(1), match.group(2))

    def need(key: str) -> str:
        if key not in fields:
            raise SummaryError(f"mlperf_log_summary.txt: no {key!r} line")
        return fields[key]

    scenario = need("Scenario")
    if scenario not in SCENARIOS.values():
        raise SummaryError(f"mlperf_log_summary.txt: Scenario: unknown {scenario!r}")
    result = need("Result is")
    if result not in ("VALID", "INVALID"):
        raise SummaryError(f"mlperf_log_summary.txt: Result is: {result!r}, not VALID/INVALID")
    checks: dict[str, bool] = {}
    for label, rule in _CHECKS.items():
        if label in fields:
            answer = fields[label]
            if answer not in ("Yes", "NO"):
                raise SummaryError(f"mlperf_log_summary.txt: {label}: {answer!r}, not Yes/NO")
            checks[rule] = answer == "Yes"
    latency: dict[float, float] = {}
    first_token: dict[float, float] = {}
    per_token: dict[float, float] = {}
    for key, value in fields.items():
        for pattern, into in (
            (_PERCENTILE, latency),
            (_FIRST_TOKEN, first_token),
            (_PER_TOKEN, per_token),
        ):
            match = pattern.match(key)
            if match:
                into[float(match.group(1))] = _number(key, value) / 1e6
    for p in (50.0, 90.0, 99.0):
        if p not in latency:
            raise SummaryError(f"mlperf_log_summary.txt: no {p:.2f} percentile latency line")
    throughput = _THROUGHPUT.get(scenario)
    scheduled = fields.get("Scheduled samples per second")
    target_latency = fields.get("target_latency (ns)", "0")
    tokens = fields.get(_TOKENS.get(scenario, ""))
    return Summary(
        scenario=scenario,
        mode=need("Mode"),
        valid=result == "VALID",
        checks=checks,
        samples_per_s=_number(throughput, need(throughput)) if throughput else None,
        latency_ms=latency,
        mean_latency_ms=_number("Mean latency (ns)", need("Mean latency (ns)")) / 1e6,
        scheduled_qps=_number("Scheduled samples per second", scheduled) if scheduled else None,
        samples_per_query=int(_number("samples_per_query", need("samples_per_query"))),
        target_qps=_number("target_qps", need("target_qps")),
        target_latency_ms=_number("target_latency (ns)", target_latency) / 1e6,
        first_token_ms=first_token,
        per_token_ms=per_token,
        tokens_per_s=_number(_TOKENS[scenario], tokens) if tokens is not None else None,
    )


# --- one LoadGen run -------------------------------------------------------------------------


@dataclass
class Expected:
    """What the warm-up measured: one sample's and a full batch's forward (s)."""

    single_s: float
    batch_s: float
    max_batch: int

    @property
    def samples_per_s(self) -> float:
        return self.max_batch / max(self.batch_s, 1e-6)


# LoadGen's latency percentile of each scenario (Server's is serve.latency_percentile).
PERCENTILES = {"single_stream": 0.9, "multi_stream": 0.99, "offline": 0.9}
# LoadGen's early stopping passes a run at a percentile p only with at least
# log(1 - 0.99) / log(p) queries (every one of them within the bound): 459 at p99, 44 at p90
# (bench.core.config.early_stopping_queries).


def min_queries(cfg: BenchConfig) -> int:
    """LoadGen's minimum query count: serve.min_queries, or (0) the fewest its early
    stopping can pass at the scenario's percentile (Offline: its one query)."""
    s = cfg.serve
    if s.min_queries > 0:
        return s.min_queries
    if s.scenario == "offline":
        return 1
    p = s.latency_percentile if s.scenario == "server" else PERCENTILES[s.scenario]
    return early_stopping_queries(p)


def rules_note(cfg: BenchConfig, expected_samples: int = 0) -> str:
    """'' where the run is as long as MLPerf's rules ask; otherwise what falls short, as the
    ``serve.rules`` tag says it ('not valid under MLPerf's rules: ...')."""
    s = cfg.serve
    short = []
    if s.min_duration_s < MLPERF_MIN_DURATION_S:
        short.append(f"min_duration {s.min_duration_s:g} s < {MLPERF_MIN_DURATION_S:g} s")
    need = MLPERF_MIN_QUERIES.get(s.scenario, 0)
    have = expected_samples if s.scenario == "offline" else min_queries(cfg)
    if have < need:
        unit = "samples" if s.scenario == "offline" else "queries"
        short.append(f"{have} {unit} < {need}")
    return "not valid under MLPerf's rules: " + "; ".join(short) if short else ""


def settings(cfg: BenchConfig, expected: Expected, target_qps: float, max_duration_s: float) -> Any:
    """LoadGen's TestSettings for ``cfg.serve`` (Server at ``target_qps``)."""
    import mlperf_loadgen as lg

    s = cfg.serve
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, SCENARIOS[s.scenario])
    ts.mode = lg.TestMode.AccuracyOnly if s.mode == "accuracy" else lg.TestMode.PerformanceOnly
    ts.min_duration_ms = int(s.min_duration_s * 1000)
    ts.max_duration_ms = max(int(max_duration_s * 1000), ts.min_duration_ms)
    ts.min_query_count = min_queries(cfg)
    ts.qsl_rng_seed = ts.sample_index_rng_seed = ts.schedule_rng_seed = cfg.seed
    ts.server_target_qps = target_qps
    ts.server_target_latency_ns = int(s.latency_bound_ms * 1e6)
    ts.server_target_latency_percentile = s.latency_percentile
    ts.multi_stream_samples_per_query = s.samples_per_query
    single = expected.single_s / LATENCY_SLACK
    ts.single_stream_expected_latency_ns = max(int(single * 1e9), 1)
    per_query = expected.batch_s * math.ceil(s.samples_per_query / expected.max_batch)
    ts.multi_stream_expected_latency_ns = max(int(per_query / LATENCY_SLACK * 1e9), 1)
    ts.offline_expected_qps = offline_qps(cfg, expected)
    if tokens(cfg):  # Server's bounds: first token, and per output token (0: none)
        ts.use_token_latencies = True
        ts.ttft_latency = int(s.latency_bound_ms * 1e6)
        ts.tpot_latency = int(s.tpot_bound_ms * 1e6) if s.tpot_bound_ms > 0 else UNBOUNDED_NS
    return ts


# LoadGen sizes a run from the expected figures: SingleStream and MultiStream schedule
# min_duration / expected latency queries but end as soon as the minimum duration and query
# count are met, so an expected latency below the real one costs nothing, and one above it
# ends the run too soon (INVALID: min_duration; measured: 20 ms expected, 2 ms real, a 0.5 s
# run ended at 0.18 s).  Offline's one query is expected QPS x min duration x 1.1 samples, so
# there an expected QPS above the real one makes the run longer, and one below it too short.
# A machine shared with others is often faster during the run than in the warm-up: LoadGen is
# told a latency 4x shorter and a throughput 2x higher than the warm-up's fastest.
LATENCY_SLACK = 4.0
OFFLINE_SLACK = 2.0


def offline_qps(cfg: BenchConfig, expected: Expected) -> float:
    """Offline's expected samples/s: serve.expected_qps, else the warm-up's x OFFLINE_SLACK."""
    return cfg.serve.expected_qps or expected.samples_per_s * OFFLINE_SLACK


# serve.tpot_bound_ms=0: no bound on the time per output token (a day, in LoadGen's ns).
UNBOUNDED_NS = 86_400 * 10**9


def tokens(cfg: BenchConfig) -> bool:
    """Whether ``cfg`` serves a causal LM with LoadGen's token latencies (a query a prompt)."""
    from bench.trial.models import own_causal_lm

    return own_causal_lm(cfg.model)


def token_bounds(cfg: BenchConfig) -> str:
    """The LM's Server bounds, as the ``serve.token_bounds`` tag says them."""
    s = cfg.serve
    tpot = f"<= {s.tpot_bound_ms:g} ms" if s.tpot_bound_ms > 0 else "unbounded"
    return (
        f"p{s.latency_percentile * 100:g} time to first token <= {s.latency_bound_ms:g} ms, "
        f"per output token {tpot}; prompt_len={cfg.prompt_len} new_tokens={cfg.new_tokens}"
    )


def offline_samples(cfg: BenchConfig, expected: Expected) -> int:
    """The samples of Offline's one query, as LoadGen sizes it (expected QPS x min duration
    x 1.1, at least min_queries)."""
    return max(int(offline_qps(cfg, expected) * cfg.serve.min_duration_s * 1.1), min_queries(cfg))


@dataclass
class Run:
    """One LoadGen run: its summary (None in accuracy mode, whose summary holds no
    figures), bench's own view of it (wall time, the SUT's batches) and its logs' folder."""

    summary: Summary | None
    wall_s: float
    start: float
    end: float
    batch_s: list[float]
    batch_sizes: list[int]
    outdir: Path
    answers: dict[int, int] = field(default_factory=dict)  # accuracy: library index -> class
    # accuracy, a causal LM: library index -> its generated tokens
    tokens: dict[int, np.ndarray] = field(default_factory=dict)


def _token_responses(lg: Any, call: Callable[[list[Any]], None]) -> Complete:
    """LoadGen's FirstTokenComplete or QuerySamplesComplete (``call``) for a causal LM's
    batch: each response carries its sample's tokens (int64) and their count (n_tokens); a
    sample answered unrun (a drained SUT) carries none."""

    def complete(ids: Sequence[int], outputs: np.ndarray | None) -> None:
        if outputs is None:
            call([lg.QuerySampleResponse(rid, 0, 0, 1) for rid in ids])
            return
        answers = np.ascontiguousarray(np.asarray(outputs, dtype=np.int64).reshape(len(ids), -1))
        n, base = answers.shape[1], answers.ctypes.data
        size = n * answers.itemsize
        call([lg.QuerySampleResponse(rid, base + i * size, size, n) for i, rid in enumerate(ids)])

    return complete


def _responses(lg: Any, accuracy: bool) -> Complete:
    """LoadGen's QuerySamplesComplete for a batch: in accuracy mode each response carries
    its sample's answer (the output's argmax, int64), which LoadGen copies into its log."""

    def complete(ids: Sequence[int], outputs: np.ndarray | None) -> None:
        if not accuracy or outputs is None:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(rid, 0, 0) for rid in ids])
            return
        answers = np.ascontiguousarray(
            np.asarray(outputs).reshape(len(ids), -1).argmax(axis=1).astype(np.int64)
        )
        base, size = answers.ctypes.data, answers.itemsize
        lg.QuerySamplesComplete(
            [lg.QuerySampleResponse(rid, base + i * size, size) for i, rid in enumerate(ids)]
        )

    return complete


def read_token_log(path: Path, size: int, tokens: int) -> dict[int, np.ndarray]:
    """A causal LM's ``mlperf_log_accuracy.json``: each library index's generated tokens
    (untrusted, as :func:`read_accuracy_log`: ``tokens`` int64 values each)."""
    return {
        index: np.frombuffer(raw, dtype=np.int64).copy()
        for index, raw in _accuracy_entries(path, size, 8 * tokens).items()
    }


def read_accuracy_log(path: Path, size: int) -> dict[int, int]:
    """``mlperf_log_accuracy.json``: each library index's answer (untrusted: each entry an
    index within the library and an 8-byte hex answer, else :class:`SummaryError`)."""
    return {
        index: int(np.frombuffer(raw, dtype=np.int64)[0])
        for index, raw in _accuracy_entries(path, size, 8).items()
    }


def _accuracy_entries(path: Path, size: int, nbytes: int) -> dict[int, bytes]:
    """Each response's bytes by library index: an index within the library and ``nbytes``
    bytes of hex, else :class:`SummaryError`."""
    import json

    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SummaryError(f"{path.name}: cannot be read: {exc}") from exc
    if not isinstance(entries, list):
        raise SummaryError(f"{path.name}: not a list of responses")
    answers: dict[int, bytes] = {}
    for entry in entries:
        index = entry.get("qsl_idx") if isinstance(entry, dict) else None
        data = entry.get("data") if isinstance(entry, dict) else None
        if not isinstance(index, int) or not 0 <= index < size or not isinstance(data, str):
            raise SummaryError(f"{path.name}: a malformed response: {str(entry)[:80]}")
        try:
            raw = bytes.fromhex(data)
        except ValueError:
            raise SummaryError(f"{path.name}: response {index}: data is not hex") from None
        if len(raw) != nbytes:
            raise SummaryError(f"{path.name}: response {index}: {len(raw)} bytes, not {nbytes}")
        answers[index] = raw
    return answers


@contextmanager
def _constructed(lg: Any, batcher: Batcher, size: int) -> Iterator[tuple[Any, Any]]:
    def issue(queries: Any) -> None:
        batcher.issue([(q.id, q.index) for q in queries])

    sut = lg.ConstructSUT(issue, batcher.flush)
    qsl = lg.ConstructQSL(size, size, lambda indices: None, lambda indices: None)
    try:
        yield sut, qsl
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)


def run_loadgen(
    ts: Any,
    predict: Predict,
    lib: Library,
    cfg: BenchConfig,
    outdir: Path,
    sync: Callable[[], None] = lambda: None,
    generate: Generate | None = None,
) -> Run:
    """One LoadGen test with ``ts`` against the batching SUT; its logs in ``outdir``.
    ``generate``: a causal LM's batches, with its first tokens and token counts reported
    (``ts`` then has use_token_latencies).

    StartTest runs in its own thread; this one waits in Python, so that an interrupt (Ctrl-C,
    the inline launcher's timeout) arrives here: the SUT then drains, LoadGen ends at its
    own pace, every thread is joined, and the exception goes on."""
    import mlperf_loadgen as lg

    outdir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    accuracy = cfg.serve.mode == "accuracy"
    batcher = Batcher(
        predict,
        lib.samples,
        cfg.serve.max_batch,
        cfg.serve.batch_timeout_ms / 1e3,
        _responses(lg, accuracy)
        if generate is None
        else _token_responses(lg, lg.QuerySamplesComplete),
        sync,
        generate=generate,
        first=None if generate is None else _token_responses(lg, lg.FirstTokenComplete),
    )
    failure: list[BaseException] = []
    done = threading.Event()
    with _constructed(lg, batcher, len(lib)) as (sut, qsl):

        def test() -> None:
            try:  # no audit.config from the working directory: a missing file in outdir
                lg.StartTestWithLogSettings(sut, qsl, ts, log, str(outdir / "audit.config"))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                failure.append(exc)
            finally:
                done.set()

        thread = threading.Thread(target=test, name="bench-serve-loadgen", daemon=True)
        batcher.start()
        start = time.perf_counter()
        thread.start()
        try:
            while not done.wait(0.05):
                pass
        except BaseException:
            batcher.drain()  # answer everything at once: LoadGen ends at its minimum duration
            thread.join()
            raise
        finally:
            end = time.perf_counter()
            batcher.stop()
    if failure:
        raise failure[0]
    if batcher.error is not None:
        raise batcher.error
    trace = outdir / "mlperf_log_trace.json"
    if trace.exists() and trace.stat().st_size == 0:  # enable_trace=False leaves it empty
        trace.unlink()
    summary = None
    if not accuracy:
        path = outdir / "mlperf_log_summary.txt"
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise SummaryError(f"LoadGen wrote no summary in {outdir}: {exc}") from exc
        summary = parse_summary(text)
    run = Run(
        summary,
        end - start,
        start,
        end,
        batcher.batch_s,
        batcher.batch_sizes,
        outdir,
    )
    if accuracy:
        log = outdir / "mlperf_log_accuracy.json"
        if generate is None:
            run.answers = read_accuracy_log(log, len(lib))
        else:
            run.tokens = read_token_log(log, len(lib), cfg.new_tokens)
    return run


# --- a trial -----------------------------------------------------------------------------------


def generator(session: Any, new_tokens: int) -> Generate:
    """A causal LM's session (:class:`bench.trial.frameworks.base.Generation`) as the SUT's
    generation: the prompts' prefill, their first tokens handed over (on the host), then
    ``new_tokens - 1`` cached decode steps, greedily, as mode=generate runs them."""

    def generate(prompts: np.ndarray, first: Callable[[np.ndarray], None]) -> np.ndarray:
        session.start_generation(prompts)
        session.prefill()
        first(np.asarray(session.generated()))
        for _ in range(new_tokens - 1):
            session.decode()
        return np.asarray(session.generated())

    return generate


def whole(generate: Generate) -> Predict:
    """A generation as a forward (the warm-up's, and the accuracy check's): its tokens."""
    return lambda prompts: generate(prompts, lambda _tokens: None)


def warm_up(
    predict: Predict, lib: Library, cfg: BenchConfig, sync: Callable[[], None]
) -> tuple[float, float, Expected]:
    """Every batch size from 1 to max_batch, ``max(warmup_steps, 1)`` times each (tracing and
    compiling each shape before LoadGen starts); (the first call's time, the rest's, what
    one sample and a full batch took at their fastest call after the first round, or in
    the only round)."""
    perf = time.perf_counter
    first = rest = 0.0
    last: dict[int, float] = {}
    rounds = max(cfg.warmup_steps, 1)
    for r in range(rounds):
        for size in range(1, cfg.serve.max_batch + 1):
            t0 = perf()
            predict(lib.samples[np.arange(size) % len(lib)])
            sync()
            took = perf() - t0
            if r == 0 and size == 1:
                first = took
            else:
                rest += took
            last[size] = took if r <= 1 else min(last[size], took)
    return first, rest, Expected(last[1], last[cfg.serve.max_batch], cfg.serve.max_batch)


def record(run: Run, index: int, on_window: WindowCallback | None) -> EpochRecord:
    """A LoadGen run as a window: the SUT's batches as its steps (a step's time is a batch's
    forward, synchronized), its samples over bench's wall time around StartTest, LoadGen's
    figures beside them."""
    samples = sum(run.batch_sizes)
    times = np.asarray(run.batch_s or [0.0]) * 1e3
    p50, p90, p99 = (float(v) for v in np.percentile(times, [50, 90, 99]))
    rec = EpochRecord(
        epoch=index,
        steps=len(run.batch_sizes),
        samples=samples,
        epoch_time_s=run.wall_s,
        samples_per_s=samples / run.wall_s if run.wall_s > 0 else 0.0,
        step_time_p50_ms=p50,
        step_time_p90_ms=p90,
        step_time_p99_ms=p99,
    )
    if run.summary is not None:
        rec.extra.update(figures(run.summary, rec.samples_per_s))
    rec.extra[SERVE_MEAN_BATCH] = samples / len(run.batch_sizes) if run.batch_sizes else 0.0
    if on_window is not None:
        rec.extra.update(on_window(run.start, run.end, samples))
    return rec


def figures(s: Summary, bench_samples_per_s: float) -> dict[str, float]:
    """A run's LoadGen figures under bench's names (MultiStream's throughput: bench's)."""
    out: dict[str, float] = {
        SERVE_SAMPLES_PER_S: s.samples_per_s
        if s.samples_per_s is not None
        else bench_samples_per_s,
        SERVE_LATENCY_P50_MS: s.latency_ms[50.0],
        SERVE_LATENCY_P90_MS: s.latency_ms[90.0],
        SERVE_LATENCY_P99_MS: s.latency_ms[99.0],
        SERVE_LATENCY_MEAN_MS: s.mean_latency_ms,
        SERVE_VALID: 1.0 if s.valid else 0.0,
    }
    if 99.9 in s.latency_ms:
        out[SERVE_LATENCY_P999_MS] = s.latency_ms[99.9]
    for percentiles, names in ((s.first_token_ms, SERVE_TTFT_MS), (s.per_token_ms, SERVE_TPOT_MS)):
        out.update({names[p]: v for p, v in percentiles.items() if p in names})
    if s.tokens_per_s is not None:
        out[SERVE_TOKENS_PER_S] = s.tokens_per_s
    if s.scenario == "Server":
        out[SERVE_TARGET_QPS] = s.target_qps
        if s.scheduled_qps is not None:
            out[SERVE_SCHEDULED_QPS] = s.scheduled_qps
    return out


@dataclass
class Probe:
    """find_peak's view of one run: the offered QPS, LoadGen's verdict and the bounded
    latency's p99 (:func:`probe_of`)."""

    target_qps: float
    valid: bool
    p99_ms: float


def probe_of(s: Summary, target_qps: float) -> Probe:
    """A Server run as find_peak judges it: by LoadGen's verdict, whose latency constraint is
    the query's p99 or, for a causal LM (use_token_latencies), the first token's and the
    time per output token's (LoadGen's PerfConstraintsMet), with the bounded latency's p99:
    the query's, or the first token's."""
    p99 = s.first_token_ms.get(99.0, s.latency_ms[99.0])
    return Probe(target_qps, s.valid, p99)


def find_peak(
    probe: Callable[[float], Probe], start_qps: float, max_probes: int, tolerance: float
) -> tuple[float, list[Probe]]:
    """The highest target QPS that ``probe`` finds VALID: from ``start_qps``, doubled while
    VALID and halved while INVALID until both a VALID and an INVALID load are known, then
    bisected until the INVALID load is within ``tolerance`` (relative) of the VALID one, in
    at most ``max_probes`` runs.  (0.0, probes) when no load was VALID."""
    low: float | None = None  # the highest VALID load so far
    high: float | None = None  # the lowest INVALID load so far
    qps = start_qps
    probes: list[Probe] = []
    while len(probes) < max_probes:
        p = probe(qps)
        probes.append(p)
        if p.valid:
            low = qps if low is None else max(low, qps)
        else:
            high = qps if high is None else min(high, qps)
        if low is not None and high is not None:
            if high - low <= tolerance * low:
                break
            qps = (low + high) / 2
        elif low is not None:
            qps = low * 2
        else:
            assert high is not None
            qps = high / 2
    return (low or 0.0), probes


def serve(
    result: TrialResult,
    session: Any,
    lib: Library,
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    on_window: WindowCallback | None,
    workdir: Path | None,
) -> list[EpochRecord]:
    """mode=serve's warm-up and LoadGen runs on a prepared session; the records, with the
    trial's figures and tags written into ``result``."""
    from bench.trial.frameworks.base import Generation
    from bench.trial.frameworks.base import Predict as PredictProtocol

    generate: Generate | None = None
    if tokens(cfg):
        if not isinstance(session, Generation):
            raise TypeError(f"mode=serve: {cfg.model.name}'s session cannot generate")
        generate = generator(session, cfg.new_tokens)
        predict: Predict = whole(generate)
    elif isinstance(session, PredictProtocol):
        predict = session.predict
    else:
        raise TypeError(f"mode=serve: {cfg.framework.name}'s session has no predict")
    sync = session.sync
    first, rest, expected = warm_up(predict, lib, cfg, sync)
    result.phases[metrics.COMPILE_TIME_S], result.phases[metrics.WARMUP_TIME_S] = first, rest
    s = cfg.serve
    samples = offline_samples(cfg, expected) if s.scenario == "offline" else 0
    env = result.environment
    env["serve.scenario"] = SCENARIOS[s.scenario]
    env["serve.policy"] = f"max_batch={s.max_batch} batch_timeout_ms={s.batch_timeout_ms:g}"
    env["serve.rules"] = rules_note(cfg, samples) or "as long as MLPerf's rules ask"
    env["serve.peak_search"] = "bench's bisection" if s.mode == "find_peak" else ""
    if generate is not None:
        env["serve.token_bounds"] = token_bounds(cfg)
    deadline = result.marks.get("trial_start", time.time()) + cfg.timeout_s - 5.0

    temp = None
    if workdir is None:
        temp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    base = (workdir or temp or Path(".")) / "loadgen"
    records: list[EpochRecord] = []

    def one(target_qps: float) -> tuple[Run, EpochRecord]:
        left = deadline - time.time()
        ts = settings(cfg, expected, target_qps, left)
        outdir = base / f"run{len(records) + 1}"
        run = run_loadgen(ts, predict, lib, cfg, outdir, sync, generate)
        rec = record(run, len(records) + 1, on_window)
        records.append(rec)
        if on_epoch is not None:
            on_epoch(rec)
        return run, rec

    try:
        if s.mode == "find_peak":
            runs: dict[float, tuple[Run, EpochRecord]] = {}

            def probe(qps: float) -> Probe:
                runs[qps] = one(qps)
                summary = runs[qps][0].summary
                assert summary is not None  # a performance run's
                return probe_of(summary, qps)

            peak, probes = find_peak(probe, s.target_qps, s.peak_probes, s.peak_tolerance)
            result.summary[SERVE_PEAK_QPS] = peak
            result.summary[SERVE_PROBES] = float(len(probes))
            # the trial's figures: the peak's run (the last probe's where none was VALID)
            last, rec = runs[peak] if peak > 0 else runs[probes[-1].target_qps]
            if peak > 0 and last.summary is not None:
                result.summary[SERVE_PEAK_LATENCY_P99_MS] = probe_of(last.summary, peak).p99_ms
            bound = (
                token_bounds(cfg).partition(";")[0]
                if generate is not None
                else f"p{s.latency_percentile * 100:g} <= {s.latency_bound_ms:g} ms"
            )
            env["serve.peak"] = (
                f"{peak:g} QPS at {bound}" if peak > 0 else "no target QPS was VALID"
            )
        else:
            for _ in range(s.runs if s.mode == "performance" else 1):  # the last run's figures
                last, rec = one(s.target_qps)
            if s.mode == "accuracy":
                if generate is None:
                    _check_accuracy(result, session, lib, cfg, last)
                else:
                    _check_tokens(result, predict, lib, cfg, last)
        env["serve.result"] = (
            last.summary.verdict() if last.summary is not None else "accuracy run (no verdict)"
        )
        for name, trial_figure in TRIAL_OF.items():
            if name in rec.extra:
                result.summary[trial_figure] = rec.extra[name]
        result.summary[metrics.TRIAL_TIME_S] = sum(r.epoch_time_s for r in records)
        result.summary[metrics.TRIAL_SAMPLES_PER_S] = rec.samples_per_s
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    result.epochs = records  # in result.json too, as every mode's (tuning=best's probes read it)
    if workdir is not None:
        result.files.append("loadgen")
    return records


def _check_tokens(
    result: TrialResult, generate: Predict, lib: Library, cfg: BenchConfig, run: Run
) -> None:
    """A causal LM's accuracy mode: the tokens LoadGen logged against the framework's own
    generation of the same prompts (batches of max_batch, outside LoadGen): the share of
    prompts whose every generated token is the same."""
    if not run.tokens:
        raise SummaryError("mlperf_log_accuracy.json: no responses in accuracy mode")
    indices = np.asarray(sorted(run.tokens))
    step = cfg.serve.max_batch
    own = np.concatenate(
        [
            np.asarray(generate(lib.samples[indices[i : i + step]]))
            for i in range(0, len(indices), step)
        ]
    )
    served = np.stack([run.tokens[i] for i in indices])
    same = (served == own.reshape(served.shape)).all(axis=1)
    result.summary[metrics.TRIAL_SERVE_ACCURACY_AGREEMENT] = float(np.mean(same))


def _check_accuracy(
    result: TrialResult, session: Any, lib: Library, cfg: BenchConfig, run: Run
) -> None:
    """Accuracy mode: LoadGen's logged answers against the framework's own batch outputs on
    the same samples (batches of max_batch, outside LoadGen), and against the labels."""
    if not run.answers:
        raise SummaryError("mlperf_log_accuracy.json: no responses in accuracy mode")
    indices = np.asarray(sorted(run.answers))
    own = np.concatenate(
        [
            np.asarray(session.predict(lib.samples[indices[i : i + cfg.serve.max_batch]]))
            .reshape(len(indices[i : i + cfg.serve.max_batch]), -1)
            .argmax(axis=1)
            for i in range(0, len(indices), cfg.serve.max_batch)
        ]
    )
    served = np.asarray([run.answers[i] for i in indices])
    result.summary[metrics.TRIAL_SERVE_ACCURACY_AGREEMENT] = float(np.mean(served == own))
    if lib.labels is not None:
        top1 = float(np.mean(served == lib.labels[indices]))
        result.summary[metrics.TRIAL_SERVE_TOP1] = top1
