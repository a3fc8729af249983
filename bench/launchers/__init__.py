"""Launchers run one trial in isolation and hand back its result.

One module per launcher; :func:`get` imports only the one asked for.
"""

from __future__ import annotations

import importlib

from bench.launchers.base import Launcher, TrialInterrupted

_MODULES = {
    "process": "bench.launchers.process",
    "inline": "bench.launchers.inline",
    "docker": "bench.launchers.docker",
}

__all__ = ["Launcher", "TrialInterrupted", "get"]


def get(name: str) -> Launcher:
    launcher: Launcher = importlib.import_module(_MODULES[name]).Launcher()
    return launcher
