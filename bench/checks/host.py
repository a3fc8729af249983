"""The second stage of bench's checks: what this machine allows a configuration (:func:`probes`),
run once per distinct configuration after the config stage (:mod:`bench.checks.config`),
whose findings it reads: a visible GPU, the framework's environment and a version's wheels,
the data set's files, a writable tracking store, the Docker engine, a strategy's devices, a
model's probe, LoadGen.

Each problem names its field, by the same topics as the config stage's
(:data:`bench.checks.config.TOPICS`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from bench.checks.config import Found, data_fits_model, named_release, on_the_cpu
from bench.core.config import DATASETS, BenchConfig


def gpu_visible() -> bool:
    from bench.core.sysinfo import gpu_environment

    return int(gpu_environment().get("gpu_count", "0")) > 0


def probes(cfg: BenchConfig, ruled: Found) -> Found:
    """What this machine says of ``cfg``, by topic; ``ruled``: the config stage's findings,
    which decide what is worth asking (a strategy the rules refuse is not asked for its
    devices, a store whose URI is malformed is not written)."""
    found: Found = {topic: [] for topic in ruled}
    if not ruled["precision"] and cfg.precision in ("fp16", "tf32"):
        if cfg.device == "auto" and not gpu_visible():
            found["precision"].append(on_the_cpu(cfg.precision))
    if cfg.data.name in DATASETS and data_fits_model(cfg):
        from bench.trial import data

        found["data"] += data.check(cfg)
    from bench.checks import own_models

    found["model.source"] += own_models.check(cfg)
    if cfg.mode == "serve" and cfg.launcher.name == "inline":
        found["serve"] += _loadgen()
    if cfg.launcher.name == "process":  # MXNet's own environment
        from bench.envs import interpreters

        problem = interpreters.problem(cfg.framework.name, cfg.framework.version)
        if problem:
            found["framework"].append(f"framework: {problem}")
    if named_release(cfg):
        found["framework.version"] += _version_problems(cfg)
        if cfg.mode == "serve" and not found["framework.version"]:
            found["framework.version"] += _version_loadgen(cfg)
    if not ruled["tracking"]:
        _check_tracking(found["tracking"], cfg.tracking.uri)
    if cfg.launcher.name == "docker":
        from bench.launchers import docker_host  # imports the Docker SDK

        found["launcher.docker"] += docker_host.files(cfg)
        settled = ("launcher.docker", "launcher.docker.heartbeat")
        if not any(ruled[t] or found[t] for t in settled):
            found["launcher.docker.engine"] += docker_host.engine(cfg)
    if not ruled["distributed"]:
        from bench.trial.distributed import registry

        if registry.STRATEGIES[cfg.distributed.name].module:
            found["distributed"] += registry.load(cfg.distributed.name).check(
                cfg, registry.on_gpu(cfg), registry.gpus()
            )
    return found


LOADGEN = "mlperf_loadgen"


def _loadgen() -> list[str]:
    """MLPerf's LoadGen missing from this interpreter, which runs a trial of launcher=inline."""
    import importlib.util

    if importlib.util.find_spec(LOADGEN) is not None:
        return []
    return [
        "mode: serve needs MLPerf's LoadGen in this interpreter (pip install "
        "mlcommons-loadgen; bench's locks pin it)"
    ]


def _version_loadgen(cfg: BenchConfig) -> list[str]:
    """mode=serve in a version's environment made before LoadGen was a trial's package
    (bench.envs.environments.TRIAL_SIDE): its cached lock lacks it, and a cached environment
    is reused as it is; one not made yet is made with it."""
    from bench.envs import environments
    from bench.images import image_variant

    if image_variant(cfg) or cfg.launcher.name != "process":
        return []  # an image's lock is the image's; inline runs in this interpreter
    env = environments.env_for(
        cfg.framework.name, cfg.framework.version, environments.extra_of(cfg)
    )
    if not env.lock.exists() or "mlcommons-loadgen" in environments.lock_pins(env.lock):
        return []
    return [
        f"framework.version: mode=serve needs MLPerf's LoadGen, and the cached environment of "
        f"{cfg.framework.name} {cfg.framework.version} ({env.root}) was made without it; "
        "delete that folder and bench makes it again, with LoadGen, on first use"
    ]


def _version_problems(cfg: BenchConfig) -> list[str]:
    """A named release of the framework: a wheel for this machine and an environment (or an
    image's lock) that can be made for it, with the model's library (bench.core.versions,
    bench.envs.environments)."""
    from bench.core import versions
    from bench.envs import environments
    from bench.images import image_variant

    name, version = cfg.framework.name, cfg.framework.version
    variant, extra = image_variant(cfg), environments.extra_of(cfg)
    if variant:
        gpu = variant == "cuda"
        cached = environments.lock_of(name, version, variant) is not None
    else:
        gpu = gpu_visible()
        cached = environments.env_for(name, version, extra).ready
    found = versions.problems(name, version, gpu=gpu, cached=cached)
    if not found and extra:  # the model's library, resolved for the version
        found = environments.extra_problems(name, version, extra, cached=cached)
    return found


def _sqlite_or_file_path(uri: str) -> Path | None:
    """The local path a tracking URI writes to, or None for a remote store."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "sqlite":
        # sqlite:///relative/path.db or sqlite:////absolute/path.db
        return Path(uri[len("sqlite:///") :])
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme == "file" else uri) / "placeholder"
    return None


def _check_tracking(problems: list[str], uri: str) -> None:
    """A tracking.uri of a well-formed kind (the config stage's): a file store only where
    MLflow is allowed to write one, an SQLite database that is a file, a folder this
    process can write."""
    scheme = urllib.parse.urlparse(uri).scheme
    if scheme in ("file", "") and not _file_store_allowed():
        problems.append(
            f"tracking.uri: {uri!r} is a file store, which MLflow 3 keeps in maintenance mode "
            "and refuses to write unless MLFLOW_ALLOW_FILE_STORE=true is set; use "
            "sqlite:///DIR/mlflow.db (the default is sqlite:///mlruns/mlflow.db), or set "
            "MLFLOW_ALLOW_FILE_STORE=true to use the file store anyway"
        )
        return
    path = _sqlite_or_file_path(uri)
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


# --- a sweep's host stage, around its configurations' (bench.sweep.jobs.check_all) -------------


def prepare(configs: Sequence[BenchConfig]) -> list[str]:
    """Before the configurations are asked: MXNet's own environment, made on the first sweep
    whose trials run in it here (bench.envs.setup), a problem if it cannot be made; the
    distinct probes of the sweep's models, side by side (:func:`bench.checks.own_models.warm`)."""
    from bench.checks import own_models
    from bench.envs import interpreters

    problems = []
    if any(
        interpreters.own_environment(c.framework.name, c.framework.version)
        and c.launcher.name == "process"
        for c in configs
    ):
        from bench.envs.setup import ensure_mxnet

        problem = ensure_mxnet()
        problems += [problem] if problem else []
        serving = [c for c in configs if c.mode == "serve" and c.launcher.name == "process"]
        if not problem and any(interpreters.own_environment(c.framework.name) for c in serving):
            problems += _own_environment_loadgen()
    own_models.warm(configs)
    return problems


def _own_environment_loadgen() -> list[str]:
    """mode=serve in MXNet's own environment: LoadGen there, installed on first use where bench
    makes the environment (an environment made before LoadGen was in scripts/setup_mxnet.sh's
    installs is brought up to date by the script, whose stamp changed); a problem where the
    user named the interpreter (bench never installs into it) or the install did not take."""
    from bench.core.frameworks import MXNET
    from bench.envs import interpreters
    from bench.envs.setup import SetupError, run

    python = interpreters.python_for(MXNET)
    if _has_module(python, LOADGEN):
        return []
    if not interpreters.overridden(MXNET):
        print(
            "bench: installing MLPerf's LoadGen into MXNet's own environment (mode=serve; "
            f"first use, {interpreters.own_venv(MXNET)})",
            file=sys.stderr,
        )
        try:
            run(MXNET, quiet=True)
        except SetupError as exc:
            return [f"framework: mxnet: mode=serve needs MLPerf's LoadGen there: {exc}"]
        if _has_module(python, LOADGEN):
            return []
    return [
        f"framework: mxnet: mode=serve needs MLPerf's LoadGen in its interpreter {python} "
        "(pip install mlcommons-loadgen there)"
    ]


def _has_module(python: str, module: str) -> bool:
    """Whether the interpreter ``python`` finds ``module`` (nothing imported)."""
    from bench.envs import interpreters

    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        done = subprocess.run(
            [python, "-c", code], capture_output=True, timeout=60, env=interpreters.child_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def placement(cfg: BenchConfig, slurm: bool, partition: tuple[str, int] | None) -> list[str]:
    """Where a multi-node trial runs: inside an allocation when its jobs run here, within
    the Slurm partition's nodes (``partition``: its name and node count, where known)."""
    problems = []
    if cfg.nodes > 1 and not slurm:  # the jobs run here: this must be an allocation
        from bench.trial.distributed.nodes import allocation_problem

        problem = allocation_problem(cfg)
        problems += [problem] if problem else []
    if slurm and partition is not None and cfg.nodes > partition[1]:
        problems.append(
            f"nodes: {cfg.nodes} nodes asked for; Slurm partition {partition[0]} has {partition[1]}"
        )
    return problems


def environments(configs: Sequence[BenchConfig]) -> list[str]:
    """Make (or find cached) the environment of every non-pinned framework version the sweep
    runs (bench.envs.environments), or, under launcher=docker, the lock its image installs (the
    image itself is built on first use); a version that cannot get one is a problem."""
    from bench.core.versions import own_release
    from bench.envs import environments
    from bench.images import image_variant

    wanted = dict.fromkeys(
        (
            c.framework.name,
            own_release(c.framework.version),
            image_variant(c),
            environments.extra_of(c),
        )
        for c in configs
        if own_release(c.framework.version)
    )
    problems = []
    for framework, version, variant, extra in wanted:
        try:
            if variant:
                environments.image_lock(framework, version, variant)
            else:
                environments.ensure(framework, version, gpu=gpu_visible(), extra=extra)
        except environments.EnvironmentError_ as exc:
            problems.append(str(exc))
    return problems


def devices(configs: Sequence[tuple[str, BenchConfig]]) -> list[str]:
    """The device each framework of the sweep trains on (:mod:`bench.checks.device`)."""
    from bench.checks import device

    return device.check(configs)
