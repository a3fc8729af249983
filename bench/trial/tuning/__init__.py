"""``tuning=best``: each framework at its fastest settings on this machine, before the trial.

:func:`resolve` runs in the trial's own process, before its framework is imported: it finds
a cached search for this host and workload, or searches (:mod:`.search`) and caches the
result, then hands back the configuration with the chosen settings applied.  The timed
trial then runs as any other.  Keys the user set away from their defaults are fixed, not
searched (:func:`bench.trial.frameworks.spaces.fixed`).  Inside a sweep, the repeats of one
configuration use one pick: the first repeat searches (``tuning.refresh=true`` forces it),
the later ones read what it cached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.config import BenchConfig, resolved_threads, usable_cpus
from bench.trial import models
from bench.trial.frameworks import spaces
from bench.trial.tuning import cache
from bench.trial.tuning.search import Probe, Row, SearchFailed, objective, run_probe, search

TABLE_JSON = "tuning.json"
TABLE_TEXT = "tuning.txt"


@dataclass
class Tuned:
    """What a search gave the trial: the settings applied, where they came from and what
    the search cost."""

    cfg: BenchConfig
    pick: dict[str, Any]
    source: str  # "search" or "cache <key> (<when>)"
    search_s: float
    table: list[dict[str, Any]] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the table's files in the trial's folder

    def params(self) -> dict[str, str]:
        """The run's ``tuned.*`` params: every searchable setting's effective value."""
        out = {}
        for k in spaces.DEFAULTS:
            value = getattr(self.cfg, k)
            out[k] = str(value).lower() if isinstance(value, bool) else str(value)
        out["threads"] = str(resolved_threads(self.cfg))  # 0 means every usable core
        if self.cfg.mode == "serve":  # a param name is one plain word (result.tuned)
            out["max_batch"] = str(self.cfg.serve.max_batch)
        return out


def knobs(cfg: BenchConfig, host: dict[str, str] | None = None) -> list[spaces.Knob]:
    """What a search of ``cfg`` tries: its framework's space without the keys it fixes.
    ``host``: :func:`cache.host_fingerprint`'s answer, where the caller has it already."""
    host = cache.host_fingerprint() if host is None else host
    cuda = cfg.device == "cuda" or (cfg.device == "auto" and bool(host["gpu_names"]))
    image = models.task(cfg.model) == "image"
    fixed = spaces.fixed(cfg)
    every = spaces.space(cfg, usable_cpus(), cuda, image)
    only = set(cfg.tuning.keys) or set(spaces.searchable(cfg))
    return [k for k in every if k.key not in fixed and k.key in only]


def in_space(pick: dict[str, Any], space: list[spaces.Knob]) -> bool:
    """Whether ``pick`` is a point of ``space``: each key one the search tries, at one of the
    values it tries (or its default)."""
    values = {k.key: (*k.values, spaces.SEARCHABLE[k.key]) for k in space}
    return all(key in values and value in values[key] for key, value in pick.items())


def resolve(
    cfg: BenchConfig,
    workdir: Path | None = None,
    probe: Probe = run_probe,
    progress: Callable[[str], None] | None = None,
) -> Tuned:
    """``cfg`` at its best settings: from the cache, or from a search cached afterwards."""
    t0 = time.monotonic()
    host = cache.host_fingerprint()
    name = cache.key(cfg, host)
    fixed = spaces.fixed(cfg)
    entry = None if cfg.tuning.refresh and cfg.repeat == 0 else cache.load(name)
    if entry is not None and not in_space(entry["pick"], knobs(cfg, host)):
        entry = None  # not a point of this search's space (an edited file): search again
    refused = cache.refused()
    if entry is not None and any(
        cache.refusal_key(cfg.framework.name, cfg.model.name, k, v) in refused
        for k, v in entry["pick"].items()
    ):  # the parity check refused a setting of the cached pick since: search again
        entry = None
    if entry is not None:
        pick, table = dict(entry["pick"]), list(entry["table"])
        source = f"cache {name} ({entry.get('made', '?')})"
    else:
        pick, rows = search(cfg, knobs(cfg, host), probe, progress, refused)
        table = [r.to_dict() for r in rows]
        loaded = sum(bool(r.loaded) for r in rows)
        if loaded:  # a pick made under load is this search's, never a later trial's
            source = (
                f"search (not cached: {loaded} of {len(rows)} probes were timed under load "
                "that did not let go)"
            )
        else:
            source = "search"
            made = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            cache.store(name, {"made": made, "host": host, "pick": pick, "table": table})
    tuned = Tuned(
        cfg=spaces.apply(cfg, pick),
        pick=pick,
        source=source,
        search_s=time.monotonic() - t0,
        table=table,
        fixed=fixed,
    )
    if workdir is not None:
        tuned.files = write_table(tuned, workdir)
    return tuned


def write_table(tuned: Tuned, workdir: Path) -> list[str]:
    """The search table as ``tuning.json`` and a readable ``tuning.txt`` in ``workdir``."""
    data = {
        "source": tuned.source,
        "objective": objective(tuned.cfg).name,
        "pick": tuned.pick,
        "fixed": tuned.fixed,
        "not_searched": spaces.NOT_SEARCHED.get(tuned.cfg.framework.name, ""),
        "table": tuned.table,
    }
    (workdir / TABLE_JSON).write_text(json.dumps(data, indent=1, default=str))
    (workdir / TABLE_TEXT).write_text(render(tuned))
    return [TABLE_JSON, TABLE_TEXT]


def render(tuned: Tuned) -> str:
    lines = [f"tuning=best for {tuned.cfg.framework.name}/{tuned.cfg.model.name}: {tuned.source}"]
    if tuned.fixed:
        lines.append("fixed by the configuration: " + _settings(tuned.fixed))
    goal = objective(tuned.cfg)
    lines.append(f"{'settings':<44} {goal.name + ' (3 windows)':<28} {'compile_s':>9}  result")
    for row in tuned.table:
        rates = " ".join(goal.shown(r) for r in row.get("rates", []))
        mark = "chosen" if row.get("chosen") else row.get("status", "")
        mark += " (under load)" if row.get("loaded") else ""
        error = f" {row.get('error', '')}" if row.get("error") else ""
        note = f" ({row['note']})" if row.get("note") else ""
        compile_s = float(row.get("compile_s", 0.0))
        lines.append(
            f"{_settings(row.get('settings', {})):<44} {rates:<28} {compile_s:>9.2f}  "
            f"{mark}{note}{error}"
        )
    missing = spaces.NOT_SEARCHED.get(tuned.cfg.framework.name, "")
    if missing:
        lines.append(f"not searched ({tuned.cfg.framework.name} has no such setting): {missing}")
    return "\n".join(lines) + "\n"


def _settings(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "as given"


said = _settings  # a pick in words: "channels_last=true", or "as given"


__all__ = ["Row", "SearchFailed", "Tuned", "knobs", "objective", "resolve", "render", "said"]
