"""Framework adapters: one module per framework, loaded only when a trial asks for it."""

from __future__ import annotations

import importlib
import os

from bench.frameworks.base import Framework

_MODULES = {
    "torch": "bench.frameworks.torch_adapter",
    "tf": "bench.frameworks.tf_adapter",
    "mxnet": "bench.frameworks.mxnet_adapter",  # imported only in .venv-mxnet
}
# Frameworks that read their thread counts from the environment once, when loaded.
_THREAD_VARIABLES = {"mxnet": ("OMP_NUM_THREADS",)}


def before_import(name: str, threads: int) -> None:
    """Set what ``name`` reads from the environment when it loads (call before :func:`load`)."""
    for variable in _THREAD_VARIABLES.get(name, ()):
        os.environ[variable] = str(threads)


def load(name: str) -> Framework:
    """Import the adapter for ``name`` (and with it the framework itself)."""
    module = importlib.import_module(_MODULES[name])
    adapter: Framework = module.Adapter()
    return adapter
