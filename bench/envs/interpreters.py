"""Which Python runs a trial of each framework.

torch and TensorFlow trials run with bench's own interpreter.  MXNet 1.9.1 needs numpy
1.23, which cannot share an environment with them, so its trials run with the interpreter
of its own pinned environment, and the host process never imports mxnet: ``.venv-mxnet`` in
a checkout, ``~/.cache/bench/mxnet/venv`` (``BENCH_CACHE``) for an installed wheel, made by
``bench setup mxnet`` (:mod:`bench.envs.setup`) or by a sweep's first MXNet trial.
``BENCH_MXNET_PYTHON`` points elsewhere (and is then never made by bench).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

from bench.core import paths, versions
from bench.core.frameworks import FRAMEWORKS

# Frameworks that live in an environment of their own: the variable that overrides it.
OWN_ENVIRONMENTS = {n: s.own_python_env for n, s in FRAMEWORKS.items() if s.own_environment}


def own_venv(framework: str) -> Path:
    """Where bench makes ``framework``'s own environment."""
    if paths.checkout():
        return paths.PACKAGE.parent / f".venv-{framework}"
    return paths.cache_dir() / framework / "venv"


def python_for(framework: str, version: str = "", extra: str = "") -> str:
    """The interpreter that runs ``python -m bench.trial.worker`` for a trial of ``framework`` (at
    ``version``: "" is the pinned one; any other has an environment of its own, with the
    ``extra`` its model needs, :func:`bench.envs.environments.extra_of`, made by
    :func:`bench.envs.environments.ensure` before the sweep's first trial)."""
    if versions.own_release(version):
        from bench.envs.environments import env_for

        return str(env_for(framework, version, extra).python)
    if framework not in OWN_ENVIRONMENTS:
        return sys.executable
    return os.environ.get(OWN_ENVIRONMENTS[framework]) or str(own_venv(framework) / "bin/python")


def own_environment(framework: str, version: str = "") -> bool:
    """Whether a trial of ``framework`` at ``version`` runs in the framework's own
    environment when it runs in a process here: a framework that has one, at its pinned
    version (any other version has an environment of its own, bench.envs.environments)."""
    return framework in OWN_ENVIRONMENTS and not versions.own_release(version)


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


_DESCRIBE = (
    "import json, sys; from bench.core.versions import describe; "
    "print(json.dumps(describe(sys.argv[1])))"
)


@cache
def installed(framework: str) -> dict[str, str]:
    """What the interpreter that runs ``framework``'s trials (at its pinned version, or
    ``installed``) has of it, read without importing it (:func:`bench.core.versions.describe`):
    this process for torch and tf, a short child of its own environment's interpreter for
    MXNet; {} where it is not importable there.  The child's answer is checked, not trusted:
    anything but short printable strings under the known keys is no answer."""
    python = python_for(framework)
    if python == sys.executable:
        return versions.describe(framework)
    if not os.access(python, os.X_OK):
        return {}
    try:
        done = subprocess.run(
            [python, "-c", _DESCRIBE, framework],
            capture_output=True, text=True, timeout=60, env=child_env(),
        )  # fmt: skip
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    keys = ("version", "cuda", "cudnn")
    if not isinstance(answer, dict) or not answer or set(answer) - set(keys):
        return {}
    if not all(isinstance(v, str) and len(v) <= 64 and v.isprintable() for v in answer.values()):
        return {}
    return {k: str(answer.get(k, "")) for k in keys}
