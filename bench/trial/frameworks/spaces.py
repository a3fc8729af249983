"""Each framework's speed settings: the search space of ``tuning=best`` (:mod:`bench.trial.tuning`).

Every setting here is a config key the adapters already honour, and leaves the model and
its training arithmetic the same up to float rounding: compilation fuses operators, the
memory format and oneDNN pick other kernels, thread counts split the same work differently.
Settings that change the arithmetic (fp16, bf16, TF32) are never searched: they are
``precision``, which the user chooses and the report names.

This module imports no framework: the search runs in the trial's process before the
framework is imported, since thread counts and oneDNN are fixed when it loads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bench.core.config import SERVE_TUNABLE, TUNABLE, BenchConfig

# The keys a search may set (bench.core.config.TUNABLE), with bench's default for each: a key
# away from its default was set by the user, and is fixed rather than searched.
DEFAULTS: dict[str, Any] = {key: getattr(BenchConfig(), key) for key in TUNABLE}


def value(cfg: BenchConfig, key: str) -> Any:
    """``cfg``'s value of a searchable ``key`` (``serve.max_batch``: a nested one)."""
    group, _, name = key.rpartition(".")
    return getattr(getattr(cfg, group) if group else cfg, name)


# mode=serve also searches the batching policy's batch bound (bench.core.config.SERVE_TUNABLE),
# which every framework shares in a tuning=default run; a search tries it within
# MAX_BATCH_BOUND, since the warm-up traces every batch size up to it.
SERVE_DEFAULTS: dict[str, Any] = {key: value(BenchConfig(), key) for key in SERVE_TUNABLE}
SEARCHABLE: dict[str, Any] = DEFAULTS | SERVE_DEFAULTS
MAX_BATCH_BOUND = 32
# Bumped whenever a space below changes, so that cached searches of an older space are not
# reused (bench.trial.tuning.cache).
SPACE_VERSION = 1


@dataclass(frozen=True)
class Knob:
    key: str  # a BenchConfig field
    values: tuple[Any, ...]  # the alternatives to its default, tried in this order
    why: str  # what it changes, for the search table


def space(cfg: BenchConfig, cpus: int, cuda: bool, image: bool) -> list[Knob]:
    """The settings a search of ``cfg`` tries, in the order it tries them (the largest
    effects first), each with its alternatives to the default.  ``cpus``: the trial's usable
    cores; ``cuda``: the trial runs on a GPU; ``image``: an image model (NCHW input)."""
    fw = cfg.framework.name
    knobs: list[Knob] = []
    if fw in ("torch", "tf"):  # MXNet always hybridizes with static_alloc/static_shape
        what = "torch.compile (inductor)" if fw == "torch" else "XLA (jit_compile=True)"
        knobs.append(Knob("compile", (True,), what))
    if fw == "torch" and image:
        knobs.append(Knob("channels_last", (True,), "channels-last (NHWC) memory format"))
    if fw == "torch" and cuda:
        knobs.append(Knob("cudnn_benchmark", (True,), "cuDNN autotuning of convolutions"))
    if not cuda:
        if fw != "jax":  # XLA's CPU kernels have no oneDNN switch
            knobs.append(Knob("onednn", ("off",), "oneDNN CPU kernels off (on is the default)"))
        if cpus > 1:
            knobs.append(Knob("threads", (max(1, cpus // 2),), "intra-op threads"))
        if cpus > 1 and fw != "jax":  # JAX has no inter-op threads
            inter = (2,) if fw == "mxnet" else (1,)
            what = "MXNet CPU engine workers" if fw == "mxnet" else "inter-op threads"
            knobs.append(Knob("inter_threads", inter, what))
    if cfg.mode == "serve" and cfg.serve.scenario != "single_stream":  # SingleStream: 1 a query
        default = SERVE_DEFAULTS["serve.max_batch"]
        most = MAX_BATCH_BOUND
        if cfg.serve.scenario == "multi_stream":  # a batch never spans two queries' samples
            most = min(most, max(cfg.serve.samples_per_query, default))
        sizes = tuple(b for b in (16, 32, 4) if b <= most and b != default)
        if sizes:
            knobs.append(Knob("serve.max_batch", sizes, "the batching policy's largest batch"))
    return knobs


def searchable(cfg: BenchConfig) -> dict[str, Any]:
    """The keys a search of ``cfg`` may set, with their defaults."""
    return SEARCHABLE if cfg.mode == "serve" else DEFAULTS


def apply(cfg: BenchConfig, settings: dict[str, Any]) -> BenchConfig:
    """``cfg`` with ``settings`` (searchable keys, ``serve.max_batch`` among them) set."""
    top = {k: v for k, v in settings.items() if "." not in k}
    serve = {k.partition(".")[2]: v for k, v in settings.items() if k.startswith("serve.")}
    if serve:
        top["serve"] = dataclasses.replace(cfg.serve, **serve)
    return dataclasses.replace(cfg, **top)


def fixed(cfg: BenchConfig) -> dict[str, Any]:
    """The searchable keys ``cfg`` sets away from their defaults: the user chose them, so
    the search keeps them."""
    return {k: value(cfg, k) for k, v in searchable(cfg).items() if value(cfg, k) != v}


# What a framework has no setting for, said in the search table and docs/tuning.md.
NOT_SEARCHED = {
    "torch": "",
    "tf": "memory format (Keras models are channels-last already); on a GPU, cuDNN and XLA "
    "autotune by default",
    "mxnet": "compilation (always hybridized, static_alloc/static_shape); memory format "
    "(Gluon convolutions are channels-first here)",
    "jax": "compilation (always jitted); memory format (Keras models are channels-last "
    "already); inter-op threads (JAX has none); oneDNN (XLA's CPU kernels have no switch)",
}
