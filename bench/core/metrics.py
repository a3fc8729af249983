"""Every metric bench records, declared once: its name, unit, scope, aggregation and sense.

A metric is a :class:`Metric`, a module-level constant here and a ``str`` (its name); the
trial emits it, tracking logs it, the report and the sweep's summary read it, all by that
constant (``summary[metrics.TRIAL_SAMPLES_PER_S]``), never by a string of their own
(``tests/unit/test_metrics.py`` scans ``bench/`` for one).

Scopes: a ``WINDOW`` metric is one timed window's (logged at ``step=epoch``), a ``TRIAL``
metric the whole trial's (logged once, at step 0), a ``SWEEP`` metric a sweep's parent
run's.  MLflow's latest value of a name is its highest step's, so a window's figure and a
trial's must never share a name: :meth:`Metric.trial` derives the trial's figure of a
window metric as ``trial_<name>``, and :func:`register` refuses a name already taken in
any scope, a window name starting with ``trial_``, and a trial name that is a window's
(bar the few pinned in :data:`LEGACY_SHARED`).

To add a metric: declare it below with :func:`window`, :func:`trial` (or a window
metric's :meth:`Metric.trial`) or :func:`sweep`, next to its kin; emit and read it by the
constant (``record.extra[metrics.X] = ...``, ``t.metric(metrics.X)``); run
``python -c "from bench.core import metrics; print(metrics.markdown())"`` and paste the
table into docs/measuring.md (``tests/unit/test_metrics.py`` fails until it is equal).
Names made at run time (one per operator category, per worker, per GPU) are a
:class:`Family`.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW = "window"
TRIAL = "trial"
SWEEP = "sweep"
SCOPES = (WINDOW, TRIAL, SWEEP)

MODES = ("train", "infer", "generate", "serve")
TIMED = ("train", "infer")  # the modes whose windows are steps of a batch

# How repeats (windows into a trial's figure; a config's repeated trials in the report)
# aggregate.
MEDIAN = "median"
MEAN = "mean"
SUM = "sum"
MAX = "max"
LAST = "last"
RATE = "rate"  # a total of work over the total time: never a mean of rates
PERCENTILE = "percentile"  # of every step pooled, not a mean of windows' percentiles
AGGREGATES = (MEDIAN, MEAN, SUM, MAX, LAST, RATE, PERCENTILE)

# A window's figure that a trial also logs under the same name, from before the
# catalogue: MLflow's latest value is then the last window's, not the trial's.  Pinned by
# the test; never add to it (derive a trial_ name instead).
LEGACY_SHARED = frozenset({"data_time_s", "time_comm_ms", "ps_push_ms", "ps_pull_ms"})


class Metric(str):
    """One metric, a ``str``: its name as MLflow logs it (so it is a dict key, a log call's
    name, as it is), with its declaration: ``unit``; ``scope`` (WINDOW, TRIAL, SWEEP);
    ``aggregate``: how repeats combine (a window metric's windows into the trial's figure, a
    trial metric's repeated trials in the report); ``higher_is_better`` (None: neither, a
    count or a setting); ``modes``: the modes that log it; ``when``: which trials have it,
    in words ('' for every trial of those modes); ``meaning``: one line."""

    unit: str
    scope: str
    meaning: str
    aggregate: str
    higher_is_better: bool | None
    modes: tuple[str, ...]
    when: str

    def __new__(
        cls,
        name: str,
        unit: str,
        scope: str,
        meaning: str,
        aggregate: str = MEDIAN,
        higher_is_better: bool | None = None,
        modes: tuple[str, ...] = MODES,
        when: str = "",
    ) -> Metric:
        self = super().__new__(cls, name)
        self.unit, self.scope, self.meaning, self.aggregate = unit, scope, meaning, aggregate
        self.higher_is_better, self.modes, self.when = higher_is_better, modes, when
        return self

    @property
    def name(self) -> str:
        return str.__str__(self)

    def __reduce__(self) -> tuple[type, tuple[str]]:  # pickled, JSON'd and logged as its name
        return str, (self.name,)

    def __repr__(self) -> str:
        return f"Metric({self.name!r}, {self.scope})"

    def trial(self, meaning: str = "", aggregate: str = "", when: str = "") -> Metric:
        """The trial's figure of this window metric: ``trial_<name>``, registered."""
        if self.scope != WINDOW:
            raise ValueError(f"{self.name}: only a window metric has a trial_ figure")
        return register(
            Metric(
                f"trial_{self.name}",
                self.unit,
                TRIAL,
                meaning or f"{self.meaning}, over the trial's windows",
                aggregate or MEDIAN,
                self.higher_is_better,
                self.modes,
                when or self.when,
            )
        )


@dataclass(frozen=True)
class Family:
    """Metrics whose names are made at run time: ``pattern`` with one ``{}`` (an operator
    category, a worker's or a GPU's index, a metric's name)."""

    pattern: str
    unit: str
    scope: str
    meaning: str
    when: str = ""

    def of(self, part: object) -> str:
        return self.pattern.format(part)

    def matches(self, name: str) -> bool:
        head, _, tail = self.pattern.partition("{}")
        return len(name) > len(head) + len(tail) and name.startswith(head) and name.endswith(tail)


_CATALOGUE: dict[str, Metric] = {}  # by name; a legacy shared name: the trial's
_ALL: list[Metric] = []
_FAMILIES: list[Family] = []


def register(metric: Metric) -> Metric:
    """Add ``metric`` to the catalogue; refuse a name that is taken or that would let a
    window's figure and a trial's share a name."""
    if metric.scope not in SCOPES:
        raise ValueError(f"{metric.name}: scope {metric.scope!r} is not one of {SCOPES}")
    if metric.aggregate not in AGGREGATES:
        raise ValueError(
            f"{metric.name}: aggregate {metric.aggregate!r} is not one of {AGGREGATES}"
        )
    if not set(metric.modes) <= set(MODES):
        raise ValueError(f"{metric.name}: modes {metric.modes} are not among {MODES}")
    if metric.scope == WINDOW and metric.name.startswith("trial_"):
        raise ValueError(f"{metric.name}: a window metric's name cannot start with trial_")
    taken = _CATALOGUE.get(metric.name)
    if taken is not None and not (
        metric.name in LEGACY_SHARED and {taken.scope, metric.scope} == {WINDOW, TRIAL}
    ):
        raise ValueError(f"{metric.name}: already declared ({taken.scope}: {taken.meaning})")
    if taken is None or metric.scope == TRIAL:
        _CATALOGUE[metric.name] = metric
    _ALL.append(metric)
    return metric


def window(
    name: str,
    unit: str,
    meaning: str,
    aggregate: str = MEDIAN,
    higher_is_better: bool | None = None,
    modes: tuple[str, ...] = MODES,
    when: str = "",
) -> Metric:
    """Declare one timed window's metric."""
    return register(Metric(name, unit, WINDOW, meaning, aggregate, higher_is_better, modes, when))


def trial(
    name: str,
    unit: str,
    meaning: str,
    aggregate: str = MEDIAN,
    higher_is_better: bool | None = None,
    modes: tuple[str, ...] = MODES,
    when: str = "",
) -> Metric:
    """Declare a whole trial's metric (one value, at step 0)."""
    return register(Metric(name, unit, TRIAL, meaning, aggregate, higher_is_better, modes, when))


def sweep(name: str, unit: str, meaning: str, higher_is_better: bool | None = None) -> Metric:
    """Declare a metric of a sweep's parent run."""
    return register(Metric(name, unit, SWEEP, meaning, MEDIAN, higher_is_better))


def family(pattern: str, unit: str, scope: str, meaning: str, when: str = "") -> Family:
    """Declare names made at run time (``pattern`` with one ``{}``)."""
    made = Family(pattern, unit, scope, meaning, when)
    _FAMILIES.append(made)
    return made


def lookup(name: str) -> Metric | None:
    """The declared metric of this name (the trial's, for a legacy shared name); None if
    none is declared (a family's name included)."""
    return _CATALOGUE.get(name)


def family_of(name: str) -> Family | None:
    """The family a run-time name belongs to, if any."""
    return next((f for f in _FAMILIES if f.matches(name)), None)


def known(name: str) -> bool:
    """Whether ``name`` is a catalogued metric or a family's."""
    return name in _CATALOGUE or family_of(name) is not None


def catalogue() -> tuple[Metric, ...]:
    """Every declared metric, in declaration order (both of a legacy shared name)."""
    return tuple(_ALL)


def families() -> tuple[Family, ...]:
    return tuple(_FAMILIES)


def names() -> frozenset[str]:
    """Every declared metric's name."""
    return frozenset(_CATALOGUE)


DOCS_BEGIN = "<!-- the metrics table: generated from bench/core/metrics.py (markdown()) -->"
DOCS_END = "<!-- end of the metrics table -->"


def docs_table(text: str) -> str:
    """The table between :data:`DOCS_BEGIN` and :data:`DOCS_END` in ``text`` ('' if none)."""
    head, found, rest = text.partition(DOCS_BEGIN + "\n")
    return rest.partition(DOCS_END)[0] if found else ""


def markdown() -> str:
    """docs/measuring.md's table of every metric and family, from the declarations."""
    sense = {True: "higher", False: "lower", None: ""}
    rows = [
        "| metric | unit | scope | aggregate | better | modes | when | meaning |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {scope: i for i, scope in enumerate(SCOPES)}
    for m in sorted(catalogue(), key=lambda m: order[m.scope]):
        modes = "all" if m.modes == MODES else ", ".join(m.modes)
        rows.append(
            f"| `{m.name}` | {m.unit} | {m.scope} | {m.aggregate} | {sense[m.higher_is_better]} "
            f"| {modes} | {m.when} | {m.meaning} |"
        )
    for f in _FAMILIES:
        name = f.pattern.replace("{}", "<x>")
        rows.append(f"| `{name}` | {f.unit} | {f.scope} | | | | {f.when} | {f.meaning} |")
    return "\n".join(rows) + "\n"


# --- A timed window's figures (EpochRecord), logged at step=epoch --------------------------
# window/trial(name, unit, meaning, aggregate, higher is better, modes, when)

GPU, FLOPS, DATASETS, GEN = (
    "GPU",
    "models whose FLOPs bench counts",
    "labelled datasets",
    ("generate",),
)
EPOCH_TIME_S = window("epoch_time_s", "s", "wall time of the timed window", SUM, False)
SAMPLES_PER_S = window("samples_per_s", "samples/s", "samples / epoch_time_s", RATE, True)
STEP_TIME_P50_MS = window(
    "step_time_p50_ms", "ms", "median step time (a batch's latency in infer)", PERCENTILE, False
)
STEP_TIME_P90_MS = window("step_time_p90_ms", "ms", "90th percentile step time", PERCENTILE, False)
STEP_TIME_P99_MS = window("step_time_p99_ms", "ms", "99th percentile step time", PERCENTILE, False)
LOSS = window("loss", "", "mean training loss of the window's steps", LAST, False, ("train",))
DATA_WAIT_S = window("data_time_s", "s", "time the steps waited for batches", SUM, False)
DATA_WAIT_PCT = window("data_wait_pct", "%", "data_time_s / epoch_time_s", MEDIAN, False)
ACHIEVED_FLOPS_PER_S = window(
    "achieved_flops_per_s",
    "FLOP/s",
    "step FLOPs per sample x samples_per_s",
    RATE,
    True,
    when=FLOPS,
)
TEST_ACCURACY = window("test_accuracy", "", "held-out accuracy", LAST, True, ("train",), DATASETS)
TEST_LOSS = window("test_loss", "", "held-out loss", LAST, False, ("train",), DATASETS)
EVAL_TIME_S = window(
    "eval_time_s", "s", "the held-out evaluation", SUM, False, ("train",), DATASETS
)
# goal=accuracy (time to accuracy, docs/accuracy.md): each evaluation's place in epochs and
# in wall time, then the trial's figures.
GOAL = "goal=accuracy"
EVAL_EPOCH = window("eval_epoch", "epochs", "passes trained at the evaluation", LAST, None,
                    ("train",), GOAL)  # fmt: skip
EVAL_ELAPSED_S = window("eval_elapsed_s", "s", "from the first timed step to the evaluation's end",
                        LAST, None, ("train",), GOAL)  # fmt: skip
TARGET_REACHED = trial("target_reached", "", "1: an evaluation reached goal.target; 0: not",
                       MEAN, True, ("train",), GOAL)  # fmt: skip
TIME_TO_TARGET_S = trial("time_to_target_s", "s", "first timed step to the evaluation that "
                         "reached the target", MEDIAN, False, ("train",), GOAL)  # fmt: skip
EPOCHS_TO_TARGET = trial("epochs_to_target", "epochs", "passes trained at that evaluation",
                         MEDIAN, False, ("train",), GOAL)  # fmt: skip
EVALS_TO_TARGET = trial("evals_to_target", "", "evaluations up to that one", MEDIAN, False,
                        ("train",), GOAL)  # fmt: skip
TRAIN_TIME_TO_TARGET_S = trial("train_time_to_target_s", "s", "the training windows' share",
                               MEDIAN, False, ("train",), GOAL)  # fmt: skip
EVAL_TIME_TO_TARGET_S = trial("eval_time_to_target_s", "s", "the evaluations' share", MEDIAN,
                              False, ("train",), GOAL)  # fmt: skip
BEST_TEST_ACCURACY = trial("best_test_accuracy", "", "the best evaluation's accuracy", MEDIAN,
                           True, ("train",), GOAL)  # fmt: skip
EPOCHS_TRAINED = trial("epochs_trained", "epochs", "passes trained in all", MEDIAN, None,
                       ("train",), GOAL)  # fmt: skip

# Generation (mode=generate): each window's figures; the trial's are trial_*.
TIME_TO_FIRST_TOKEN_MS = window(
    "time_to_first_token_ms", "ms", "prefill (median)", MEDIAN, False, GEN
)
TIME_PER_OUTPUT_TOKEN_P50_MS = window(
    "time_per_output_token_p50_ms", "ms", "median decode step", PERCENTILE, False, GEN
)
TIME_PER_OUTPUT_TOKEN_P90_MS = window(
    "time_per_output_token_p90_ms", "ms", "90th percentile decode step", PERCENTILE, False, GEN
)
PREFILL_TOKENS_PER_S = window(
    "prefill_tokens_per_s", "tokens/s", "prompt tokens / the prefills' time", RATE, True, GEN
)
DECODE_TOKENS_PER_S = window(
    "decode_tokens_per_s", "tokens/s", "new tokens / the decode steps' time", RATE, True, GEN
)

# Telemetry over the window (bench.trial.monitors).
GPU_UTIL_PCT = window("gpu_util_pct", "%", "mean SM utilization", MEAN, True, when=GPU)
GPU_MEM_UTIL_PCT = window("gpu_mem_util_pct", "%", "mean memory utilization", MEAN, when=GPU)
GPU_MEM_MB = window("gpu_mem_mb", "MB", "largest device memory used", MAX, False, when=GPU)
GPU_SM_CLOCK_MHZ = window("gpu_sm_clock_mhz", "MHz", "mean SM clock", MEAN, when=GPU)
GPU_TEMP_C = window("gpu_temp_c", "C", "highest temperature", MAX, when=GPU)
GPU_THROTTLE_PCT = window("gpu_throttle_pct", "%", "samples slowed down", MAX, False, when=GPU)
ENERGY_J = window("energy_j", "J", "the GPUs' energy", SUM, False, when=GPU)
POWER_W = window("power_w", "W", "energy_j / epoch_time_s", MEAN, False, when=GPU)
ENERGY_PER_SAMPLE_J = window(
    "energy_per_sample_j", "J", "energy_j / samples", MEAN, False, when=GPU
)
CPU_UTIL_PCT = window("cpu_util_pct", "%", "CPU time of the trial's processes / window", MEAN)
HOST_RSS_MB = window("host_rss_mb", "MB", "largest RSS of the trial's processes", MAX, False)
OTHER_CPU_PCT = window("other_cpu_pct", "%", "CPU time of other processes / window", MEAN, False)
CPU_ENERGY_J = window("cpu_energy_j", "J", "CPU package energy", SUM, False, when="RAPL")
CPU_POWER_W = window("cpu_power_w", "W", "cpu_energy_j / epoch_time_s", MEAN, False, when="RAPL")

# MXNet's data-parallel sessions time their communication after each window too
# (MXNetSession.after_window), under the trial's names (LEGACY_SHARED).
MX, KV = "mxnet, data-parallel", "mxnet's kvstore"
WINDOW_COMM_MS = window("time_comm_ms", "ms", "communication per step", MEDIAN, False, when=MX)
WINDOW_PS_PUSH_MS = window("ps_push_ms", "ms", "kvstore push per step", MEDIAN, False, when=KV)
WINDOW_PS_PULL_MS = window("ps_pull_ms", "ms", "kvstore pull per step", MEDIAN, False, when=KV)

# --- A whole trial's figures (TrialResult.summary and .phases), logged at step 0 -----------

TRIAL_TIME_S = trial("trial_time_s", "s", "the windows' epoch_time_s summed", MEDIAN, False)
TRIAL_SAMPLES_PER_S = SAMPLES_PER_S.trial("all windows' samples / trial_time_s")
TRIAL_STEP_TIME_P50_MS = STEP_TIME_P50_MS.trial("median of every timed step")
TRIAL_STEP_TIME_P90_MS = STEP_TIME_P90_MS.trial("90th percentile of every timed step")
TRIAL_STEP_TIME_P99_MS = STEP_TIME_P99_MS.trial("99th percentile of every timed step")
FINAL_LOSS = trial("final_loss", "", "the last window's loss", MEDIAN, False, ("train",))
TRIAL_ACHIEVED_FLOPS_PER_S = ACHIEVED_FLOPS_PER_S.trial("step FLOPs x trial_samples_per_s")
FLOPS_PER_SAMPLE = trial("flops_per_sample", "FLOP", "one sample's forward pass", when=FLOPS)
TRAIN_FLOPS_PER_SAMPLE = trial("train_flops_per_sample", "FLOP", "3 x flops_per_sample", when=FLOPS)
# Not logged: what one step of the trial does per sample (train or forward).
STEP_FLOPS_PER_SAMPLE = "step_flops_per_sample"
PEAK_FLOPS_PER_S = trial(
    "peak_flops_per_s", "FLOP/s", "matrix-product peak at the precision", MEDIAN, True, when=GPU
)
MFU_PCT = trial("mfu_pct", "%", "trial_achieved_flops_per_s / peak", MEDIAN, True, when=GPU)
PEAK_HOST_RSS_MB = trial("peak_host_rss_mb", "MB", "the trial process's peak RSS", MEDIAN, False)
PEAK_DEVICE_MEM_MB = trial(
    "peak_device_mem_mb", "MB", "the framework's peak device memory", MEDIAN, False, when=GPU
)
GLOBAL_SAMPLES_PER_S = trial(
    "global_samples_per_s", "samples/s", "all workers' samples / time", MEDIAN, True, when="workers"
)
STEPS_PER_EPOCH_USED = trial(
    "steps_per_epoch_used", "steps", "the auto probe's steps per window", when="steps_per_epoch=-1"
)
EPOCHS_COMPLETED = trial("epochs_completed", "windows", "timed windows completed")
TUNING_SEARCH_S = trial("tuning_search_s", "s", "tuning=best's search", MEDIAN, False)
SCALING_EFFICIENCY = trial(
    "scaling_efficiency", "", "rate / (workers x the baseline's rate)", MEDIAN, True, when="workers"
)

# Untimed phases (TrialResult.phases).
IMPORT_TIME_S = trial("import_time_s", "s", "importing the framework", MEDIAN, False)
DATA_TIME_S = trial("data_time_s", "s", "making or loading the data", MEDIAN, False)
BUILD_TIME_S = trial("build_time_s", "s", "building the model and session", MEDIAN, False)
FLOPS_TIME_S = trial("flops_time_s", "s", "counting the model's FLOPs", MEDIAN, False)
COMPILE_TIME_S = trial("compile_time_s", "s", "first warm-up step (compilation)", MEDIAN, False)
WARMUP_TIME_S = trial("warmup_time_s", "s", "the other warm-up steps", MEDIAN, False)
PROBE_TIME_S = trial("probe_time_s", "s", "the auto window's probe steps", MEDIAN, False, TIMED)

# Generation's trial figures: the windows', over all windows.
TRIAL_TIME_TO_FIRST_TOKEN_MS = TIME_TO_FIRST_TOKEN_MS.trial()
TRIAL_TIME_PER_OUTPUT_TOKEN_P50_MS = TIME_PER_OUTPUT_TOKEN_P50_MS.trial()
TRIAL_TIME_PER_OUTPUT_TOKEN_P90_MS = TIME_PER_OUTPUT_TOKEN_P90_MS.trial()
TRIAL_PREFILL_TOKENS_PER_S = PREFILL_TOKENS_PER_S.trial()
TRIAL_DECODE_TOKENS_PER_S = DECODE_TOKENS_PER_S.trial()
PREFILL_ACHIEVED_FLOPS_PER_S = trial(
    "prefill_achieved_flops_per_s", "FLOP/s", "prefill FLOPs / time", MEDIAN, True, GEN, FLOPS
)
DECODE_ACHIEVED_FLOPS_PER_S = trial(
    "decode_achieved_flops_per_s", "FLOP/s", "decode FLOPs / time", MEDIAN, True, GEN, FLOPS
)

# Telemetry's trial figures.
TRIAL_ENERGY_J = ENERGY_J.trial("the GPUs' energy in the timed windows", SUM)
TRIAL_ENERGY_PER_SAMPLE_J = ENERGY_PER_SAMPLE_J.trial("trial_energy_j / samples")
TRIAL_CPU_ENERGY_J = CPU_ENERGY_J.trial("CPU package energy in the timed windows", SUM)
TRIAL_OTHER_CPU_PCT = OTHER_CPU_PCT.trial("mean of the windows' other_cpu_pct")
# The contention gate (contention=wait, bench.trial.monitors.contention).
WAITED = "contention=wait"
TRIAL_WINDOWS_DISCARDED = trial(
    "trial_windows_discarded", "windows", "shared timed windows measured again", modes=TIMED,
    when=WAITED,
)  # fmt: skip
TRIAL_CONTENTION_WAIT_S = trial(
    "trial_contention_wait_s", "s", "waiting for other processes to let go", modes=TIMED,
    when=WAITED,
)  # fmt: skip
GPU_IDLE_POWER_W = trial("gpu_idle_power_w", "W", "the GPUs' power before use", when=GPU)

# Where the time goes (breakdown=true; a distributed session's own breakdown).
BD, WORKERS = "breakdown=true", "breakdown=true, distributed"
TIME_DATA_MS = trial("time_data_ms", "ms", "waiting for the batch", MEDIAN, False, TIMED, BD)
TIME_FORWARD_MS = trial("time_forward_ms", "ms", "forward and loss", MEDIAN, False, TIMED, BD)
TIME_BACKWARD_MS = trial("time_backward_ms", "ms", "backward pass", MEDIAN, False, TIMED, BD)
TIME_OPTIMIZER_MS = trial("time_optimizer_ms", "ms", "optimizer update", MEDIAN, False, TIMED, BD)
TIME_STEP_MS = trial("time_step_ms", "ms", "the whole step", MEDIAN, False, TIMED, BD)
BREAKDOWN_SUM_PCT = trial("breakdown_sum_pct", "%", "the parts' sum / time_step_ms", when=BD)
BREAKDOWN_STEPS = trial("breakdown_steps", "steps", "pairs of steps timed", when=BD)
TIME_COMM_MS = trial(
    "time_comm_ms", "ms", "exposed communication per step", MEDIAN, False, when=WORKERS
)
TIME_LOCAL_STEP_MS = trial(
    "time_local_step_ms", "ms", "the step without communication", MEDIAN, False, when=WORKERS
)
PS_PUSH_MS = trial("ps_push_ms", "ms", "push to the parameter servers", MEDIAN, False, when=WORKERS)
PS_PULL_MS = trial(
    "ps_pull_ms", "ms", "pull from the parameter servers", MEDIAN, False, when=WORKERS
)
OP_TOTAL_MS = trial("op_total_ms", "ms", "operators' self time per step", when="profile=true")

# Names made at run time.
OP_MS = family("op_{}_ms", "ms", TRIAL, "an operator category's self time per step", "profile=true")
TIME_PHASE_MS = family("time_{}_ms", "ms", TRIAL, "a breakdown phase's time per step", BD)
WORKER = family(
    "worker{}", "", "window, trial", "a worker's own figure: worker<i>_<name>", "workers"
)
STAGE = family("stage{}", "", WINDOW, "a stage's parameters, peak memory", "model_parallel")
GPU_IDLE = family("gpu{}_idle_power_w", "W", TRIAL, "one GPU's idle power", "GPUs")

# Serving (mode=serve, bench.trial.serve, docs/serving.md): each LoadGen run is a window (a
# find_peak probe each); the trial's are trial_* (the run's, or find_peak's peak run's).
SRV, SERVER, PEAK, ACC = ("serve",), "Server", "serve.mode=find_peak", "serve.mode=accuracy"
SERVE_SAMPLES_PER_S = window("serve_samples_per_s", "samples/s", "LoadGen's throughput figure "
                             "of the scenario", MEDIAN, True, SRV)  # fmt: skip
SERVE_LATENCY_P50_MS = window("serve_latency_p50_ms", "ms", "LoadGen's median query latency",
                              MEDIAN, False, SRV)  # fmt: skip
SERVE_LATENCY_P90_MS = window("serve_latency_p90_ms", "ms", "LoadGen's 90th percentile "
                              "latency", MEDIAN, False, SRV)  # fmt: skip
SERVE_LATENCY_P99_MS = window("serve_latency_p99_ms", "ms", "LoadGen's 99th percentile "
                              "latency", MEDIAN, False, SRV)  # fmt: skip
SERVE_LATENCY_P999_MS = window("serve_latency_p999_ms", "ms", "LoadGen's 99.9th percentile "
                               "latency", MEDIAN, False, SRV)  # fmt: skip
SERVE_LATENCY_MEAN_MS = window("serve_latency_mean_ms", "ms", "LoadGen's mean latency", MEDIAN,
                               False, SRV)  # fmt: skip
SERVE_VALID = window("serve_valid", "", "LoadGen's verdict: 1 VALID, 0 INVALID", LAST, True,
                     SRV)  # fmt: skip
SERVE_MEAN_BATCH = window("serve_mean_batch", "samples", "samples per batch the SUT ran",
                          MEAN, None, SRV)  # fmt: skip
SERVE_TARGET_QPS = window("serve_target_qps", "QPS", "Server's offered load", LAST, None, SRV,
                          SERVER)  # fmt: skip
SERVE_SCHEDULED_QPS = window("serve_scheduled_qps", "QPS", "the load LoadGen scheduled", LAST,
                             None, SRV, SERVER)  # fmt: skip
# A causal LM under LoadGen's token latencies (use_token_latencies; not under Offline, whose
# summary has tokens/s only).
LM, LM_TIMED = "causal LMs", "causal LMs, not under Offline"
SERVE_TTFT_P50_MS = window("serve_time_to_first_token_p50_ms", "ms", "LoadGen's median time "
                           "to first token", MEDIAN, False, SRV, LM_TIMED)  # fmt: skip
SERVE_TTFT_P90_MS = window("serve_time_to_first_token_p90_ms", "ms", "LoadGen's 90th "
                           "percentile time to first token", MEDIAN, False, SRV,
                           LM_TIMED)  # fmt: skip
SERVE_TTFT_P99_MS = window("serve_time_to_first_token_p99_ms", "ms", "LoadGen's 99th "
                           "percentile time to first token", MEDIAN, False, SRV,
                           LM_TIMED)  # fmt: skip
SERVE_TPOT_P50_MS = window("serve_time_per_output_token_p50_ms", "ms", "LoadGen's median "
                           "time per output token", MEDIAN, False, SRV, LM_TIMED)  # fmt: skip
SERVE_TPOT_P90_MS = window("serve_time_per_output_token_p90_ms", "ms", "LoadGen's 90th "
                           "percentile time per output token", MEDIAN, False, SRV,
                           LM_TIMED)  # fmt: skip
SERVE_TPOT_P99_MS = window("serve_time_per_output_token_p99_ms", "ms", "LoadGen's 99th "
                           "percentile time per output token", MEDIAN, False, SRV,
                           LM_TIMED)  # fmt: skip
SERVE_TOKENS_PER_S = window("serve_tokens_per_s", "tokens/s", "LoadGen's tokens per second",
                            MEDIAN, True, SRV, LM)  # fmt: skip
TRIAL_SERVE_SAMPLES_PER_S = SERVE_SAMPLES_PER_S.trial("the trial's run's")
TRIAL_SERVE_LATENCY_P50_MS = SERVE_LATENCY_P50_MS.trial("the trial's run's")
TRIAL_SERVE_LATENCY_P90_MS = SERVE_LATENCY_P90_MS.trial("the trial's run's")
TRIAL_SERVE_LATENCY_P99_MS = SERVE_LATENCY_P99_MS.trial("the trial's run's")
TRIAL_SERVE_LATENCY_P999_MS = SERVE_LATENCY_P999_MS.trial("the trial's run's")
TRIAL_SERVE_LATENCY_MEAN_MS = SERVE_LATENCY_MEAN_MS.trial("the trial's run's")
TRIAL_SERVE_VALID = SERVE_VALID.trial("the trial's run's verdict", MEAN)
TRIAL_SERVE_MEAN_BATCH = SERVE_MEAN_BATCH.trial("the trial's run's")
TRIAL_SERVE_TARGET_QPS = SERVE_TARGET_QPS.trial("the trial's run's")
TRIAL_SERVE_SCHEDULED_QPS = SERVE_SCHEDULED_QPS.trial("the trial's run's")
TRIAL_SERVE_TTFT_P50_MS = SERVE_TTFT_P50_MS.trial("the trial's run's")
TRIAL_SERVE_TTFT_P90_MS = SERVE_TTFT_P90_MS.trial("the trial's run's")
TRIAL_SERVE_TTFT_P99_MS = SERVE_TTFT_P99_MS.trial("the trial's run's")
TRIAL_SERVE_TPOT_P50_MS = SERVE_TPOT_P50_MS.trial("the trial's run's")
TRIAL_SERVE_TPOT_P90_MS = SERVE_TPOT_P90_MS.trial("the trial's run's")
TRIAL_SERVE_TPOT_P99_MS = SERVE_TPOT_P99_MS.trial("the trial's run's")
TRIAL_SERVE_TOKENS_PER_S = SERVE_TOKENS_PER_S.trial("the trial's run's")
SERVE_PEAK_QPS = trial("serve_peak_qps", "QPS", "the highest VALID target QPS (0: none)",
                       MEDIAN, True, SRV, PEAK)  # fmt: skip
SERVE_PEAK_LATENCY_P99_MS = trial("serve_peak_latency_p99_ms", "ms",
                                  "the peak run's p99 (an LM's: first token's)",
                                  MEDIAN, False, SRV, PEAK)  # fmt: skip
SERVE_PROBES = trial("serve_probes", "runs", "LoadGen runs find_peak made", MEDIAN, None, SRV,
                     PEAK)  # fmt: skip
TRIAL_SERVE_ACCURACY_AGREEMENT = trial("trial_serve_accuracy_agreement", "", "served answers "
                                       "equal to the framework's batch outputs", MEAN, True,
                                       SRV, ACC)  # fmt: skip
TRIAL_SERVE_TOP1 = trial("trial_serve_top1", "", "served answers' accuracy", MEAN, True, SRV,
                         ACC + ", labelled data")  # fmt: skip

# --- A sweep's parent run ------------------------------------------------------------------

REFERENCE_STEP_S = sweep("reference_step_s", "s", "the drift check's step, step=round", False)
