"""Which Python runs a trial of each framework.

torch and TensorFlow trials run with bench's own interpreter.  MXNet 1.9.1 needs numpy
1.23, which cannot share an environment with them, so its trials run with the interpreter
of its own pinned environment, and the host process never imports mxnet: ``.venv-mxnet`` in
a checkout, ``~/.cache/bench/mxnet/venv`` (``BENCH_CACHE``) for an installed wheel, made by
``bench setup mxnet`` (:mod:`bench.setup_envs`) or by a sweep's first MXNet trial.
``BENCH_MXNET_PYTHON`` points elsewhere (and is then never made by bench).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench import paths

# Frameworks that live in an environment of their own: the variable that overrides it.
OWN_ENVIRONMENTS = {"mxnet": "BENCH_MXNET_PYTHON"}


def own_venv(framework: str) -> Path:
    """Where bench makes ``framework``'s own environment."""
    if paths.checkout():
        return paths.PACKAGE.parent / f".venv-{framework}"
    return paths.cache_dir() / framework / "venv"


def python_for(framework: str, version: str = "") -> str:
    """The interpreter that runs ``python -m bench.worker`` for a trial of ``framework`` (at
    ``version``: "" is the pinned one; any other has an environment of its own, made by
    :func:`bench.environments.ensure` before the sweep's first trial)."""
    if version:
        from bench.environments import env_for

        return str(env_for(framework, version).python)
    if framework not in OWN_ENVIRONMENTS:
        return sys.executable
    return os.environ.get(OWN_ENVIRONMENTS[framework]) or str(own_venv(framework) / "bin/python")


def own_environment(framework: str, version: str = "") -> bool:
    """Whether a trial of ``framework`` at ``version`` runs in the framework's own
    environment when it runs in a process here: a framework that has one, at its pinned
    version (any other version has an environment of its own, bench.environments)."""
    return framework in OWN_ENVIRONMENTS and not version


def overridden(framework: str) -> bool:
    """Whether the user named ``framework``'s interpreter (bench then never makes it)."""
    return bool(os.environ.get(OWN_ENVIRONMENTS.get(framework, "")))


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that runs bench's modules with another (or this)
    interpreter: this one's, with bench's sources first on ``PYTHONPATH``, plus ``extra``."""
    path = os.pathsep.join(filter(None, [str(paths.source_root()), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **extra)


def problem(framework: str, version: str = "") -> str:
    """Why a trial of ``framework`` cannot start a worker here for want of the framework's
    own environment ('' if it can, or needs none: see :func:`own_environment`)."""
    if not own_environment(framework, version):
        return ""
    python = python_for(framework)
    if os.access(python, os.X_OK):
        return ""
    return (
        f"{framework} runs in its own environment and its interpreter {python} is missing; "
        f"create it with `bench setup {framework}`, or set {OWN_ENVIRONMENTS[framework]}"
    )
