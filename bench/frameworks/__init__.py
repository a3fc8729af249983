"""Framework adapters: one module per framework, loaded only when a trial asks for it."""

from __future__ import annotations

import importlib
import os

from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS
from bench.frameworks.base import Framework

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
    variable = _ONEDNN_VARIABLES.get(name)
    if variable and cfg.onednn != "auto":
        os.environ[variable] = "1" if cfg.onednn == "on" else "0"


def load(name: str) -> Framework:
    """Import the adapter for ``name`` (and with it the framework itself)."""
    module = importlib.import_module(_MODULES[name])
    adapter: Framework = module.Adapter()
    return adapter
