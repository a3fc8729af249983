"""Cached searches: one JSON file per (host, framework build, workload) under bench's cache.

A search is written whole, once it has finished (an interrupted one leaves nothing), owner
only; a cached file is untrusted input like any other: it is believed only if it is this
user's own private regular file, for the same key, and its pick names known settings with
values of the right kind.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from bench.core import paths, sysinfo
from bench.core.config import AUTO, BenchConfig, TelemetryConfig, TuningConfig, usable_cpus
from bench.core.identity import config_hash
from bench.trial.frameworks.spaces import SEARCHABLE, SPACE_VERSION

_MAX_BYTES = 1 << 20


def host_fingerprint() -> dict[str, str]:
    """What makes one machine's best settings another's: CPU model and usable cores, GPU
    names and driver."""
    gpu = sysinfo.gpu_environment()
    return {
        "cpu_model": sysinfo.cpu_model(),
        "cpus": str(usable_cpus()),
        "gpu_names": gpu.get("gpu_names", ""),
        "gpu_driver": gpu.get("gpu_driver", ""),
    }


def workload(cfg: BenchConfig) -> BenchConfig:
    """``cfg`` without what does not change which setting is fastest: how long and how often
    it is timed, its seed, its repeat, what else it records."""
    return dataclasses.replace(
        cfg,
        epochs=1,
        steps_per_epoch=AUTO,
        repeat=0,
        seed=0,
        breakdown=False,
        profile=False,
        telemetry=TelemetryConfig(),
        tuning=TuningConfig(name="best"),
    )


def key(cfg: BenchConfig, host: dict[str, str]) -> str:
    search = {"probe_s": cfg.tuning.probe_s, "keys": sorted(cfg.tuning.keys)}
    blob = json.dumps(
        {
            "space": SPACE_VERSION,
            "host": host,
            "workload": config_hash(workload(cfg)),
            "search": search,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def folder() -> Path:
    return paths.cache_dir() / "tuning"


def load(name: str) -> dict[str, Any] | None:
    """The cached search ``name`` (a :func:`key`), or None if there is none to believe."""
    path = folder() / f"{name}.json"
    if not paths.owned_private(path) or path.stat().st_size > _MAX_BYTES:
        return None
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != name:
        return None
    pick = entry.get("pick")
    if not isinstance(pick, dict) or not valid_pick(pick):
        return None
    if not isinstance(entry.get("table"), list):
        return None
    return entry


def valid_pick(pick: dict[str, Any]) -> bool:
    """Whether ``pick`` sets only searchable keys, each to a value of its default's type."""
    for k, v in pick.items():
        if k not in SEARCHABLE or type(v) is not type(SEARCHABLE[k]):
            return False
        if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= 4096:
            return False
        if isinstance(v, str) and v not in ("auto", "on", "off"):
            return False
    return True


def store(name: str, entry: dict[str, Any]) -> Path:
    """Write the finished search ``entry`` as ``name`` (whole, owner only)."""
    path = paths.private_dir(folder()) / f"{name}.json"
    paths.write_private(path, json.dumps({**entry, "key": name}, indent=1))
    return path


# -- settings refused by the parity check ---------------------------------------------------
# parity at best (bench.parity --tuning best, parity=true with tuning=best) runs every
# alternative a search may pick as a side of its own; one that fails is written here, and a
# search of the same framework and model skips it, saying why.
REFUSED = "refused.json"


def refusal_key(framework: str, model: str, key: str, value: object) -> str:
    return f"{framework}/{model}/{key}={str(value).lower()}"


def refused() -> dict[str, str]:
    """Every refused setting (:func:`refusal_key`) with its reason; {} if none can be
    believed."""
    path = folder() / REFUSED
    if not paths.owned_private(path) or path.stat().st_size > _MAX_BYTES:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v[:500] for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def set_refusals(framework: str, model: str, verdicts: dict[tuple[str, str], str]) -> None:
    """Record the parity verdicts of ``framework``'s settings on ``model``: ``{(key, value):
    reason}``, where an empty reason clears an earlier refusal (the setting passed)."""
    with paths.locked(paths.private_dir(folder()) / ".refused.lock"):
        data = refused()
        for (key, value), reason in verdicts.items():
            name = refusal_key(framework, model, key, value)
            if reason:
                data[name] = reason
            else:
                data.pop(name, None)
        paths.write_private(folder() / REFUSED, json.dumps(data, indent=1, sort_keys=True))
