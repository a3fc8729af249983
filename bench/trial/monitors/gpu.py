"""GPU telemetry from NVML (``nvidia-ml-py``, imported as ``pynvml``).

A background thread reads every GPU the trial uses each ``telemetry.interval_s``:
utilization (SM and memory), memory used, power, the total-energy counter, SM clock,
temperature and throttle reasons.  Per timed epoch it reports:

- ``energy_j``: the energy counter's difference over the epoch's window, both ends linearly
  interpolated between the samples around them (a sample is taken right after each window
  closes, so the end is always bracketed).  Where the counter does not exist (GPUs older
  than Volta) the power samples are integrated instead; the tag ``energy_method`` says which.
  NVML's power reading is itself averaged over up to a second on recent GPUs, so integrated
  energy is coarse for short epochs; power samples are for plots.
- ``power_w`` = ``energy_j`` / window; ``energy_per_sample_j`` = ``energy_j`` / samples.
- ``gpu_util_pct`` (SM) and ``gpu_mem_util_pct``: means of the samples in the window (NVML
  averages each over its own last sample period, 1/6 s to 1 s); ``gpu_mem_mb`` and
  ``gpu_temp_c``: maxima; ``gpu_sm_clock_mhz``: mean; ``gpu_throttle_pct``: the share of
  samples with a power, thermal or hardware slowdown reason set.
With several GPUs, energy, power and memory are summed, utilization and clock averaged.

Idle power is the mean power of the GPUs, sampled for about a second before the trial
touches a device (while the framework is imported).  NVML is reached through the narrow
:class:`GpuReader` protocol; :class:`NvmlReader` is the real one, and tests drive the
same monitor with recorded reading sequences.
"""

from __future__ import annotations

import bisect
import csv
import statistics
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from bench.core import metrics
from bench.trial.monitors.base import (
    Findings,
    Sampler,
    Window,
    epoch_of,
    inside,
    integrate,
    interpolate,
)
from bench.trial.monitors.nvml import (
    SLOWDOWN,
    THROTTLE_REASONS,
    GpuReader,
    GpuReading,
    GpuUnavailable,
)

SAMPLES_FILE = "telemetry_gpu.csv"
PLOT_FILE = "telemetry_gpu.png"
IDLE_S = 1.0


class _Series:
    """One GPU's samples: times (perf_counter s) and readings, appended by the sampler."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.readings: list[GpuReading] = []


class GpuMonitor:
    """Samples the GPUs with NVML indices ``gpus``; see the module docstring."""

    def __init__(
        self,
        reader: GpuReader,
        gpus: list[int],
        interval_s: float,
        origin: float,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not gpus:
            raise GpuUnavailable("no GPU is visible to the trial")
        self.reader, self.gpus, self.origin, self.clock = reader, list(gpus), origin, clock
        self.interval_s = interval_s
        self.series = {g: _Series() for g in self.gpus}
        self.windows: list[Window] = []
        self.methods: list[str] = []
        self.idle_w: dict[int, float] = {}
        self._idle: dict[int, list[float]] = {g: [] for g in self.gpus}
        self._idle_sampler: Sampler | None = None
        self._idle_started = 0.0
        self._sampler = Sampler("bench-telemetry-gpu", self._read, interval_s)
        self._stopped = False

    # Idle power, measured before the trial uses a device.
    def begin_idle(self) -> None:
        self._idle_started = self.clock()
        self._idle_sampler = Sampler("bench-telemetry-gpu-idle", self._read_idle, self.interval_s)
        self._idle_sampler.start()

    def end_idle(self, idle_s: float = IDLE_S) -> None:
        """Wait until ``idle_s`` of idle samples exist (no wait if already), then stop."""
        if self._idle_sampler is None:
            return
        left = self._idle_started + idle_s - self.clock()
        if left > 0 and self._idle_sampler.alive:
            time.sleep(left)
        self._idle_sampler.stop()
        self._idle_sampler = None
        self.idle_w = {g: statistics.fmean(p) for g, p in self._idle.items() if p}

    def _read_idle(self) -> None:
        for g in self.gpus:
            power = self.reader.read(g).power_w
            if power is not None:
                self._idle[g].append(power)

    def use(self, gpus: list[int]) -> None:
        """Restrict sampling to the GPUs the trial turned out to use (before :meth:`start`)."""
        self.gpus = [g for g in self.gpus if g in gpus]
        if not self.gpus:
            raise GpuUnavailable("the trial's GPU is not among those NVML reports")

    # The Monitor protocol.
    def start(self) -> None:
        self.end_idle()
        self._sampler.start()
        self._sampler.sample_now()

    def _read(self) -> None:
        for g in self.gpus:
            before = self.clock()
            reading = self.reader.read(g)
            series = self.series[g]
            # The time goes last: window() takes len(times) and reads that many readings.
            series.readings.append(reading)
            series.times.append((before + self.clock()) / 2)

    def window(self, start: float, end: float, samples: int) -> dict[str, float]:
        self._sampler.sample_now()  # one sample after the window, so its end is bracketed
        self.windows.append(Window(len(self.windows) + 1, start, end))
        per_gpu = []
        for g in self.gpus:
            series = self.series[g]
            n = len(series.times)  # the sampler may append meanwhile: use a consistent prefix
            figures, method = gpu_window(series.times[:n], series.readings[:n], start, end)
            if figures:
                per_gpu.append(figures)
            if method:
                self.methods.append(method)
        if not per_gpu:
            return {}
        out: dict[str, float] = {}
        for key, combine in _COMBINE.items():
            values = [f[key] for f in per_gpu if key in f]
            if values:
                out[key] = combine(values)
        if metrics.ENERGY_J in out:
            out[metrics.POWER_W] = out[metrics.ENERGY_J] / (end - start)
            out[metrics.ENERGY_PER_SAMPLE_J] = out[metrics.ENERGY_J] / samples
        return out

    def stop(self, workdir: Path | None) -> Findings:
        report = Findings()
        if self._stopped:
            return report
        self._stopped = True
        if self._idle_sampler is not None:
            self._idle_sampler.stop()
        self._sampler.stop()
        self.reader.close()
        report.tags["gpu_telemetry"] = "nvml"
        if self._sampler.error:
            report.tags["gpu_telemetry"] = f"nvml (sampling stopped early: {self._sampler.error})"
        if self.methods:
            report.tags["energy_method"] = ",".join(sorted(set(self.methods)))
        if self.idle_w:
            report.summary[metrics.GPU_IDLE_POWER_W] = sum(self.idle_w.values())
            if len(self.idle_w) > 1:
                for g, watts in self.idle_w.items():
                    report.summary[metrics.GPU_IDLE.of(g)] = watts
        seen = 0
        for series in self.series.values():
            for r in series.readings:
                seen |= r.throttle_reasons or 0
        if seen & ~0x1:
            names = [name for bit, name in THROTTLE_REASONS.items() if seen & bit and bit != 0x1]
            report.tags["gpu_throttle_reasons"] = ",".join(names)
        if workdir is not None and any(s.times for s in self.series.values()):
            self._write_csv(workdir / SAMPLES_FILE)
            report.files.append(SAMPLES_FILE)
            self._plot(workdir / PLOT_FILE)
            report.files.append(PLOT_FILE)
        return report

    def _write_csv(self, path: Path) -> None:
        names = [f.name for f in fields(GpuReading)]
        rows: list[tuple[float, list[object]]] = []
        for g, series in self.series.items():
            for t, r in zip(series.times, series.readings, strict=True):
                values = [getattr(r, n) for n in names]
                row = [f"{t - self.origin:.4f}", epoch_of(t, self.windows), g]
                rows.append((t, row + ["" if v is None else v for v in values]))
        rows.sort(key=lambda pair: pair[0])
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["time_s", "epoch", "gpu", *names])
            writer.writerows(row for _, row in rows)

    def _plot(self, path: Path) -> None:
        from bench.trial.monitors.plot import Line, Panel, plot

        util: list[Line] = []
        power: list[Line] = []
        for g, series in self.series.items():
            label = f"GPU {g}" if len(self.series) > 1 else "GPU"
            counted = counter_power(series.times, series.readings)
            # NVML's power reading is a moving average (about 1 s on an H200) and trails
            # the counter: with a counter, both are drawn, and named for what they are.
            reading = "power (NVML reading, averaged)" if counted else "power"
            for lines, name, what in (
                (util, "sm_util_pct", "SM"),
                (util, "mem_util_pct", "memory"),
                (power, "power_w", reading),
            ):
                points = [
                    (t - self.origin, float(getattr(r, name)))
                    for t, r in zip(series.times, series.readings, strict=True)
                    if getattr(r, name) is not None
                ]
                if points:
                    lines.append(Line(f"{label} {what}", points))
            if counted:
                shifted = [(t - self.origin, w) for t, w in counted]
                power.append(Line(f"{label} power (from the energy counter)", shifted))
        panels = [Panel("utilization (%)", util), Panel("power (W)", power)]
        plot(path, "GPU telemetry", [p for p in panels if p.lines], self.windows, self.origin)


# Samples closer than this are not used to take power from the energy counter: the
# counter moves in steps (about 0.1 s on an H200), so a shorter difference is noise.
MIN_COUNTER_DT_S = 0.05


def counter_power(times: list[float], readings: list[GpuReading]) -> list[tuple[float, float]]:
    """Power (W) between successive energy-counter samples, at each interval's midpoint:
    what the GPU drew, where NVML's power reading is an average that trails it (seen on an
    H200: the reading took about 0.8 s to reach the 430 W the counter showed at once).
    [] without a counter."""
    out: list[tuple[float, float]] = []
    last: tuple[float, float] | None = None
    for t, r in zip(times, readings, strict=True):
        if r.energy_mj is None:
            continue
        if last is not None and t - last[0] >= MIN_COUNTER_DT_S:
            if r.energy_mj >= last[1]:  # a counter reset (driver reload) is skipped
                out.append(((t + last[0]) / 2, (r.energy_mj - last[1]) / 1e3 / (t - last[0])))
            last = (t, float(r.energy_mj))
        elif last is None:
            last = (t, float(r.energy_mj))
    return out


def gpu_window(
    times: list[float], readings: list[GpuReading], start: float, end: float
) -> tuple[dict[str, float], str]:
    """One GPU's figures over [start, end] from its samples, and the energy method used
    ("counter", "power_integration", or "" without any energy reading)."""
    if not times:
        return {}, ""
    out: dict[str, float] = {}
    method = ""
    span = _bracket(times, start, end)
    counter = [readings[i].energy_mj for i in span]
    if counter and all(e is not None for e in counter):
        t_e, e_mj = [times[i] for i in span], [float(e or 0) for e in counter]
        out[metrics.ENERGY_J] = (interpolate(t_e, e_mj, end) - interpolate(t_e, e_mj, start)) / 1e3
        method = "counter"
    else:  # no energy counter (before Volta): integrate the power samples
        t_p = [t for t, r in zip(times, readings, strict=True) if r.power_w is not None]
        p_w = [float(r.power_w) for r in readings if r.power_w is not None]
        if t_p:
            out[metrics.ENERGY_J] = integrate(t_p, p_w, start, end)
            method = "power_integration"
    chosen = [readings[i] for i in inside(times, start, end)]

    def values(name: str) -> list[float]:
        got = (getattr(r, name) for r in chosen)
        return [float(v) for v in got if v is not None]

    for key, name, reduce in (
        (metrics.GPU_UTIL_PCT, "sm_util_pct", statistics.fmean),
        (metrics.GPU_MEM_UTIL_PCT, "mem_util_pct", statistics.fmean),
        (metrics.GPU_MEM_MB, "mem_used_mb", max),
        (metrics.GPU_SM_CLOCK_MHZ, "sm_clock_mhz", statistics.fmean),
        (metrics.GPU_TEMP_C, "temp_c", max),
    ):
        got = values(name)
        if got:
            out[key] = reduce(got)
    reasons = [int(v) for v in values("throttle_reasons")]
    if reasons:
        out[metrics.GPU_THROTTLE_PCT] = (
            100.0 * sum(bool(r & SLOWDOWN) for r in reasons) / len(reasons)
        )
    return out, method


def _bracket(times: list[float], start: float, end: float) -> range:
    """Indices of the samples from the last one at or before ``start`` to the first one at or
    after ``end``: every sample an interpolation over [start, end] touches."""
    lo = max(bisect.bisect_right(times, start) - 1, 0)
    hi = min(bisect.bisect_left(times, end) + 1, len(times))
    return range(lo, hi)


_COMBINE: dict[str, Callable[[list[float]], float]] = {
    metrics.ENERGY_J: sum,
    metrics.GPU_UTIL_PCT: statistics.fmean,
    metrics.GPU_MEM_UTIL_PCT: statistics.fmean,
    metrics.GPU_MEM_MB: sum,
    metrics.GPU_SM_CLOCK_MHZ: statistics.fmean,
    metrics.GPU_TEMP_C: max,
    metrics.GPU_THROTTLE_PCT: max,
}
