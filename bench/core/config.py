"""Typed configuration: the one boundary where input is checked.

Hydra composes the YAML in ``conf/`` on top of :class:`BenchConfig`, so an unknown key or a
wrongly typed value is refused at composition.  :func:`bench.checks.rules.check` then checks
what types cannot (ranges, choices) and names the field of every problem;
:mod:`bench.checks.config` adds each family's rules, :mod:`bench.checks.host` the machine's.  Here:
the schema, each field's part in a configuration's identity (:mod:`bench.core.fields`),
what a config implies (threads, timeouts), its conversion to and from plain dicts.  This module
imports nothing of bench but the framework names and the strategies' typed configs
(:mod:`bench.core.strategy_configs`): everything else builds on it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench.core.fields import Uses, keyed
from bench.core.frameworks import NAMES, TORCH
from bench.core.strategy_configs import STRATEGY_CONFIGS, DistributedConfig

FRAMEWORKS = NAMES  # bench.core.frameworks: each one's spec
# generate: a causal LM's prefill and greedy decoding with its KV cache (bench.trial.generate);
# serve: the model served under MLPerf's LoadGen (bench.trial.serve).
MODES = ("train", "infer", "generate", "serve")
# mode=serve: LoadGen's scenarios and what a trial does with them (bench.trial.serve).
SERVE_SCENARIOS = ("single_stream", "multi_stream", "server", "offline")
SERVE_MODES = ("performance", "accuracy", "find_peak")
DEVICES = ("auto", "cpu", "cuda")
LAUNCHERS = ("process", "inline", "docker")
DOCKER_VARIANTS = ("auto", "cpu", "cuda")
DATASETS = ("synthetic", "digits", "cifar10", "cifar100", "folder")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam")
# How a timed window's step times are taken (bench.trial.loop): ``step``, the host's clock with
# the device synchronized after every step; ``events``, the device's own events recorded
# after every step, the host synchronizing only at the window's edges (where the framework
# has them: torch on CUDA, else ``step``); ``auto``, bench's default for the device.
TIMINGS = ("auto", "step", "events")
# tuning=default runs the configuration as given; tuning=best first searches the framework's
# own speed settings (bench.trial.frameworks.spaces) and runs the fastest (bench.trial.tuning).
TUNINGS = ("default", "best")
# oneDNN (MKL-DNN) kernels on the CPU: the framework's own default, or forced on or off.
ONEDNN = ("auto", "on", "off")
# goal=none times windows; goal=accuracy trains until a held-out evaluation reaches
# goal.target (time to accuracy, bench.trial.loop; docs/accuracy.md).
GOALS = ("none", "accuracy")
GOAL_METRICS = ("top1",)
# What a trial does about other processes on its CPUs (bench.trial.monitors.contention): ``wait``,
# a timed window they shared is discarded and measured again once they let go (bounded);
# ``tag``, the windows are kept and a shared trial is tagged ``bench.contention``; ``off``,
# neither.  BENCH_CONTENTION sets the default (a test suite whose own workers load the
# machine sets ``tag``: waiting would only add time there).
CONTENTIONS = ("wait", "tag", "off")
CONTENTION_ENV = "BENCH_CONTENTION"


def default_contention() -> str:
    """``contention``'s default: $BENCH_CONTENTION, else ``wait`` (a bad value is refused
    by the config's rules, naming the key)."""
    return os.environ.get(CONTENTION_ENV, "").strip() or CONTENTIONS[0]


_SEQUENCE_MODEL = Uses("model.task", ("image",), unless=True)  # sizes image models ignore
_SEARCHING = Uses("tuning.name", ("default",), unless=True)
_GENERATING = Uses("mode", ("generate", "serve"))  # serve: a causal LM's prompts
_SERVING = Uses("mode", ("serve",))


# steps_per_epoch=-1: as many steps as make each timed window last min_window_s.
AUTO = -1
AUTO_MIN_STEPS = 3  # an auto window has at least this many steps (percentiles need some)
DEFAULT_MIN_WINDOW_S = 2.0  # scripts/measure/bench_window_cv.py: every side under 5% CV at 2 s


@dataclass
class FrameworkConfig:
    name: str = TORCH
    # The framework's version: "" is the one the host's environment pins; "installed" is
    # whatever the trial's interpreter has (no environment made or checked: a site's or a
    # container's own build); any other runs in an environment of its own, made on first
    # use (bench.core.versions, bench.envs.environments).
    version: str = keyed("", new=True, quiet_default=True)
    # Not set by hand: the version (and CUDA/cuDNN build) the trial's interpreter has, as
    # composition finds it, for version=installed and for a pinned run whose interpreter
    # has another version than the pin; "" otherwise.  Part of the configuration's identity.
    installed: str = keyed("", new=True, quiet_default=True)


@dataclass
class ModelConfig:
    name: str = "resnet50"
    # "bench": bench's own architecture, identical in both frameworks; "stock": the framework
    # library's model (torchvision.models / keras.applications), where it has one; "py":
    # your own builder (model.builder); "keras", "torchvision", "timm": the library's model
    # named model.name (keras.applications.<name>, torchvision.models.<name>,
    # timm.create_model(<name>)), for its framework; "hf": a Hugging Face causal LM.
    source: str = "bench"
    # Sizes of the sequence models (lstm, transformer, bert_base, deepspeech2), set per model
    # in conf/model/<name>.yaml; image models ignore them (and sequence models ignore
    # image_size and num_classes).  The defaults are small enough for CPU tests.
    # Tokens per sample; spectrogram frames for deepspeech2.
    seq_len: int = keyed(32, used=_SEQUENCE_MODEL)
    # Tokens; output characters incl. the CTC blank for deepspeech2.
    vocab_size: int = keyed(1000, used=_SEQUENCE_MODEL)
    # LSTM layers, encoder blocks, bidirectional GRU layers.
    layers: int = keyed(2, used=_SEQUENCE_MODEL)
    # LSTM units (and embedding width), encoder width, GRU units.
    hidden: int = keyed(128, used=_SEQUENCE_MODEL)
    heads: int = keyed(4, used=_SEQUENCE_MODEL)  # attention heads (transformer)
    intermediate: int = keyed(512, used=_SEQUENCE_MODEL)  # feed-forward width (transformer)
    max_positions: int = keyed(512, used=_SEQUENCE_MODEL)  # position embeddings (transformer)
    freq_bins: int = keyed(80, used=_SEQUENCE_MODEL)  # spectrogram frequency bins (deepspeech2)
    # Your own model (model=py, docs/your-model.md): the builder, "MODULE:FUNCTION", for
    # every framework, or one per framework (model.torch, model.tf; either wins over
    # model.builder); the module is imported from the working directory or an installed
    # package.  model.source=py only.
    builder: str = keyed("", new=True, quiet_default=True)
    torch: str = keyed("", new=True, quiet_default=True)
    tf: str = keyed("", new=True, quiet_default=True)
    # What a model of model.source=py does: "image" (logits from images, cross-entropy);
    # "" for the zoo's models and the libraries' image models, whose task is a fact.
    task: str = keyed("", new=True, quiet_default=True)
    # Not set by hand: the SHA-256 of the builders' module sources as composition reads them
    # (model.source=py), so that an edited builder is a new configuration; "" otherwise.
    digest: str = keyed("", new=True, quiet_default=True)
    # model=hf (bench.trial.models.hf_lm): fields of the family's Hugging Face config class that
    # bench's own size keys above do not cover (model.config.rope_theta=...), validated
    # against the class before any trial; each is part of the identity
    # (model.config.<field>).  Empty for every other model.
    config: dict[str, Any] = keyed(factory=dict, new=True, quiet_default=True)


@dataclass
class DataConfig:
    name: str = "synthetic"
    # Distinct synthetic batches generated before timing and cycled through.
    num_batches: int = 4
    # Where the CIFAR archives (python versions) are (`bench data download` fetches them), or
    # data=folder's folder of class folders.
    root: str = keyed("data", used=Uses("data.name", ("synthetic", "digits"), unless=True))
    # Loader processes (torch DataLoader workers) / parallel calls (tf.data map).
    workers: int = 2
    # Keep converted samples in memory after the first pass (tf.data cache(); torch: a
    # pre-converted tensor data set).
    cache: bool = False
    # Measure test_accuracy and test_loss after every epoch (labelled data only).
    evaluate: bool = True
    # data=folder: resize every image to image_size square (bilinear); off, images of any
    # other size are refused before the trial (bench.trial.data.folder).
    resize: bool = keyed(False, new=True, used=Uses("data.name", ("folder",)))


@dataclass
class OptimizerConfig:
    name: str = "sgd"
    lr: float = 0.01
    momentum: float = keyed(0.9, used=Uses("optimizer.name", ("adam",), unless=True))
    weight_decay: float = 0.0


@dataclass
class DockerConfig:
    """``launcher=docker``: each trial in a fresh container of the framework's pinned image."""

    # An image to run as it is (tag or id); empty: bench's own image for the framework,
    # built from docker/ when its content-hash tag is missing.
    image: str = ""
    # The image that bench's image is built on; empty: the framework's official image.
    base_image: str = ""
    # cpu | cuda | auto (cuda when gpus is set, else cpu).
    variant: str = "auto"
    # GPUs passed to the container: "" none, "all", a count ("2") or device ids ("0,1").
    gpus: str = ""
    # A CA bundle (PEM file) for pip during image builds, e.g. behind a TLS-intercepting proxy.
    ca_bundle: str = ""
    # A directory of wheels pip may install from during image builds (e.g. a CPU torch build).
    wheelhouse: str = ""
    # A trial's container stops itself when the host's heartbeat is this many seconds old
    # (the host process crashed or was killed).
    heartbeat_timeout_s: float = keyed(15.0, canonical=True)
    # The container's own /dev/shm (it shares no IPC namespace with the host), in MiB:
    # Docker's default; raise it for data loaders that pass batches through shared memory.
    shm_size_mb: int = keyed(64, new=True, quiet_default=True)


@dataclass
class LauncherConfig:
    name: str = "process"
    # Seconds between SIGTERM and SIGKILL when a trial is stopped.
    kill_grace_s: float = keyed(5.0, canonical=True)
    # Cap on the trial process's heap (RLIMIT_DATA) in MiB, so that exhausting it is an
    # out-of-memory result rather than the host swapping; 0 means no cap.
    # With launcher=docker: the container's memory limit (its whole cgroup).
    memory_limit_mb: int = 0
    # The most of a trial's files the host logs as artifacts (bench.launchers.collect), in
    # MiB (each file at the larger of its length and allocated size) and in files; what is
    # over is left out and named (bench.refused_files).  Say how a result is kept: no hash.
    max_artifact_mb: int = keyed(1024, measured=False, logged=False)
    max_artifact_files: int = keyed(10_000, measured=False, logged=False)
    docker: DockerConfig = keyed(factory=DockerConfig, used=Uses("launcher.name", ("docker",)))


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlruns/mlflow.db"
    experiment: str = "bench"


@dataclass
class TelemetryConfig:
    # Sample GPU (NVML) and host (psutil, RAPL) readings in background threads.
    enabled: bool = True
    interval_s: float = keyed(0.1, used=Uses("telemetry.enabled", ("false",), unless=True))


def distributed_config(value: str | dict[str, Any]) -> DistributedConfig:
    """The typed config of a strategy from its serialized form: a dict (``to_dict``), or a
    bare name (the config.json of runs logged before ``distributed`` was a group).  An
    unknown name keeps its name, for :mod:`bench.checks.config` to refuse."""
    data = {"name": value} if isinstance(value, str) else dict(value)
    cls = STRATEGY_CONFIGS.get(str(data.get("name")), DistributedConfig)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError([f"distributed.{unknown[0]}: unknown field for {cls.__name__}"])
    return cls(**data)


@dataclass
class TuningConfig:
    """``tuning=default|best`` (a config group, conf/tuning/): ``best`` searches the
    framework's speed settings in short child processes before the trial (bench.trial.tuning)."""

    name: str = keyed("default", new=True)
    # The search's own settings say how it runs, not what the trial measures (its pick is
    # logged as the run's tuned.* params): only the name is part of the identity.
    # Search again even where the cache holds a search for this configuration on this host.
    refresh: bool = keyed(False, measured=False, used=_SEARCHING)
    # Stop trying candidates once the search has run this long (the best so far wins).
    budget_s: float = keyed(600.0, measured=False, used=_SEARCHING)
    # Each candidate's timed probe windows last at least this long (3 windows).
    probe_s: float = keyed(1.0, measured=False, used=_SEARCHING)
    # Search only these settings (bench.trial.frameworks.spaces.SEARCHABLE's keys); empty: all of
    # the framework's.
    keys: list[str] = keyed(factory=list, measured=False, used=_SEARCHING)


@dataclass
class GoalConfig:
    """``goal=none|accuracy`` (a config group, conf/goal/): ``accuracy`` trains full passes
    over a labelled training set, evaluates on its held-out split every ``eval_every`` of
    a pass and stops at the first evaluation whose ``metric`` reaches ``target``, or after
    ``max_epochs`` passes (then ``reached`` is 0: a result, not an error)."""

    name: str = "none"
    target: float = 0.95
    metric: str = "top1"
    max_epochs: int = 20
    # An evaluation every this fraction of a pass over the training set (1: every epoch).
    eval_every: float = 1.0


@dataclass
class ServeConfig:
    """``mode=serve``: the model served under MLPerf's LoadGen (bench.trial.serve,
    docs/serving.md).  The defaults are seconds, not MLPerf's ten minutes: a run shorter
    than MLPerf's rules is tagged so (``serve.rules``) beside LoadGen's own verdict."""

    # single_stream | multi_stream | server | offline (LoadGen's four scenarios).
    scenario: str = "server"
    # performance: one LoadGen run; accuracy: LoadGen's accuracy run, its answers checked
    # against the framework's own batch outputs; find_peak (Server): the highest target QPS
    # LoadGen reports VALID at the latency bound (a bisection of performance runs).
    mode: str = "performance"
    # The batching policy every framework shares: up to max_batch samples a batch, waiting
    # at most batch_timeout_ms after the first queued sample for more (0: no wait).
    max_batch: int = 8
    batch_timeout_ms: float = 0.0
    # Server: the offered load (find_peak's first probe) and the latency bound at a percentile.
    target_qps: float = 50.0
    latency_bound_ms: float = 50.0
    latency_percentile: float = 0.99
    # A causal LM (LoadGen's token latencies): latency_bound_ms bounds the time to first
    # token, this the time per output token (0: no bound).
    tpot_bound_ms: float = keyed(0.0, new=True)
    # MultiStream: samples per query (MLPerf's 8).
    samples_per_query: int = 8
    # performance mode: this many LoadGen runs back to back in the trial's one process, each
    # a window of its history (the trial's figures: the last run's); tuning=best's probes
    # run 3 (bench.trial.tuning.search).
    runs: int = keyed(1, new=True)
    # LoadGen's minimum duration and query count (MLPerf's: 600 s; see bench.trial.serve);
    # min_queries=0: the fewest queries LoadGen's early stopping can pass at the scenario's
    # percentile (459 at p99, 44 at SingleStream's p90; Offline: 1 query).
    min_duration_s: float = 2.0
    min_queries: int = 0
    # Offline's expected samples/s, which sizes its one query; 0: measured in the warm-up.
    expected_qps: float = 0.0
    # find_peak: at most this many LoadGen runs; stop when the lowest INVALID load is within
    # this fraction of the highest VALID one.
    peak_probes: int = 8
    peak_tolerance: float = 0.1


def early_stopping_queries(percentile: float) -> int:
    """The fewest queries LoadGen's early stopping passes at ``percentile`` (0.99: p99), all
    of them within the bound: log(1 - 0.99) / log(p) (459 at p99, 44 at p90; measured with a
    fake SUT: 440 queries fail, 470 pass)."""
    import math

    return math.ceil(math.log(1 - 0.99) / math.log(percentile))


@dataclass
class BenchConfig:
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    tracking: TrackingConfig = keyed(factory=TrackingConfig, measured=False)
    mode: str = "train"
    device: str = "auto"
    batch_size: int = 32
    image_size: int = 32
    num_classes: int = 10
    epochs: int = 2
    # Steps per timed epoch: -1 (auto) sizes each timed window to last at least
    # min_window_s, from the step time of a few untimed steps after the warm-up (at least
    # AUTO_MIN_STEPS steps, at most max_steps_per_epoch); 0 means one full pass over a
    # labelled training set.
    steps_per_epoch: int = AUTO
    min_window_s: float = keyed(DEFAULT_MIN_WINDOW_S, auto_only=True)
    max_steps_per_epoch: int = keyed(10_000, auto_only=True)
    warmup_steps: int = 2
    seed: int = 0
    # Intra-op and inter-op threads for both frameworks; 0 means one per usable CPU core.
    threads: int = 0
    # fp32 (full float32: TensorFloat-32 tensor cores off, which cuDNN and TF otherwise use
    # on a GPU), tf32 (float32 with TF32 matrix products and convolutions, CUDA only), or
    # mixed precision with fp16 (CUDA only) or bf16 compute.
    precision: str = "fp32"
    # torch.compile / XLA jit_compile; compilation happens in the warm-up steps.
    compile: bool = False
    # Inter-op threads (torch's inter-op pool, TensorFlow's inter-op pool, MXNet's CPU engine
    # workers); 0: each framework as before this key existed (torch and tf: ``threads``,
    # MXNet: 1).
    inter_threads: int = keyed(0, new=True)
    # torch only: the model and its input batches in channels-last (NHWC) memory format.
    channels_last: bool = keyed(False, new=True)
    # oneDNN kernels on the CPU: auto (the framework's default) | on | off.
    onednn: str = keyed("auto", new=True)
    # torch on CUDA only: cuDNN autotuning (torch.backends.cudnn.benchmark), which times
    # several convolution algorithms in the first steps and keeps the fastest.
    cudnn_benchmark: bool = keyed(False, new=True)
    # tuning=default | best (the group conf/tuning/): best runs the fastest of the
    # framework's speed settings (bench.trial.tuning; docs/tuning.md).
    tuning: TuningConfig = keyed(factory=TuningConfig, as_name=True)
    # How step times are taken in a timed window: auto | step | events (TIMINGS above).
    # Every window starts and ends with the device synchronized, whichever it is.  The
    # method a run used is its timing tag; auto is hashed as before there was a choice.
    timing: str = keyed("auto", new=True, quiet_default=True)
    # Other processes on the trial's CPUs: wait | tag | off (CONTENTIONS above).  How a
    # trial is measured, not what: not hashed (a run measured under any is reused).
    contention: str = keyed(factory=default_contention, measured=False)
    # Keys keyed(measured=False) say where or how a result is recorded, not what is
    # measured: not part of the identity, not hashed.  (``telemetry``, ``breakdown`` and
    # ``profile`` are: they decide which figures a run holds, so an ok run without them must
    # not satisfy, and skip, a request for them.)
    timeout_s: float = keyed(600.0, measured=False)
    force: bool = keyed(False, measured=False)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    # Extra passes after the timed epochs (never during them): split a step into data,
    # forward, backward and optimizer time; run steps under the framework's profiler.
    breakdown: bool = False
    profile: bool = False
    # Run each configuration this many times (a sweep interleaves the repeats), or "auto":
    # rounds until every comparison of the sweep is settled (bench.analysis.sequential), at
    # most max_repeats, within repeats_budget_s (0: no budget); ``repeat`` is the index of
    # one run among them, set by the sweeper.
    repeats: Any = keyed(1, measured=False)
    repeat: int = 0
    # mode=generate (causal LMs): prompt tokens per sequence and tokens generated after them
    # (greedy, at least this many: end-of-sequence is ignored); batch_size prompts at once.
    prompt_len: int = keyed(128, new=True, used=_GENERATING)
    new_tokens: int = keyed(32, new=True, used=_GENERATING)
    # mode=serve: LoadGen's scenario and settings, and the batching policy (ServeConfig).
    serve: ServeConfig = keyed(factory=ServeConfig, new=True, used=_SERVING)
    max_repeats: int = keyed(10, measured=False)
    repeats_budget_s: float = keyed(0.0, measured=False)
    # Two sides whose whole interval of the time ratio lies within ±this are "equivalent".
    equivalence_margin: float = keyed(0.02, measured=False)
    # At the end of a sweep, write the comparison report (bench.report) to its parent run.
    report: bool = keyed(False, measured=False)
    # Before the first trial, check training parity (python -m bench.parity) for every
    # group of trials that would be compared; failed groups are "not comparable".
    parity: bool = keyed(False, measured=False)
    # Claims about the sweep's runs (a study's findings, or expectations), checked in its
    # report (bench.report.claims; docs/report.md, "Claims"); a non-empty list writes the
    # report.  Not part of any configuration: not hashed, not logged as a param.
    claims: list[Any] = keyed(factory=list, measured=False, logged=False)
    # Let a sweep run where frameworks compared under one ``device`` setting would train on
    # different kinds of device (bench.checks.device refuses it otherwise).
    allow_mixed_devices: bool = keyed(False, measured=False)
    # Skip (and list) the cells of a sweep this machine cannot run, a GPU trial on a host
    # without one or a multi-node trial outside an allocation, instead of refusing the
    # sweep; the study presets set it (bench.checks.availability.not_here).
    skip_unavailable: bool = keyed(False, measured=False, logged=False)
    # The size of a study preset (conf/experiment/seed*.yaml): paper | machine | smoke; set
    # by the preset's ``scale`` group, "" elsewhere.  Its settings are the run's params.
    scale: str = keyed("", measured=False, logged=False)
    # Distributed training (bench.trial.distributed): the strategy (a config group, with its own
    # settings), worker processes (or devices) per node, nodes, and parameter servers
    # (ps_async, kvstore_sync/async).  batch_size is per worker, so a step of the whole job
    # trains workers x nodes x batch_size samples; ``threads`` is the CPU thread budget of a
    # node, divided among its workers.
    distributed: DistributedConfig = keyed(factory=DistributedConfig, as_name=True)
    workers: int = 1
    nodes: int = 1
    ps: int = 0
    # What a trial trains for: timed windows (none) or a quality target (accuracy).  Added
    # after runs were logged without it: hashed only away from goal=none's defaults.
    goal: GoalConfig = keyed(factory=GoalConfig, new=True, quiet_default=True)


# What tuning.keys may name: the settings a search can set (bench.trial.frameworks.spaces).
TUNABLE = ("compile", "channels_last", "onednn", "threads", "inter_threads", "cudnn_benchmark")
# What tuning=best also searches under mode=serve (bench.trial.frameworks.spaces.SERVE_DEFAULTS).
SERVE_TUNABLE = ("serve.max_batch",)


class ConfigError(ValueError):
    """Bad input. ``str()`` lists every problem, one per line, each naming its field."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# What a tuning=best search may take beyond its budget: its last candidate runs to its end.
TUNING_GRACE_S = 120.0


def trial_timeout_s(cfg: BenchConfig) -> float:
    """How long a launcher lets the trial run: ``timeout_s``, plus, under tuning=best, the
    search's budget and grace (the search runs in the trial's process, before its epochs)."""
    if cfg.tuning.name == "best":
        return cfg.timeout_s + cfg.tuning.budget_s + TUNING_GRACE_S
    return cfg.timeout_s


def resolved_threads(cfg: BenchConfig) -> int:
    return cfg.threads if cfg.threads > 0 else usable_cpus()


def samples_per_step(cfg: BenchConfig) -> int:
    """Samples one step of one process trains on: ``batch_size`` per device, and
    kvstore_device steps ``workers`` devices at once."""
    return cfg.batch_size * (cfg.workers if cfg.distributed.per_device else 1)


def auto_repeats(cfg: BenchConfig) -> bool:
    return isinstance(cfg.repeats, str) and cfg.repeats.strip().lower() == "auto"


def to_dict(cfg: BenchConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a (nested) config dataclass from :func:`to_dict` output."""
    assert dataclasses.is_dataclass(cls)
    kwargs: dict[str, Any] = {}
    hints = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in hints:
            raise ConfigError([f"{key}: unknown field for {cls.__name__}"])
        default = hints[key].default_factory
        if default is DistributedConfig:
            kwargs[key] = distributed_config(value)
        elif isinstance(value, dict) and dataclasses.is_dataclass(default):
            kwargs[key] = from_dict(type(default()), value)
        else:
            kwargs[key] = value
    return cls(**kwargs)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a nested config.  The strategy flattens to ``distributed`` (its name,
    the param runs have always had) and ``distributed.<setting>``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if name == "distributed" and isinstance(value, dict):
            out[name] = value.get("name")
            out.update({f"{name}.{k}": v for k, v in value.items() if k != "name"})
        elif isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out
