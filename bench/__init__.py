"""bench: a containerized benchmark matrix for deep-learning frameworks, tracked in MLflow.

From Python: ``bench.run(...)``, ``bench.runs(...)``, ``bench.compare(...)``
(:mod:`bench.api`), imported on first use so that ``import bench`` stays cheap."""

from typing import Any

__version__ = "0.1.0"
_API = ("run", "runs", "compare", "SweepRefused")


def __getattr__(name: str) -> Any:
    if name in _API:  # by name, not an import: the package's __init__ names no module above
        import importlib  # every other module (tests/unit/test_import_graph.py)

        return getattr(importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module 'bench' has no attribute {name!r}")
