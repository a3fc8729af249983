"""Trials as the report sees them: plain views of run records, grouped by configuration."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS, TORCH
from bench.core.identity import identity
from bench.core.zoo import model_label, task_of
from bench.tracking import RunRecord

# A trial's configuration is its run's identity (bench.core.identity, the one definition the
# config hash uses too) less the axes the report compares along: the framework (name,
# version, build) and which repeat of the configuration the run was.  (A tuning=best run's
# pick, tuned.*, is no part of an identity: torch's best and tf's best are one configuration.)
_COMPARED = ("repeat",)
_COMPARED_PREFIXES = ("framework.",)
# Shown in their own columns or words; any other param that varies joins the label.  The
# model's source is part of its name (``hf:llama``, bench.core.zoo.model_label).
_STANDARD = ("model.name", "model.source", "mode", "batch_size", "image_size", "device")
# Tags (without "bench.") that describe what a run ran on.
ENVIRONMENT_TAGS = (
    "parity",  # the verdict of the sweep's training parity check (parity=true)
    "device",
    "python_version",
    "os",
    "cpu_model",
    "gpu_names",
    "gpu_driver",
    "cuda_version",
    "cudnn_version",
    "keras_version",
    *(spec.tag for spec in FRAMEWORKS.values()),  # torch_version, ..., jax_version
)
DOCKER_IMAGE_TAG = "mlflow.docker.image.id"
# The tags the report reads (bench's own and the image's): tracking.load_runs reads no others.
REPORT_TAGS = ("bench.", DOCKER_IMAGE_TAG)
PREFERRED_BASELINE = TORCH

Config = tuple[tuple[str, str], ...]


def _float(value: str | None, default: float = math.nan) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


@dataclass
class Trial:
    record: RunRecord
    framework: str
    model: str
    mode: str
    device: str
    batch_size: int
    image_size: int
    config: Config  # its identity less the framework and the repeat index
    environment: dict[str, str]

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def metric(self, key: str) -> float:
        return self.record.metrics.get(key, math.nan)

    def param(self, key: str, default: str = "") -> str:
        return self.record.params.get(key, default)

    @property
    def num_parameters(self) -> int:
        return int(_float(self.record.params.get("num_parameters"), 0))

    @property
    def ms_per_sample(self) -> float:
        """Timed wall time per sample over the whole trial (ms)."""
        rate = self.metric(metrics.TRIAL_SAMPLES_PER_S)
        return 1000.0 / rate if rate > 0 else math.nan

    @property
    def epoch_time_s(self) -> float:
        epochs = self.metric(metrics.EPOCHS_COMPLETED)
        return self.metric(metrics.TRIAL_TIME_S) / epochs if epochs > 0 else math.nan

    def mean_over_epochs(self, key: str) -> float:
        """The mean of a per-epoch metric over the epochs (its last value without history)."""
        history = self.record.history.get(key)
        if history:
            return statistics.fmean(v for _, v in history)
        return self.metric(key)

    @property
    def operators_ms(self) -> dict[str, float]:
        """Profiled self time per step by operator category (``op_<category>_ms``)."""
        return {
            k[3:-3]: v
            for k, v in self.record.metrics.items()
            if k.startswith("op_") and k.endswith("_ms")
        }

    def config_without(self, *keys: str) -> Config:
        return tuple((k, v) for k, v in self.config if k not in keys)


def _in_config(key: str) -> bool:
    return key not in _COMPARED and not key.startswith(_COMPARED_PREFIXES)


def to_trial(record: RunRecord) -> Trial:
    params, tags = record.params, record.tags
    device = tags.get("bench.device") or params.get("device", "?")
    # What decides the measurement (older runs logged every key, newer ones those that can
    # matter for them: both have the same identity).
    config = {k: v for k, v in identity(params).items() if _in_config(k)}
    config["device"] = device  # the device it ran on, not "auto"
    environment = {k: tags[f"bench.{k}"] for k in ENVIRONMENT_TAGS if f"bench.{k}" in tags}
    if DOCKER_IMAGE_TAG in tags:
        environment["image"] = tags[DOCKER_IMAGE_TAG]
    name = tags.get("bench.framework") or params.get("framework.name", "?")
    # A run without framework.version ran the pinned version; with framework.installed, the
    # version its interpreter had (framework.version=installed, or a pin it did not have).
    version = params.get("framework.installed", "").split(" ", 1)[0] or params.get(
        "framework.version", ""
    )
    return Trial(
        record=record,
        framework=f"{name}=={version}" if version else name,
        model=model_label(
            {**params, "model.name": tags.get("bench.model") or params.get("model.name")}
        ),
        mode=tags.get("bench.mode") or params.get("mode", "?"),
        device=device,
        batch_size=int(_float(params.get("batch_size"), 0)),
        image_size=int(_float(params.get("image_size"), 0)),
        config=_shared(tuple(sorted(config.items()))),
        environment=_shared_environment(environment),
    )


# Runs of one configuration share one copy of it (and of their environment): 100,000 runs
# of a hundred configurations keep a hundred, not 100,000 (about 2 KB a run).  Neither is
# changed after it is made.  The memo forgets everything past _MEMO_LIMIT distinct values.
_MEMO_LIMIT = 20_000
_configs: dict[Config, Config] = {}
_environments: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}


def _shared(config: Config) -> Config:
    if len(_configs) > _MEMO_LIMIT:
        _configs.clear()
    return _configs.setdefault(config, config)


def _shared_environment(environment: dict[str, str]) -> dict[str, str]:
    if len(_environments) > _MEMO_LIMIT:
        _environments.clear()
    return _environments.setdefault(tuple(environment.items()), environment)


class Labeller:
    """Short names for configurations: the standard fields and whatever else varies."""

    def __init__(self, trials: Iterable[Trial]) -> None:
        # Runs of one configuration share its tuple (to_trial): look at each one once.
        configs = [dict(config) for config in {t.config for t in trials}]
        keys = {k for config in configs for k in config}
        # A key some runs lack (e.g. data.name before labelled data existed) varies too.
        varying = {k for k in keys if len({c.get(k, "") for c in configs}) > 1}
        self.mode_varies = "mode" in varying
        self.varying = sorted(varying - set(_STANDARD))
        # A label shows the keys that differ among its model's runs: model=hf's rows do
        # not carry a sequence model's model.freq_bins because deepspeech2 runs beside them.
        models: dict[str, list[dict[str, str]]] = {}
        for config in configs:
            models.setdefault(model_label(config), []).append(config)
        self._varying_of = {
            model: [k for k in self.varying if len({c.get(k, "") for c in same}) > 1]
            for model, same in models.items()
        }

    def label(self, config: Config, *skip: str) -> str:
        """e.g. ``resnet50 · batch 32 · 224 px · cuda:0 · precision=bf16``, or
        ``hf:llama · ...`` for a model that is not the zoo's; ``skip`` leaves out fields that
        a table shows in a column of their own (``model.source``: the model's bare name,
        where the sources are the compared sides)."""
        pairs = dict(config)
        parts = []
        if "model.name" not in skip:
            parts.append(
                pairs.get("model.name", "?") if "model.source" in skip else model_of(config)
            )
        if self.mode_varies and "mode" not in skip:
            parts.append(pairs.get("mode", "?"))
        if "batch_size" not in skip:
            parts.append(f"batch {pairs.get('batch_size', '?')}")
        shown: tuple[str, ...] = ()
        if "image_size" not in skip:
            size, shown = _input_size(pairs)
            parts.append(size)
        if "device" not in skip:
            parts.append(pairs.get("device", "?"))
        varying = self._varying_of.get(model_label(pairs), self.varying)
        parts += [f"{k}={pairs[k]}" for k in varying
                  if k in pairs and k not in skip and k not in shown]  # fmt: skip
        return " · ".join(parts)


_DEFAULTS = BenchConfig()


def _input_size(pairs: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """An image model's ``224 px``; a sequence model's ``seq 128`` (the image size means
    nothing to it); a generation's ``prompt 128 + 32 new`` (keys at their default are not
    in a run's identity).  With the keys it shows."""
    name, source = pairs.get("model.name", ""), pairs.get("model.source", "bench")
    task = task_of(name, source, pairs.get("model.task", ""))
    if task in ("", "image"):
        return f"{pairs.get('image_size', '?')} px", ("image_size",)
    generates = pairs.get("mode") == "generate" or (  # a causal LM served by generating
        pairs.get("mode") == "serve" and source in ("hf", "py") and task == "causal_lm"
    )
    if generates:
        prompt = pairs.get("prompt_len", str(_DEFAULTS.prompt_len))
        new = pairs.get("new_tokens", str(_DEFAULTS.new_tokens))
        return f"prompt {prompt} + {new} new", ("prompt_len", "new_tokens")
    return f"seq {pairs.get('model.seq_len', '?')}", ("model.seq_len",)


def model_of(config: Config) -> str:
    """The model of a configuration as the report names it: ``resnet50`` for the zoo's,
    ``SOURCE:NAME`` for any other source (:func:`bench.core.zoo.model_label`)."""
    return model_label(dict(config))


K = TypeVar("K", bound=Hashable)


def group(trials: Iterable[Trial], key: Callable[[Trial], K]) -> dict[K, list[Trial]]:
    out: dict[K, list[Trial]] = {}
    for trial in trials:
        out.setdefault(key(trial), []).append(trial)
    return out


def framework_version(framework: str, environment: dict[str, str]) -> str:
    """The version a run's environment tags give its framework (its spec's tag), or "-"."""
    spec = FRAMEWORKS.get(base_framework(framework))
    return environment.get(spec.tag, "-") if spec else "-"


def base_framework(name: str) -> str:
    """``tf`` of ``tf==2.20.0``: a trial's framework name is its framework, with ``==VERSION``
    for a version other than the pinned one."""
    return name.split("==", 1)[0]


def framework_pairs(frameworks: Iterable[str]) -> list[tuple[str, str]]:
    """Every pair of different frameworks, the baseline (torch where present) first; two
    versions of one framework are the version section's pairs (:func:`version_pairs`)."""
    names = sorted(set(frameworks), key=lambda f: (base_framework(f) != PREFERRED_BASELINE, f))
    return [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if base_framework(a) != base_framework(b)
    ]


def version_pairs(frameworks: Iterable[str]) -> list[tuple[str, str]]:
    """Every pair of versions of one framework, the pinned one (no ``==``) first."""
    names = sorted(set(frameworks), key=lambda f: (base_framework(f), "==" in f, f))
    return [
        (a, b)
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if base_framework(a) == base_framework(b)
    ]


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    sd = statistics.stdev(values) if len(values) > 1 else math.nan
    return statistics.fmean(values), sd


def fmt(value: float, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, thousands separated; '-' for nan."""
    if value is None or math.isnan(value):
        return "-"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def fmt_mean_sd(values: Sequence[float], digits: int = 3) -> str:
    """``mean ± sd (n)``; the sd is left out for a single run."""
    mean, sd = mean_sd(values)
    if math.isnan(mean):
        return "-"
    spread = f" ± {fmt(sd, 2)}" if not math.isnan(sd) else ""
    return f"{fmt(mean, digits)}{spread} (n={len(values)})"
