"""Which Python runs a trial of each framework.

torch and TensorFlow trials run with bench's own interpreter (the host's ``.venv``).  MXNet
1.9.1 needs numpy 1.23, which cannot share an environment with them, so its trials run with
the interpreter of its own pinned environment, ``.venv-mxnet`` (``scripts/setup_mxnet.sh``),
and the host process never imports mxnet.  ``BENCH_MXNET_PYTHON`` points elsewhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Frameworks that live in an environment of their own: (variable overriding it, default path).
OWN_ENVIRONMENTS = {"mxnet": ("BENCH_MXNET_PYTHON", REPO / ".venv-mxnet" / "bin" / "python")}
SETUP = {"mxnet": "bash scripts/setup_mxnet.sh"}


def python_for(framework: str, version: str = "") -> str:
    """The interpreter that runs ``python -m bench.worker`` for a trial of ``framework`` (at
    ``version``: "" is the pinned one; any other has an environment of its own, made by
    :func:`bench.environments.ensure` before the sweep's first trial)."""
    if version:
        from bench.environments import env_for

        return str(env_for(framework, version).python)
    if framework not in OWN_ENVIRONMENTS:
        return sys.executable
    variable, default = OWN_ENVIRONMENTS[framework]
    return os.environ.get(variable) or str(default)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that runs bench's modules with another (or this)
    interpreter: this one's, with bench's checkout first on ``PYTHONPATH``, plus ``extra``."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **extra)


def problem(framework: str) -> str:
    """Why a trial of ``framework`` cannot start a worker here ('' if it can)."""
    python = python_for(framework)
    if os.access(python, os.X_OK):
        return ""
    variable, _ = OWN_ENVIRONMENTS[framework]
    return (
        f"{framework} runs in its own environment and its interpreter {python} is missing; "
        f"create it with `{SETUP[framework]}` (scripts/setup.sh does), or set {variable}"
    )
