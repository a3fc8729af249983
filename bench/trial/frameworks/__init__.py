"""Framework adapters: one module per framework, loaded only when a trial asks for it."""

from __future__ import annotations

import importlib
import os
import re

from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS
from bench.trial.frameworks.base import Framework

# Each framework's adapter, as its spec names it (MXNet's imported only in .venv-mxnet).
_MODULES = {name: spec.adapter for name, spec in FRAMEWORKS.items()}
# What frameworks read from the environment once, when loaded: MXNet its OpenMP threads,
# its CPU engine's workers and whether oneDNN runs; TensorFlow whether oneDNN runs.
_ONEDNN_VARIABLES = {"tf": "TF_ENABLE_ONEDNN_OPTS", "mxnet": "MXNET_MKLDNN_ENABLED"}


def before_import(cfg: BenchConfig, threads: int) -> None:
    """Set what the trial's framework reads from the environment when it loads (call before
    :func:`load`): ``threads`` and ``cfg``'s inter-op threads and oneDNN setting."""
    name = cfg.framework.name
    if name == "mxnet":
        os.environ["OMP_NUM_THREADS"] = str(threads)
        if cfg.inter_threads:
            os.environ["MXNET_CPU_WORKER_NTHREADS"] = str(cfg.inter_threads)
    if name == "jax":  # XLA's CPU threads, read when JAX's client starts; Keras' backend
        os.environ["XLA_FLAGS"] = xla_flags(os.environ.get("XLA_FLAGS", ""), threads)
        os.environ[XLA_CPU_THREADS] = str(threads)
        os.environ["KERAS_BACKEND"] = "jax"
    variable = _ONEDNN_VARIABLES.get(name)
    if variable and cfg.onednn != "auto":
        os.environ[variable] = "1" if cfg.onednn == "on" else "0"


# What sizes the Eigen pool of XLA's CPU client (JAX's intra-op threads): the variable its
# default thread count reads (else the cores); XLA_FLAGS has no thread-count flag.
XLA_CPU_THREADS = "NPROC"


def xla_flags(existing: str, threads: int) -> str:
    """``XLA_FLAGS`` with Eigen's multi-threading off for one thread, the other flags kept
    (the pool's size is :data:`XLA_CPU_THREADS`).  ``intra_op_parallelism_threads``, which
    XLA does not know (its flag parser passes a word without ``--`` over, and stops at one
    with it), is dropped."""
    kept = re.sub(
        r"(--)?(xla_cpu_multi_thread_eigen|intra_op_parallelism_threads)=\S*", "", existing
    ).split()
    eigen = "true" if threads > 1 else "false"
    return " ".join([*kept, f"--xla_cpu_multi_thread_eigen={eigen}"])


def load(name: str) -> Framework:
    """Import the adapter for ``name`` (and with it the framework itself)."""
    module = importlib.import_module(_MODULES[name])
    adapter: Framework = module.Adapter()
    return adapter
