"""The typed configuration's own rules: choices, ranges and formats that its types cannot
say, each problem naming its field (:func:`check`).  :mod:`bench.checks.config` runs them on
every config before a sweep starts, with each family's rules (the first stage of bench's
checks; the machine's are :mod:`bench.checks.host`); the schema they check is
:mod:`bench.core.config`.  Host side: a trial never checks its configuration again."""

from __future__ import annotations

import math
import os
import re

from bench.core.config import (
    AUTO,
    AUTO_MIN_STEPS,
    CONTENTION_ENV,
    CONTENTIONS,
    DATASETS,
    DEVICES,
    DOCKER_VARIANTS,
    FRAMEWORKS,
    GOAL_METRICS,
    GOALS,
    LAUNCHERS,
    MODES,
    ONEDNN,
    OPTIMIZERS,
    PRECISIONS,
    SERVE_MODES,
    SERVE_SCENARIOS,
    SERVE_TUNABLE,
    TIMINGS,
    TUNABLE,
    TUNINGS,
    BenchConfig,
    DockerConfig,
    GoalConfig,
    ServeConfig,
    TelemetryConfig,
    auto_repeats,
    early_stopping_queries,
)
from bench.core.frameworks import FRAMEWORKS as FRAMEWORK_SPECS
from bench.core.strategy_configs import STRATEGY_CHOICES, DistributedConfig
from bench.core.versions import INSTALLED, is_release


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


def bad_image_reference(value: str) -> bool:
    """Whether ``value`` is not an image reference by Docker's grammar (nor an image id)."""
    return not _IMAGE_REFERENCE.fullmatch(value)


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


def _check_goal(problems: list[str], cfg: BenchConfig) -> None:
    """goal=accuracy: a target in (0, 1], a training trial on a labelled set that is evaluated."""
    g: GoalConfig = cfg.goal
    choice(problems, "goal", g.name, GOALS)
    choice(problems, "goal.metric", g.metric, GOAL_METRICS)
    at_least(problems, "goal.max_epochs", g.max_epochs, 1)
    if not 0 < g.target <= 1:
        problems.append(f"goal.target: an accuracy in (0, 1], got {g.target:g}")
    if not 0 < g.eval_every <= 1:
        problems.append(
            f"goal.eval_every: a fraction of an epoch in (0, 1] (1: every epoch), got "
            f"{g.eval_every:g}"
        )
    if g.name != "accuracy":
        return
    if cfg.mode != "train":
        problems.append(
            f"goal: goal=accuracy trains to a target; mode={cfg.mode} does not train "
            "(use mode=train, or goal=none)"
        )
    if cfg.data.name == "synthetic":
        problems.append(
            "goal: goal=accuracy needs a labelled data set with a held-out split "
            "(data=digits, cifar10, cifar100 or folder), got data=synthetic"
        )
    if not cfg.data.evaluate:
        problems.append("data.evaluate: goal=accuracy evaluates on the held-out split; set it true")
    if _distributes(cfg):
        problems.append(
            f"goal: goal=accuracy trains in one process for now (distributed="
            f"{cfg.distributed.name}'s ranks evaluate nothing); use distributed=none"
        )


def _positive(problems: list[str], name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        problems.append(f"{name}: must be a finite number > 0, got {value:g}")


def _check_serve(problems: list[str], cfg: BenchConfig) -> None:
    """mode=serve's keys (bench.trial.serve): LoadGen's scenario and mode, positive loads,
    bounds and durations, a batch of at least one sample; find_peak under Server only; one
    process (no distributed strategy serves yet)."""
    s: ServeConfig = cfg.serve
    choice(problems, "serve.scenario", s.scenario, SERVE_SCENARIOS)
    choice(problems, "serve.mode", s.mode, SERVE_MODES)
    for name in ("target_qps", "latency_bound_ms", "min_duration_s", "peak_tolerance"):
        _positive(problems, f"serve.{name}", getattr(s, name))
    at_least(problems, "serve.max_batch", s.max_batch, 1)
    at_least(problems, "serve.samples_per_query", s.samples_per_query, 1)
    at_least(problems, "serve.min_queries", s.min_queries, 0)
    at_least(problems, "serve.peak_probes", s.peak_probes, 1)
    at_least(problems, "serve.runs", s.runs, 1)
    for name in ("batch_timeout_ms", "expected_qps", "tpot_bound_ms"):
        value = getattr(s, name)
        if not (value >= 0 and math.isfinite(value)):
            problems.append(f"serve.{name}: must be a finite number >= 0, got {value:g}")
    if not 0 < s.latency_percentile < 1:
        problems.append(
            "serve.latency_percentile: a fraction in (0, 1) (0.99: p99), got "
            f"{s.latency_percentile:g}"
        )
    if cfg.mode != "serve":
        return
    if s.mode == "find_peak" and s.scenario != "server":
        problems.append(
            f"serve.mode: find_peak searches Server's target QPS; serve.scenario={s.scenario} "
            "has none (use serve.scenario=server)"
        )
    if s.runs > 1 and s.mode != "performance":
        problems.append(
            f"serve.runs: several LoadGen runs a trial are for serve.mode=performance; "
            f"serve.mode={s.mode} runs its own (leave serve.runs 1)"
        )
    floor = early_stopping_queries(s.latency_percentile) if 0 < s.latency_percentile < 1 else 0
    if s.mode == "find_peak" and 0 < s.min_queries < floor:
        problems.append(
            f"serve.min_queries: find_peak looks for a load LoadGen calls VALID, and its early "
            f"stopping calls every run of fewer than {floor} queries at "
            f"p{s.latency_percentile * 100:g} INVALID; leave it 0 (that many) or set >= {floor}"
        )
    if _distributes(cfg):
        problems.append(
            f"distributed: mode=serve serves from one process; distributed="
            f"{cfg.distributed.name} is not wired for it (use distributed=none)"
        )


def _distributes(cfg: BenchConfig) -> bool:
    """Whether the trial runs a distribution strategy: its name is not the plain config's
    (``none``), as bench.trial.distributed.registry.distributes says above this layer."""
    return cfg.distributed.name != DistributedConfig.name


def check(cfg: BenchConfig) -> list[str]:
    """The rules of the config's own fields (choices, ranges), each problem naming its
    field.  The families' rules are :mod:`bench.checks.config`'s, the machine's
    :mod:`bench.checks.host`'s."""
    problems: list[str] = []
    choice(problems, "framework", cfg.framework.name, FRAMEWORKS)
    choice(problems, "data", cfg.data.name, DATASETS)
    choice(problems, "launcher", cfg.launcher.name, LAUNCHERS)
    choice(problems, "optimizer.name", cfg.optimizer.name, OPTIMIZERS)
    choice(problems, "mode", cfg.mode, MODES)
    choice(problems, "device", cfg.device, DEVICES)
    choice(problems, "precision", cfg.precision, PRECISIONS)
    choice(problems, "timing", cfg.timing, TIMINGS)
    choice(problems, "contention", cfg.contention, CONTENTIONS)
    if cfg.contention not in CONTENTIONS and os.environ.get(CONTENTION_ENV):
        problems[-1] += f" (${CONTENTION_ENV} sets its default)"
    for name in ("batch_size", "epochs", "num_classes", "prompt_len"):
        at_least(problems, name, getattr(cfg, name), 1)
    if cfg.new_tokens < 2:
        problems.append(
            f"new_tokens: must be >= 2 (the first token comes from the prefill, the decode "
            f"figures from the others), got {cfg.new_tokens}"
        )
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
        choice(problems, "tuning.keys", key, TUNABLE + SERVE_TUNABLE)
        if key in SERVE_TUNABLE and cfg.mode != "serve":
            problems.append(f"tuning.keys: {key} is searched under mode=serve only")
    if cfg.tuning.probe_s <= 0:
        problems.append(f"tuning.probe_s: must be > 0 seconds, got {cfg.tuning.probe_s:g}")
    if cfg.tuning.name == "best" and cfg.launcher.name == "inline":
        problems.append(
            "tuning: best sets threads and oneDNN, which a framework fixes when it is imported; "
            "launcher=inline runs trials in bench's own process (use launcher=process)"
        )
    spec = FRAMEWORK_SPECS.get(cfg.framework.name)
    if cfg.cudnn_benchmark and not (spec and spec.cudnn_benchmark):
        problems.append(
            f"cudnn_benchmark: only torch has this setting (framework={cfg.framework.name}: "
            "TensorFlow autotunes cuDNN by default); leave it false"
        )
    if cfg.channels_last and not (spec and spec.channels_last):
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
    at_least(problems, "launcher.max_artifact_mb", cfg.launcher.max_artifact_mb, 1)
    at_least(problems, "launcher.max_artifact_files", cfg.launcher.max_artifact_files, 1)
    at_least(problems, "optimizer.momentum", cfg.optimizer.momentum, 0)
    at_least(problems, "optimizer.weight_decay", cfg.optimizer.weight_decay, 0)
    if not (cfg.optimizer.lr > 0 and math.isfinite(cfg.optimizer.lr)):
        problems.append(f"optimizer.lr: must be a finite number > 0, got {cfg.optimizer.lr:g}")
    version = cfg.framework.version
    if version and version != INSTALLED and not is_release(version):
        problems.append(
            f"framework.version: {version!r} is not written as a release (digits and dots, "
            "as 2.5.1, with an optional a/b/rc, .post or .dev part)"
        )
    if cfg.timeout_s <= 0:
        problems.append(f"timeout_s: must be > 0 seconds, got {cfg.timeout_s:g}")
    for key, value in cfg.distributed.settings().items():
        if key in STRATEGY_CHOICES:
            choice(problems, f"distributed.{key}", value, STRATEGY_CHOICES[key])
    _check_telemetry(problems, cfg.telemetry)
    _check_serve(problems, cfg)
    _check_goal(problems, cfg)
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
    at_least(problems, "launcher.docker.shm_size_mb", cfg.launcher.docker.shm_size_mb, 1)
    if cfg.launcher.docker.heartbeat_timeout_s <= 0:
        problems.append(
            "launcher.docker.heartbeat_timeout_s: must be > 0 seconds, got "
            f"{cfg.launcher.docker.heartbeat_timeout_s:g}"
        )
    return problems


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
