"""Every check a trial's config must pass before a sweep starts, in one place.

:func:`validate` gathers the config's own rules (:func:`bench.core.rules.check`), each family's
(data sets, models, frameworks, strategies, the Docker launcher) and the probes of this
machine (a visible GPU, the framework's environment, a writable tracking store, the Docker
engine), and raises one :class:`~bench.core.config.ConfigError` listing every problem, each
naming its field.  The CLI runs it for every job of a sweep before the first trial starts.
"""

from __future__ import annotations

import os
import tempfile
import urllib.parse
from pathlib import Path

from bench.core.config import (
    DATASETS,
    FRAMEWORKS,
    BenchConfig,
    ConfigError,
    TrackingConfig,
)
from bench.core.frameworks import FRAMEWORKS as SPECS
from bench.core.frameworks import JAX, MXNET, TF, TORCH
from bench.core.rules import check, choice


def _check_precision(problems: list[str], cfg: BenchConfig) -> None:
    if cfg.precision == "tf32" and cfg.framework.name == MXNET:
        problems.append(
            "precision: tf32 is not wired into MXNet trials (its cuDNN settings are its own); "
            "use fp32, fp16 or bf16"
        )
        return
    if cfg.precision not in ("fp16", "tf32"):
        return
    if cfg.device == "cpu" or (cfg.device == "auto" and not gpu_visible()):
        what = {
            "fp16": "fp16 mixed precision needs a CUDA device",
            "tf32": "tf32 is a mode of a CUDA GPU's tensor cores",
        }[cfg.precision]
        problems.append(f"precision: {what} and this trial runs on the CPU; use bf16 or fp32")


def gpu_visible() -> bool:
    from bench.core.sysinfo import gpu_environment

    return int(gpu_environment().get("gpu_count", "0")) > 0


def _sqlite_or_file_path(uri: str) -> Path | None:
    """The local path a tracking URI writes to, or None for a remote store."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "sqlite":
        # sqlite:///relative/path.db or sqlite:////absolute/path.db
        return Path(uri[len("sqlite:///") :])
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme == "file" else uri) / "placeholder"
    return None


def _check_model_source(problems: list[str], cfg: BenchConfig) -> None:
    """model.source is one of its choices; stock only where the framework's library has the
    model, a native source (flax) only for its framework and the models it builds."""
    from bench.checks import own_models
    from bench.core.zoo import ALL_SOURCES, NATIVE_SOURCES, OWN_SOURCES
    from bench.models import MODELS, framework_problem, native_problem, stock_problem

    choice(problems, "model.source", cfg.model.source, ALL_SOURCES)
    problems += own_models.check(cfg)  # model=py's keys, and models not the zoo's
    if cfg.model.source in OWN_SOURCES:  # docs/your-model.md
        return
    if cfg.model.name in MODELS and cfg.framework.name in FRAMEWORKS:
        problem = framework_problem(cfg.framework.name, cfg.model.name)
        if problem:
            problems.append(problem)
    if (
        cfg.model.source == "stock"
        and cfg.model.name in MODELS
        and cfg.framework.name in FRAMEWORKS
    ):
        problem = stock_problem(cfg.framework.name, cfg.model.name)
        if problem:
            problems.append(problem)
    if (
        cfg.model.source in NATIVE_SOURCES
        and cfg.model.name in MODELS
        and cfg.framework.name in FRAMEWORKS
    ):
        problem = native_problem(cfg.framework.name, cfg.model.name, cfg.model.source)
        if problem:
            problems.append(problem)


def _check_jax(problems: list[str], cfg: BenchConfig) -> None:
    """What the jax adapter does not run yet (issue 35): each refused, naming its key."""
    name = cfg.framework.name
    if cfg.launcher.name == "docker" and not SPECS[name].image:
        problems.append(f"launcher: framework={name} has no image yet; use launcher=process")
    if cfg.precision == "fp16":
        problems.append(
            f"precision: framework={name} has no fp16 loss scaling yet; use fp32 or bf16"
        )
    elif cfg.precision == "bf16" and cfg.model.source == "flax":
        problems.append(
            "precision: model.source=flax trains in float32 so far (fp32, or tf32 on a GPU); "
            "bf16 runs the Keras models (model.source=bench)"
        )
    from bench.models import task

    # The zoo's sequence models run (the Keras builders; model.source=flax: the transformer),
    # undistributed or under a strategy that shards their batches (jax_dp: one process);
    # model=hf and model=py are refused by their own checks (bench.checks.own_models).
    kind = task(cfg.model)
    if kind != "image" and name not in cfg.distributed.sequence_frameworks:
        problems.append(
            f"distributed: framework={name} trains sequence models undistributed or under "
            f"jax_dp so far; {cfg.model.name} is a {kind} model (use distributed=none or jax_dp)"
        )


def _check_generate(problems: list[str], cfg: BenchConfig) -> None:
    """mode=generate: a causal LM of model=hf, or of model=py with a cached forward (its
    probe says, bench.checks.own_models), under torch or tf, undistributed, prompt and new
    tokens within its positions (bench.trial.generate)."""
    from bench.models import own_causal_lm, task

    kind = task(cfg.model)
    if not own_causal_lm(cfg.model):
        article = "an" if kind[:1] in "aeiou" else "a"
        what = (
            f"{article} {kind} model"
            if kind != "causal_lm"
            else "a causal LM without a KV cache here"
        )
        problems.append(
            f"mode: generate runs the causal LMs of model=hf (model=hf model.name=llama) and "
            f"of model=py model.task=causal_lm with a cached forward; {cfg.model.name} is {what}"
        )
        return
    if cfg.framework.name not in (TORCH, TF):  # transformers' and keras-hub's cached forward
        problems.append(
            f"mode: generate is wired for framework=torch and tf; framework="
            f"{cfg.framework.name} has no generation loop for {cfg.model.name}"
        )
    if cfg.prompt_len + cfg.new_tokens > cfg.model.max_positions:
        problems.append(
            f"new_tokens: prompt_len + new_tokens = {cfg.prompt_len + cfg.new_tokens} exceeds "
            f"the model's positions (model.max_positions={cfg.model.max_positions})"
        )
    for key in ("compile", "breakdown", "profile"):
        if getattr(cfg, key):
            problems.append(f"{key}: not wired for mode=generate; leave it false")
    if cfg.tuning.name != "default":
        problems.append("tuning: best searches training and inference steps; mode=generate "
                        "takes tuning=default")  # fmt: skip


def _check_framework(problems: list[str], cfg: BenchConfig) -> None:
    """MXNet runs in its own environment, which only a fresh process or its image reaches;
    a framework that picks Keras' backend needs a process of its own."""
    spec = SPECS.get(cfg.framework.name)
    if spec is not None and not spec.inline and cfg.launcher.name == "inline":
        problems.append(
            "launcher: inline runs the trial inside bench's own process, which may already "
            f"hold Keras on TensorFlow's backend; framework={spec.name} sets Keras' backend "
            "before Keras loads, in a process of its own: use launcher=process or Slurm"
        )
    if cfg.framework.name == JAX:
        _check_jax(problems, cfg)
    if cfg.framework.name != MXNET:
        return
    if cfg.precision != "fp32":
        problems.append(
            f"precision: framework=mxnet trains in fp32 only (MXNet's AMP is not wired); "
            f"got {cfg.precision}"
        )
    if cfg.compile:
        problems.append(
            "compile: framework=mxnet always runs hybridized (a static graph, built in the "
            "warm-up); compile=true has no further meaning there, leave it false"
        )
    if cfg.data.name == "folder":
        problems.append(
            "data: framework=mxnet reads no image folder yet (data=folder: torch, tf, jax; "
            "docs/your-data.md)"
        )
    from bench.envs import interpreters

    if cfg.launcher.name == "inline":
        problems.append(
            "launcher: inline runs the trial inside bench's own process, which never imports "
            f"MXNet (it has its own environment, {interpreters.own_venv(MXNET)}); use "
            "launcher=process or docker"
        )
    elif cfg.launcher.name == "process":
        problem = interpreters.problem(cfg.framework.name, cfg.framework.version)
        if problem:
            problems.append(f"framework: {problem}")


def _check_version(problems: list[str], cfg: BenchConfig) -> None:
    """framework.version: a release in the supported range with a wheel here, run where an
    environment of its own can be made for it (bench.core.versions)."""
    version = cfg.framework.version
    if not version or cfg.framework.name not in FRAMEWORKS:
        return
    from bench.core import versions

    if version != versions.INSTALLED and not versions.is_release(version):
        return  # the config's own rules refuse it
    from bench.envs import environments

    field = "framework.version"
    if version == versions.INSTALLED:  # resolved (or refused) at composition
        if cfg.launcher.name == "docker":
            problems.append(
                f"{field}: installed runs the {cfg.framework.name} that the trial's interpreter "
                "on this host has; launcher=docker runs its image's build (leave "
                "framework.version empty for the pinned one, or name a release)"
            )
        return
    if cfg.launcher.name == "inline":
        problems.append(
            f"{field}: {cfg.framework.name} {version} runs in an environment (or image) of its "
            "own, under launcher=process, docker or Slurm; launcher=inline runs the trial in "
            "bench's own process, which has the pinned version"
        )
    from bench.distributed import registry

    strategy = registry.info(cfg.distributed.name)
    if strategy is not None and strategy.pinned_version_only:
        problems.append(
            f"{field}: distributed={cfg.distributed.name} ({strategy.what}) is built for the "
            f"pinned {cfg.framework.name} ({versions.pinned(cfg.framework.name)}) and runs only "
            "that version"
        )
    from bench.images import image_variant

    variant, extra = image_variant(cfg), environments.extra_of(cfg)
    if variant:
        gpu = variant == "cuda"
        cached = environments.lock_of(cfg.framework.name, version, variant) is not None
    else:
        gpu = gpu_visible()
        cached = environments.env_for(cfg.framework.name, version, extra).ready
    found = versions.problems(cfg.framework.name, version, gpu=gpu, cached=cached)
    if not found and extra:  # the model's library, resolved for the version
        found = environments.extra_problems(cfg.framework.name, version, extra, cached=cached)
    problems += found


def _check_tracking(problems: list[str], t: TrackingConfig) -> None:
    scheme = urllib.parse.urlparse(t.uri).scheme
    if scheme not in ("sqlite", "file", "", "http", "https", "postgresql", "mysql", "databricks"):
        problems.append(
            f"tracking.uri: scheme {scheme!r} is not supported; use sqlite:///PATH.db, "
            "a directory, or http(s)://HOST:PORT"
        )
        return
    parsed = urllib.parse.urlparse(t.uri)
    if scheme in ("http", "https") and not parsed.hostname:
        problems.append(f"tracking.uri: {t.uri!r} names no host; use http(s)://HOST:PORT")
        return
    if scheme == "sqlite" and (not parsed.path.strip("/") or parsed.path.endswith("/")):
        problems.append(
            f"tracking.uri: {t.uri!r} names no database file (sqlite:// alone is a store in "
            "memory, whose results are lost when bench ends); use sqlite:///PATH.db"
        )
        return
    if scheme in ("file", "") and not _file_store_allowed():
        problems.append(
            f"tracking.uri: {t.uri!r} is a file store, which MLflow 3 keeps in maintenance mode "
            "and refuses to write unless MLFLOW_ALLOW_FILE_STORE=true is set; use "
            "sqlite:///DIR/mlflow.db (the default is sqlite:///mlruns/mlflow.db), or set "
            "MLFLOW_ALLOW_FILE_STORE=true to use the file store anyway"
        )
        return
    path = _sqlite_or_file_path(t.uri)
    if path is None:
        return
    if scheme == "sqlite" and (path.is_symlink() or path.exists()) and not path.is_file():
        problems.append(
            f"tracking.uri: {str(path)!r} is not a regular file (a FIFO, device or folder); "
            "name an SQLite database file"
        )
        return
    problem = _writable(path.parent)
    if problem:
        problems.append(
            f"tracking.uri: cannot write to {str(path.parent)!r} ({problem}); "
            "choose a writable location or an http(s):// server"
        )


def _file_store_allowed() -> bool:
    """Whether MLflow will write a file (directory) store: only where the user opted in."""
    return os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1")


def _writable(directory: Path) -> str:
    """Why ``directory`` cannot hold a store ('' if it can); leaves nothing behind."""
    created: list[Path] = []
    try:
        for parent in reversed([directory, *directory.parents]):
            if not parent.exists():
                parent.mkdir()
                created.append(parent)
        with tempfile.NamedTemporaryFile(dir=directory):
            pass
        return ""
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        for made in reversed(created):
            made.rmdir()


def validate(cfg: BenchConfig) -> None:
    """Raise :class:`ConfigError` listing every problem in ``cfg``; return if none."""
    problems = check(cfg)
    from bench.core.zoo import OWN_SOURCES
    from bench.models import MODELS  # light: the registry imports no framework

    zoo = cfg.model.source not in OWN_SOURCES
    if zoo and cfg.model.name not in MODELS:
        problems.insert(
            1,
            f"model: {cfg.model.name!r} is not allowed; choose one of {', '.join(MODELS)}",
        )
    _check_precision(problems, cfg)
    if cfg.data.name in DATASETS:
        from bench import data

        problems += data.check(cfg)
    if zoo and cfg.model.name in MODELS and MODELS[cfg.model.name].task != "image":
        from bench.models import check_sequence_model

        problems += check_sequence_model(cfg.model)
    elif zoo and cfg.model.name in MODELS:
        low = MODELS[cfg.model.name].min_image_size
        if cfg.image_size < low:
            problems.append(
                f"image_size: {cfg.model.name} needs at least {low}x{low} inputs, "
                f"got {cfg.image_size}"
            )
    _check_model_source(problems, cfg)
    if cfg.mode == "generate":
        _check_generate(problems, cfg)
    if cfg.mode == "serve":
        from bench.checks import serving

        problems += serving.check(cfg)
    _check_framework(problems, cfg)
    _check_version(problems, cfg)
    _check_tracking(problems, cfg.tracking)
    if cfg.launcher.name == "docker":
        from bench.launchers import docker_host  # imports the Docker SDK

        problems += docker_host.check(cfg)
    from bench.distributed import registry  # light: imports no framework

    problems += registry.check(cfg)
    if cfg.tuning.name == "best" and registry.distributes(cfg.distributed.name):
        problems.append(
            f"tuning: best searches single-process trials; distributed={cfg.distributed.name} "
            "runs several processes (use tuning=default, and threads=/compile= by hand)"
        )
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
