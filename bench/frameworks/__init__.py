"""Framework adapters: one module per framework, loaded only when a trial asks for it."""

from __future__ import annotations

import importlib

from bench.frameworks.base import Framework

_MODULES = {"torch": "bench.frameworks.torch_adapter", "tf": "bench.frameworks.tf_adapter"}


def load(name: str) -> Framework:
    """Import the adapter for ``name`` (and with it the framework itself)."""
    module = importlib.import_module(_MODULES[name])
    adapter: Framework = module.Adapter()
    return adapter
