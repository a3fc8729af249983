"""The telemetry a trial sampled, as MLflow system metrics (``system/...``), so that the
run's "System metrics" tab in the MLflow UI shows them as it shows MLflow's own.

Read from the sample files the monitors write beside the result (``telemetry_gpu.csv``,
``telemetry_host.csv``), thinned to at most one point per ``every_s`` per series; the
step is the point's index and the timestamp the sample's time (the trial's start plus the
sample's offset).  The files themselves stay artifacts: they hold every sample.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

GPU_FILE = "telemetry_gpu.csv"
HOST_FILE = "telemetry_host.csv"
# GPU sample columns -> MLflow's names for them (with the GPU's index).
GPU_NAMES = {
    "sm_util_pct": "utilization_percentage",
    "mem_used_mb": "memory_usage_megabytes",
    "mem_util_pct": "memory_utilization_percentage",
    "power_w": "power_usage_watts",
    "temp_c": "temperature_celsius",
    "sm_clock_mhz": "sm_clock_megahertz",
}

Point = tuple[str, float, int, int]  # key, value, timestamp (ms), step


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _thinned(rows: list[tuple[float, float]], every_s: float) -> Iterator[tuple[float, float]]:
    last = -float("inf")
    for t, v in rows:
        if t - last >= every_s:
            last = t
            yield t, v


def _series(
    points: dict[str, list[tuple[float, float]]], start_s: float, every_s: float
) -> list[Point]:
    out: list[Point] = []
    for key, rows in points.items():
        for step, (t, v) in enumerate(_thinned(sorted(rows), every_s)):
            out.append((key, v, int((start_s + t) * 1000), step))
    return out


def gpu_points(path: Path, start_s: float, every_s: float = 1.0) -> list[Point]:
    points: dict[str, list[tuple[float, float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            t = _float(row.get("time_s", ""))
            if t is None:
                continue
            for column, name in GPU_NAMES.items():
                value = _float(row.get(column) or "")
                if value is not None:
                    points.setdefault(f"system/gpu_{row['gpu']}_{name}", []).append((t, value))
    return _series(points, start_s, every_s)


def host_points(path: Path, start_s: float, every_s: float = 1.0) -> list[Point]:
    """The trial's process tree: CPU utilization (its CPU time over wall time, as a share of
    the machine's cores), resident memory, and the CPU package energy where RAPL reads it.

    Utilization is averaged over each interval between the points kept (at least
    ``every_s`` apart, and the last sample if at least half that after the point before it,
    or if there is no point yet), not taken from two samples a few milliseconds apart: CPU
    time advances in clock ticks, so such a pair often reads 0 or far above 100.  A point
    is at most 100 (all the machine's cores): over an interval, a tick can read as above.
    """
    cores = os.cpu_count() or 1
    points: dict[str, list[tuple[float, float]]] = {}
    cpu_rows: list[tuple[float, float]] = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            t = _float(row.get("time_s", ""))
            if t is None:
                continue
            cpu = _float(row.get("cpu_time_s", ""))
            if cpu is not None:
                cpu_rows.append((t, cpu))
            rss = _float(row.get("rss_mb", ""))
            if rss is not None:
                points.setdefault("system/process_memory_rss_megabytes", []).append((t, rss))
            energy = _float(row.get("cpu_energy_j") or "")
            if energy is not None:
                points.setdefault("system/cpu_energy_joules", []).append((t, energy))
    out = _series(points, start_s, every_s)
    cpu_rows.sort()
    kept = list(_thinned(cpu_rows, every_s))
    if kept and cpu_rows[-1][0] > kept[-1][0]:
        gap = cpu_rows[-1][0] - kept[-1][0]
        if gap >= every_s / 2 or len(kept) == 1:
            kept.append(cpu_rows[-1])
    for step, ((t0, c0), (t1, c1)) in enumerate(zip(kept, kept[1:], strict=False)):
        # A tick's worth of jitter can read a little above the machine's cores: capped.
        share = min(100.0, 100.0 * (c1 - c0) / (t1 - t0) / cores)
        out.append(("system/cpu_utilization_percentage", share, int((start_s + t1) * 1000), step))
    return out


def points(files: list[Path], start_s: float, every_s: float = 1.0) -> list[Point]:
    """Every system-metric point of a trial's sample files (others are ignored)."""
    out: list[Point] = []
    for path in files:
        if path.name == GPU_FILE and path.is_file():
            out += gpu_points(path, start_s, every_s)
        elif path.name == HOST_FILE and path.is_file():
            out += host_points(path, start_s, every_s)
    return out
