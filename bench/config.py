"""Typed configuration: the one boundary where input is checked.

Hydra composes the YAML in ``conf/`` on top of :class:`BenchConfig`, so an unknown key or a
wrongly typed value is refused at composition.  :func:`check` then checks what types cannot
(ranges, choices) and names the field of every problem; :func:`bench.preflight.validate`
adds each family's rules and the machine probes.  This module imports nothing of bench but
the strategies' typed configs (:mod:`bench.strategy_configs`): everything else builds on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench.strategy_configs import STRATEGY_CHOICES, STRATEGY_CONFIGS, DistributedConfig

FRAMEWORKS = ("torch", "tf", "mxnet")
MODES = ("train", "infer")
DEVICES = ("auto", "cpu", "cuda")
LAUNCHERS = ("process", "inline", "docker")
DOCKER_VARIANTS = ("auto", "cpu", "cuda")
DATASETS = ("synthetic", "digits", "cifar10", "cifar100")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam")
# How a timed window's step times are taken (bench.trial): ``step``, the host's clock with
# the device synchronized after every step; ``events``, the device's own events recorded
# after every step, the host synchronizing only at the window's edges (where the framework
# has them: torch on CUDA, else ``step``); ``auto``, bench's default for the device.
TIMINGS = ("auto", "step", "events")
# tuning=default runs the configuration as given; tuning=best first searches the framework's
# own speed settings (bench.frameworks.spaces) and runs the fastest (bench.tuning).
TUNINGS = ("default", "best")
# oneDNN (MKL-DNN) kernels on the CPU: the framework's own default, or forced on or off.
ONEDNN = ("auto", "on", "off")


# steps_per_epoch=-1: as many steps as make each timed window last min_window_s.
AUTO = -1
AUTO_MIN_STEPS = 3  # an auto window has at least this many steps (percentiles need some)
DEFAULT_MIN_WINDOW_S = 2.0  # scripts/bench_window_cv.py: every side under 5% CV at 2 s


@dataclass
class FrameworkConfig:
    name: str = "torch"
    # The framework's version: "" is the one the host's environment pins; "installed" is
    # whatever the trial's interpreter has (no environment made or checked: a site's or a
    # container's own build); any other runs in an environment of its own, made on first
    # use (bench.versions, bench.environments).
    version: str = ""
    # Not set by hand: the version (and CUDA/cuDNN build) the trial's interpreter has, as
    # composition finds it, for version=installed and for a pinned run whose interpreter
    # has another version than the pin; "" otherwise.  Part of the configuration's identity.
    installed: str = ""


@dataclass
class ModelConfig:
    name: str = "resnet50"
    # "bench": bench's own architecture, identical in both frameworks; "stock": the framework
    # library's model (torchvision.models / keras.applications), where it has one.
    source: str = "bench"
    # Sizes of the sequence models (lstm, transformer, bert_base, deepspeech2), set per model
    # in conf/model/<name>.yaml; image models ignore them (and sequence models ignore
    # image_size and num_classes).  The defaults are small enough for CPU tests.
    seq_len: int = 32  # tokens per sample; spectrogram frames for deepspeech2
    vocab_size: int = 1000  # tokens; output characters incl. the CTC blank for deepspeech2
    layers: int = 2  # LSTM layers, encoder blocks, bidirectional GRU layers
    hidden: int = 128  # LSTM units (and embedding width), encoder width, GRU units
    heads: int = 4  # attention heads (transformer)
    intermediate: int = 512  # feed-forward width (transformer)
    max_positions: int = 512  # position embeddings (transformer)
    freq_bins: int = 80  # spectrogram frequency bins (deepspeech2)


@dataclass
class DataConfig:
    name: str = "synthetic"
    # Distinct synthetic batches generated before timing and cycled through.
    num_batches: int = 4
    # Where the CIFAR archives (python versions) are; `bench data download` fetches them.
    root: str = "data"
    # Loader processes (torch DataLoader workers) / parallel calls (tf.data map).
    workers: int = 2
    # Keep converted samples in memory after the first pass (tf.data cache(); torch: a
    # pre-converted tensor data set).
    cache: bool = False
    # Measure test_accuracy and test_loss after every epoch (labelled data only).
    evaluate: bool = True


@dataclass
class OptimizerConfig:
    name: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
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
    heartbeat_timeout_s: float = 15.0


@dataclass
class LauncherConfig:
    name: str = "process"
    # Seconds between SIGTERM and SIGKILL when a trial is stopped.
    kill_grace_s: float = 5.0
    # Cap on the trial process's heap (RLIMIT_DATA) in MiB, so that exhausting it is an
    # out-of-memory result rather than the host swapping; 0 means no cap.
    # With launcher=docker: the container's memory limit (its whole cgroup).
    memory_limit_mb: int = 0
    docker: DockerConfig = field(default_factory=DockerConfig)


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlruns/mlflow.db"
    experiment: str = "bench"


@dataclass
class TelemetryConfig:
    # Sample GPU (NVML) and host (psutil, RAPL) readings in background threads.
    enabled: bool = True
    interval_s: float = 0.1


def distributed_config(value: str | dict[str, Any]) -> DistributedConfig:
    """The typed config of a strategy from its serialized form: a dict (``to_dict``), or a
    bare name (the config.json of runs logged before ``distributed`` was a group).  An
    unknown name keeps its name, for :func:`bench.distributed.registry.check` to refuse."""
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
    framework's speed settings in short child processes before the trial (bench.tuning)."""

    name: str = "default"
    # Search again even where the cache holds a search for this configuration on this host.
    refresh: bool = False
    # Stop trying candidates once the search has run this long (the best so far wins).
    budget_s: float = 600.0
    # Each candidate's timed probe windows last at least this long (3 windows).
    probe_s: float = 1.0
    # Search only these settings (bench.frameworks.spaces.DEFAULTS' keys); empty: all of the
    # framework's.
    keys: list[str] = field(default_factory=list)


@dataclass
class BenchConfig:
    framework: FrameworkConfig = field(default_factory=FrameworkConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
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
    min_window_s: float = DEFAULT_MIN_WINDOW_S
    max_steps_per_epoch: int = 10_000
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
    inter_threads: int = 0
    # torch only: the model and its input batches in channels-last (NHWC) memory format.
    channels_last: bool = False
    # oneDNN kernels on the CPU: auto (the framework's default) | on | off.
    onednn: str = "auto"
    # torch on CUDA only: cuDNN autotuning (torch.backends.cudnn.benchmark), which times
    # several convolution algorithms in the first steps and keeps the fastest.
    cudnn_benchmark: bool = False
    # tuning=default | best (the group conf/tuning/): best runs the fastest of the
    # framework's speed settings (bench.tuning; docs/tuning.md).
    tuning: TuningConfig = field(default_factory=TuningConfig)
    # How step times are taken in a timed window: auto | step | events (TIMINGS above).
    # Every window starts and ends with the device synchronized, whichever it is.
    timing: str = "auto"
    timeout_s: float = 600.0
    force: bool = False
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    # Extra passes after the timed epochs (never during them): split a step into data,
    # forward, backward and optimizer time; run steps under the framework's profiler.
    breakdown: bool = False
    profile: bool = False
    # Run each configuration this many times (a sweep interleaves the repeats), or "auto":
    # rounds until every comparison of the sweep is settled (bench.analysis.sequential), at
    # most max_repeats, within repeats_budget_s (0: no budget); ``repeat`` is the index of
    # one run among them, set by the sweeper.
    repeats: Any = 1
    repeat: int = 0
    max_repeats: int = 10
    repeats_budget_s: float = 0.0
    # Two sides whose whole interval of the time ratio lies within ±this are "equivalent".
    equivalence_margin: float = 0.02
    # At the end of a sweep, write the comparison report (bench.report) to its parent run.
    report: bool = False
    # Before the first trial, check training parity (python -m bench.parity) for every
    # group of trials that would be compared; failed groups are "not comparable".
    parity: bool = False
    # Claims about the sweep's runs (a study's findings, or expectations), checked in its
    # report (bench.report.claims; docs/report.md, "Claims"); a non-empty list writes the
    # report.  Not part of any configuration: not hashed, not logged as a param.
    claims: list[Any] = field(default_factory=list)
    # Let a sweep run where frameworks compared under one ``device`` setting would train on
    # different kinds of device (bench.device_preflight refuses it otherwise).
    allow_mixed_devices: bool = False
    # Skip (and list) the cells of a sweep this machine cannot run, a GPU trial on a host
    # without one or a multi-node trial outside an allocation, instead of refusing the
    # sweep; the study presets set it (bench.sweep.availability.not_here).
    skip_unavailable: bool = False
    # The size of a study preset (conf/experiment/seed*.yaml): paper | machine | smoke; set
    # by the preset's ``scale`` group, "" elsewhere.  Its settings are the run's params.
    scale: str = ""
    # Distributed training (bench.distributed): the strategy (a config group, with its own
    # settings), worker processes (or devices) per node, nodes, and parameter servers
    # (ps_async, kvstore_sync/async).  batch_size is per worker, so a step of the whole job
    # trains workers x nodes x batch_size samples; ``threads`` is the CPU thread budget of a
    # node, divided among its workers.
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    workers: int = 1
    nodes: int = 1
    ps: int = 0


# Fields hashed only where they change what is measured: the auto window's settings with
# steps_per_epoch=-1 (a run with a fixed step count keeps the hash it had before they
# existed).
_AUTO_ONLY = ("min_window_s", "max_steps_per_epoch")

# Fields that say where or how a result is recorded, not what is measured.
# (``telemetry``, ``breakdown`` and ``profile`` are hashed: they decide which figures a run
# holds, so an ok run without them must not satisfy, and skip, a request for them.)
_NOT_HASHED = (
    "tracking", "force", "timeout_s", "repeats", "report", "parity", "allow_mixed_devices",
    "claims", "skip_unavailable", "scale", "max_repeats", "repeats_budget_s",
    "equivalence_margin",
)  # fmt: skip


# Keys added after runs were logged without them: hashed (and grouped by) only away from
# their default, so every configuration that leaves them alone keeps its hash.
_NEW_AT_DEFAULT: dict[str, Any] = {
    **{k: getattr(BenchConfig(), k) for k in ("inter_threads", "channels_last", "onednn",
                                               "cudnn_benchmark")},
    "tuning": TuningConfig().name,
}  # fmt: skip
# tuning's own settings say how a search runs, not what the trial measures (its pick is
# logged as the run's tuned.* params): only tuning.name is part of the identity.
_TUNING_SETTINGS = ("tuning.refresh", "tuning.budget_s", "tuning.probe_s", "tuning.keys")
# What tuning.keys may name: the settings a search can set (bench.frameworks.spaces).
TUNABLE = ("compile", "channels_last", "onednn", "threads", "inter_threads", "cudnn_benchmark")


# Keys that decide nothing about what is measured, but were hashed before that was
# noticed: hashed at their canonical value, so a run with another value keeps the hash (and
# the report's grouping) of the run it measures the same as, and every pinned hash stays.
_CANONICAL = {
    ("launcher", "kill_grace_s"): LauncherConfig().kill_grace_s,
    ("launcher", "docker", "heartbeat_timeout_s"): DockerConfig().heartbeat_timeout_s,
}


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


def choice(problems: list[str], name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        problems.append(f"{name}: {value!r} is not allowed; choose one of {', '.join(allowed)}")


def at_least(problems: list[str], name: str, value: float, low: float) -> None:
    if value < low:
        problems.append(f"{name}: must be >= {low:g}, got {value:g}")


# An image reference as Docker's reference grammar has it ([registry[:port]/]path[:tag]
# [@digest]), or an image id; anything else (shell characters, spaces) is refused before the
# engine sees it, which answered such a name with a 53-line traceback.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REFERENCE = re.compile(
    rf"(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
    r"|(?:sha256:)?[0-9a-f]{12,64}"
)


def _check_images(problems: list[str], d: DockerConfig) -> None:
    for name in ("image", "base_image"):
        value = getattr(d, name)
        if value and not _IMAGE_REFERENCE.fullmatch(value):
            problems.append(
                f"launcher.docker.{name}: {value!r} is not an image reference "
                "([REGISTRY[:PORT]/]NAME[:TAG][@DIGEST], lower-case NAME, or an image id)"
            )


def _check_telemetry(problems: list[str], t: TelemetryConfig) -> None:
    # Below 10 ms the samples cost more than they tell (NVML itself averages over longer).
    if not 0.01 <= t.interval_s <= 60:
        problems.append(
            f"telemetry.interval_s: must be between 0.01 and 60 seconds, got {t.interval_s:g}"
        )


def check(cfg: BenchConfig) -> list[str]:
    """The rules of the config's own fields (choices, ranges), each problem naming its
    field.  The families' rules and the machine probes are :func:`bench.preflight.validate`'s."""
    problems: list[str] = []
    choice(problems, "framework", cfg.framework.name, FRAMEWORKS)
    choice(problems, "data", cfg.data.name, DATASETS)
    choice(problems, "launcher", cfg.launcher.name, LAUNCHERS)
    choice(problems, "optimizer.name", cfg.optimizer.name, OPTIMIZERS)
    choice(problems, "mode", cfg.mode, MODES)
    choice(problems, "device", cfg.device, DEVICES)
    choice(problems, "precision", cfg.precision, PRECISIONS)
    choice(problems, "timing", cfg.timing, TIMINGS)
    for name in ("batch_size", "epochs", "num_classes"):
        at_least(problems, name, getattr(cfg, name), 1)
    at_least(problems, "data.num_batches", cfg.data.num_batches, 1)
    at_least(problems, "data.workers", cfg.data.workers, 0)
    lowest = 1 if cfg.data.name == "synthetic" else 0
    if cfg.steps_per_epoch != AUTO and cfg.steps_per_epoch < lowest:
        full = "" if lowest else ", 0 (one full pass over the training set)"
        problems.append(
            f"steps_per_epoch: -1 (auto: windows of at least min_window_s){full} or a count "
            f">= 1; got {cfg.steps_per_epoch}"
            + (" (a full pass needs a labelled data set)" if cfg.steps_per_epoch == 0 else "")
        )
    if cfg.steps_per_epoch == AUTO:
        if not cfg.min_window_s > 0:
            problems.append(f"min_window_s: must be > 0 seconds, got {cfg.min_window_s:g}")
        at_least(problems, "max_steps_per_epoch", cfg.max_steps_per_epoch, AUTO_MIN_STEPS)
    if cfg.compile and cfg.warmup_steps < 1:
        problems.append(
            "warmup_steps: compile=true needs at least 1 warm-up step, so that compilation "
            "stays out of the timed window"
        )
    at_least(problems, "warmup_steps", cfg.warmup_steps, 0)
    at_least(problems, "threads", cfg.threads, 0)
    at_least(problems, "inter_threads", cfg.inter_threads, 0)
    choice(problems, "onednn", cfg.onednn, ONEDNN)
    choice(problems, "tuning", cfg.tuning.name, TUNINGS)
    if cfg.tuning.budget_s <= 0:
        problems.append(f"tuning.budget_s: must be > 0 seconds, got {cfg.tuning.budget_s:g}")
    for key in cfg.tuning.keys:
        choice(problems, "tuning.keys", key, TUNABLE)
    if cfg.tuning.probe_s <= 0:
        problems.append(f"tuning.probe_s: must be > 0 seconds, got {cfg.tuning.probe_s:g}")
    if cfg.tuning.name == "best" and cfg.launcher.name == "inline":
        problems.append(
            "tuning: best sets threads and oneDNN, which a framework fixes when it is imported; "
            "launcher=inline runs trials in bench's own process (use launcher=process)"
        )
    if cfg.cudnn_benchmark and cfg.framework.name != "torch":
        problems.append(
            f"cudnn_benchmark: only torch has this setting (framework={cfg.framework.name}: "
            "TensorFlow autotunes cuDNN by default); leave it false"
        )
    if cfg.channels_last and cfg.framework.name != "torch":
        problems.append(
            f"channels_last: only torch has a memory-format setting (framework="
            f"{cfg.framework.name}: TensorFlow's models are channels-last already, MXNet's "
            "Gluon convolutions here are channels-first only); leave it false"
        )
    at_least(problems, "seed", cfg.seed, 0)
    _check_repeats(problems, cfg)
    at_least(problems, "repeat", cfg.repeat, 0)
    at_least(problems, "launcher.kill_grace_s", cfg.launcher.kill_grace_s, 0)
    at_least(problems, "launcher.memory_limit_mb", cfg.launcher.memory_limit_mb, 0)
    at_least(problems, "optimizer.momentum", cfg.optimizer.momentum, 0)
    at_least(problems, "optimizer.weight_decay", cfg.optimizer.weight_decay, 0)
    if cfg.optimizer.lr <= 0:
        problems.append(f"optimizer.lr: must be > 0, got {cfg.optimizer.lr:g}")
    if cfg.timeout_s <= 0:
        problems.append(f"timeout_s: must be > 0 seconds, got {cfg.timeout_s:g}")
    for key, value in cfg.distributed.settings().items():
        if key in STRATEGY_CHOICES:
            choice(problems, f"distributed.{key}", value, STRATEGY_CHOICES[key])
    _check_telemetry(problems, cfg.telemetry)
    if not cfg.tracking.experiment.strip():
        problems.append("tracking.experiment: must be a non-empty name")
    # Sizes of the sequence models: image models do not use them, but a size below 1 is
    # a mistake whatever the model.
    for key in ("seq_len", "vocab_size", "layers", "hidden", "heads", "intermediate"):
        at_least(problems, f"model.{key}", getattr(cfg.model, key), 1)
    at_least(problems, "model.max_positions", cfg.model.max_positions, 1)
    at_least(problems, "model.freq_bins", cfg.model.freq_bins, 1)
    # launcher=docker's own settings, checked whichever launcher runs (a typo is a typo).
    choice(problems, "launcher.docker.variant", cfg.launcher.docker.variant, DOCKER_VARIANTS)
    _check_images(problems, cfg.launcher.docker)
    if cfg.launcher.docker.heartbeat_timeout_s <= 0:
        problems.append(
            "launcher.docker.heartbeat_timeout_s: must be > 0 seconds, got "
            f"{cfg.launcher.docker.heartbeat_timeout_s:g}"
        )
    return problems


def auto_repeats(cfg: BenchConfig) -> bool:
    return isinstance(cfg.repeats, str) and cfg.repeats.strip().lower() == "auto"


def _check_repeats(problems: list[str], cfg: BenchConfig) -> None:
    if cfg.max_repeats < 2:
        problems.append(
            f"max_repeats: repeats=auto needs at least 2 rounds to compare, got {cfg.max_repeats}"
        )
    whole = isinstance(cfg.repeats, int) and not isinstance(cfg.repeats, bool)
    if not auto_repeats(cfg) and (not whole or cfg.repeats < 1):
        problems.append(f"repeats: an integer >= 1 or auto; got {cfg.repeats!r}")
    if cfg.repeats_budget_s < 0:
        problems.append(
            f"repeats_budget_s: >= 0 seconds (0: no budget), got {cfg.repeats_budget_s:g}"
        )
    if not 0 < cfg.equivalence_margin < 0.5:
        problems.append(
            f"equivalence_margin: a fraction in (0, 0.5), e.g. 0.02 for ±2%; got "
            f"{cfg.equivalence_margin:g}"
        )


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
        elif isinstance(value, dict) and default is not dataclasses.MISSING:
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


def _decides(key: str, auto: bool) -> bool:
    """Whether a (flat) config key decides what a trial measures; ``auto``: the config uses
    steps_per_epoch=auto, whose window settings then count."""
    top = key.split(".", 1)[0]
    return top not in _NOT_HASHED and (auto or top not in _AUTO_ONLY)


def measured(flat: dict[str, Any]) -> dict[str, Any]:
    """The part of a flat config (``flatten(to_dict(cfg))``, or a run's logged params) that
    decides what a trial measures: the one definition of a configuration's identity, which
    :func:`config_hash` hashes and the report groups runs by (logged params are strings,
    hence the comparison as text)."""
    auto = str(flat.get("steps_per_epoch")) == str(AUTO)
    pinned = not str(flat.get("framework.version") or "")
    as_pinned = not str(flat.get("framework.installed") or "")
    defaults = STRATEGY_CONFIGS.get(str(flat.get("distributed")), DistributedConfig)()
    default_settings = {f"distributed.{k}": str(v) for k, v in defaults.settings().items()}
    return {
        k: v
        for k, v in flat.items()
        if _decides(k, auto)
        and not (pinned and k == "framework.version")
        and not (as_pinned and k == "framework.installed")
        and not (k == "timing" and str(v) == "auto")  # as before the field existed
        and tuple(k.split(".")) not in _CANONICAL  # decides nothing (see _CANONICAL)
        and default_settings.get(k) != str(v)  # a default setting: as a run without it
        and not _new_at_default(k, v)
        and k not in _TUNING_SETTINGS
    }


def _new_at_default(key: str, value: Any) -> bool:
    """Whether a flat key is one of :data:`_NEW_AT_DEFAULT` at its default."""
    top = "tuning" if key == "tuning.name" else key
    if top not in _NEW_AT_DEFAULT:
        return False
    return str(value).lower() == str(_NEW_AT_DEFAULT[top]).lower()


def config_hash(cfg: BenchConfig) -> str:
    """A stable hash of everything that decides what a trial measures (:func:`measured`)."""
    auto = cfg.steps_per_epoch == AUTO
    data = {k: v for k, v in to_dict(cfg).items() if _decides(k, auto)}
    if cfg.timing == "auto":  # bench's default timing hashes as before there was a choice
        data.pop("timing", None)
    for key, default in _NEW_AT_DEFAULT.items():  # hashed only away from their defaults
        value = cfg.tuning.name if key == "tuning" else data.get(key)
        if value == default:
            data.pop(key, None)
        elif key == "tuning":
            data[key] = value  # the search's own settings are not the trial's identity
    for path, value in _CANONICAL.items():
        node = data
        for key in path[:-1]:
            node = node.get(key, {})
        if path[-1] in node:
            node[path[-1]] = value
    # The pinned version hashes as before versions existed, and a run on the pinned version
    # as installed (framework.installed "") as before that field existed.
    dropped = {"version"} if not cfg.framework.version else set()
    dropped |= {"installed"} if not cfg.framework.installed else set()
    data["framework"] = {k: v for k, v in data["framework"].items() if k not in dropped}
    # The strategy hashes as its name, as before it had settings, with only the settings
    # that differ from that strategy's defaults beside it.
    strategy = cfg.distributed
    defaults = type(strategy)().settings()
    changed = {k: v for k, v in strategy.settings().items() if v != defaults.get(k)}
    data["distributed"] = {"name": strategy.name, **changed} if changed else strategy.name
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
