"""What a run needs beyond bench's own environment, made by ``bench setup mxnet|horovod``
(:mod:`bench.cli.setup`) or on first use.

- ``mxnet``: MXNet 1.9.1's own pinned environment (it needs numpy 1.23): ``.venv-mxnet`` in
  a checkout, ``~/.cache/bench/mxnet/venv`` for an installed wheel (:mod:`bench.envs.interpreters`).
  A sweep's first MXNet trial makes it too (:func:`ensure_mxnet`), so this is only needed
  to make it ahead of time.
- ``horovod``: Horovod 0.28.1, built from its sdist with bench's patch against the torch and
  TensorFlow of bench's own environment and installed there (about 13 minutes on 2 cores
  the first time; the wheel is cached under ``~/.cache/bench``).

Both run the set-up scripts that a checkout uses (``scripts/setup_mxnet.sh``,
``scripts/setup_horovod.sh``; a wheel carries them, the MXNet constraints and the Horovod
patch as package data), told where to put things: one implementation for both installs.
Each is safe to re-run and does nothing when its result is current.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from bench.core import paths
from bench.core.frameworks import MXNET, own_environment
from bench.envs import interpreters

WHAT = {
    MXNET: "MXNet 1.9.1's own environment (numpy 1.23), where framework=mxnet trials run",
    "horovod": "Horovod 0.28.1 built against this environment's torch and TensorFlow",
}


class SetupError(RuntimeError):
    """A set-up script failed; the message holds the end of its output."""


def _variant() -> str:
    """cuda where a GPU answers through NVML (as scripts/setup.sh decides by nvidia-smi),
    else cpu; BENCH_VARIANT overrides."""
    from bench.core.sysinfo import gpu_environment

    if os.environ.get("BENCH_VARIANT"):
        return os.environ["BENCH_VARIANT"]
    return "cuda" if int(gpu_environment().get("gpu_count", "0")) > 0 else "cpu"


def _script_env(name: str) -> dict[str, str]:
    env = dict(os.environ, BENCH_CACHE=str(paths.cache_dir()))
    if own_environment(name):  # a framework's own environment: MXNet's
        env.update(
            BENCH_VARIANT=_variant(),
            BENCH_MXNET_VENV=str(interpreters.own_venv(MXNET)),
            BENCH_SOURCE_ROOT=str(paths.source_root()),
        )
        env.setdefault("PYTHON_MXNET", getattr(sys, "_base_executable", sys.executable))
        with contextlib.suppress(ImportError, FileNotFoundError):
            from uv import find_uv_bin

            env.setdefault("BENCH_UV", find_uv_bin())
    else:
        env.update(BENCH_PYTHON=sys.executable, BENCH_HOROVOD="1")
    return env


def run(name: str, *, quiet: bool = False) -> None:
    """Run ``name``'s set-up script; raise :class:`SetupError` if it fails.  ``quiet``
    keeps its output unless it fails (its own progress lines go to stderr otherwise)."""
    script = paths.data("scripts") / f"setup_{name}.sh"
    done = subprocess.run(
        ["bash", str(script)],
        env=_script_env(name),
        stdout=subprocess.PIPE if quiet else None,
        stderr=subprocess.STDOUT if quiet else None,
        text=True,
    )
    if done.returncode != 0:
        tail = "".join(f"\n  {line}" for line in (done.stdout or "").strip().splitlines()[-15:])
        raise SetupError(f"{script.name} failed (exit {done.returncode}){tail}")


def ensure_mxnet() -> str:
    """Make MXNet's environment on first use; '' when it is ready, else why it is not."""
    if not interpreters.problem(MXNET):
        return ""
    if interpreters.overridden(MXNET):
        return f"framework: {interpreters.problem(MXNET)}"
    print(
        f"bench: making MXNet's own environment (first use; seconds with uv's cache warm; kept in "
        f"{interpreters.own_venv(MXNET)})",
        file=sys.stderr,
    )
    with paths.locked(paths.cache_dir() / "mxnet-setup.lock"):
        try:
            run(MXNET, quiet=True)
        except SetupError as exc:
            return f"framework: mxnet: its environment could not be made: {exc}"
    return ""
