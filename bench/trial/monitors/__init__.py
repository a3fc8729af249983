"""Telemetry: monitors that sample a trial from background threads.

One module per monitor (:mod:`~bench.trial.monitors.gpu`, :mod:`~bench.trial.monitors.cpu`)
behind the small :class:`~bench.trial.monitors.base.Monitor` protocol.  :class:`Telemetry` is what
:func:`bench.trial.loop.run_trial` drives, at these points only:

1. created when the trial starts: with a GPU requested or possible, NVML is opened and
   the GPUs' idle power is sampled in the background while the framework is imported;
2. :meth:`Telemetry.before_device_use`, just before the model is built on the device:
   idle sampling ends (waiting, if need be, until about a second of it exists);
3. :meth:`Telemetry.start` once the session exists (its device known), before warm-up;
4. :meth:`Telemetry.window` after each timed epoch's window has closed;
5. :meth:`Telemetry.stop` after the timed epochs, and again in ``run_trial``'s ``finally``
   (a no-op the second time), so a failing trial stops the samplers too.

Nothing runs on the trial's thread inside a timed window.  Without a GPU or NVML the GPU
figures are absent and the tag ``gpu_telemetry`` says why; nothing fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.trial.monitors.base import Findings, Monitor
from bench.trial.monitors.cpu import CpuMonitor
from bench.trial.monitors.gpu import GpuMonitor
from bench.trial.monitors.nvml import GpuReader, NvmlReader, cuda_index, visible_devices

__all__ = ["Monitor", "Findings", "Telemetry"]


class Telemetry:
    def __init__(
        self,
        cfg: BenchConfig,
        open_gpu: Callable[[], GpuReader] = NvmlReader,
        host: Callable[[float, float], Monitor] = CpuMonitor,
    ) -> None:
        self.origin = time.perf_counter()
        self.interval_s = cfg.telemetry.interval_s
        self.tags: dict[str, str] = {}
        self.monitors: list[Monitor] = []
        self.gpu: GpuMonitor | None = None
        self.visible: list[int] = []
        self.totals: dict[str, float] = {}
        self._host_factory = host
        self.one_process = cfg.distributed.runner == "local"
        # contention=off: other processes' share is still measured, never judged
        self.judged = self.one_process and cfg.contention != "off"
        self._stopped = False
        self.enabled = cfg.telemetry.enabled
        if not self.enabled:
            for key in ("gpu_telemetry", "rapl"):
                self.tags[key] = "unavailable: telemetry.enabled=false"
            return
        if cfg.device == "cpu":
            self.tags["gpu_telemetry"] = "unavailable: device=cpu"
            return
        reader: GpuReader | None = None
        try:
            reader = open_gpu()
            self.visible = reader.visible(visible_devices())
            self.gpu = GpuMonitor(reader, self.visible, self.interval_s, self.origin)
            self.gpu.begin_idle()
        except Exception as exc:  # noqa: BLE001 - no GPU telemetry is a tag, never a failure
            self.tags["gpu_telemetry"] = f"unavailable: {exc}"
            if reader is not None and self.gpu is None:
                reader.close()

    def before_device_use(self) -> None:
        if self.gpu is not None:
            self.gpu.end_idle()

    def start(self, device: str) -> None:
        """Start sampling the host and the GPU that ``device`` ("cpu", "cuda:0") names."""
        if not self.enabled:
            return
        if self.gpu is not None:
            index = cuda_index(device)
            try:
                if index is None:
                    raise ValueError(f"the trial ran on {device}")
                if index >= len(self.visible):
                    raise ValueError(f"{device} is not among the GPUs NVML reports")
                self.gpu.use([self.visible[index]])
                self.monitors.append(self.gpu)
            except Exception as exc:  # noqa: BLE001 - no GPU telemetry is a tag, never a failure
                self.gpu.stop(None)
                self.gpu = None
                self.tags["gpu_telemetry"] = f"unavailable: {exc}"
        host = self._host_factory(self.interval_s, self.origin)
        if isinstance(host, CpuMonitor):  # ranks of one trial are each other's "others"
            host.judge_contention = self.judged
        self.monitors.append(host)
        for monitor in self.monitors:
            monitor.start()

    def window(self, start: float, end: float, samples: int) -> dict[str, float]:
        """Every monitor's figures for the timed window [start, end] (perf_counter s)."""
        out: dict[str, float] = {}
        for monitor in self.monitors:
            out.update(monitor.window(start, end, samples))
        for key in (metrics.ENERGY_J, metrics.CPU_ENERGY_J):
            if key in out:
                self.totals[key] = self.totals.get(key, 0.0) + out[key]
        self.totals["samples"] = self.totals.get("samples", 0.0) + samples
        return out

    def stop(self, workdir: Path | None) -> Findings:
        """Stop every sampler, write the artifacts; idempotent (later calls report nothing)."""
        report = Findings()
        if self._stopped:
            return report
        self._stopped = True
        report.tags.update(self.tags)
        monitors = list(self.monitors)
        if self.gpu is not None and self.gpu not in monitors:
            monitors.append(self.gpu)  # still measuring idle power: the trial failed early
        for monitor in monitors:
            try:
                if workdir is not None:
                    workdir.mkdir(parents=True, exist_ok=True)
                got = monitor.stop(workdir)
            except Exception as exc:  # noqa: BLE001 - losing a plot must not lose the trial
                monitor.stop(None)
                report.tags["telemetry_error"] = f"{type(exc).__name__}: {exc}"
                continue
            report.summary.update(got.summary)
            report.tags.update(got.tags)
            report.files += got.files
        samples = self.totals.get("samples", 0.0)
        if metrics.ENERGY_J in self.totals:
            report.summary[metrics.TRIAL_ENERGY_J] = self.totals[metrics.ENERGY_J]
            report.summary[metrics.TRIAL_ENERGY_PER_SAMPLE_J] = (
                self.totals[metrics.ENERGY_J] / samples
            )
        if metrics.CPU_ENERGY_J in self.totals:
            report.summary[metrics.TRIAL_CPU_ENERGY_J] = self.totals[metrics.CPU_ENERGY_J]
        return report
