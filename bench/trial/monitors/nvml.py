"""NVML, read through a narrow protocol: :class:`GpuReader` (which GPUs the trial sees,
one reading of one GPU), :class:`NvmlReader` the real one (``nvidia-ml-py``, imported as
``pynvml``), so that the GPU monitor (:mod:`.gpu`) runs the same with recorded readings."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# NVML clock-event ("throttle") reason bits, named for the tag; those in SLOWDOWN slow a busy GPU.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}
SLOWDOWN = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


class GpuUnavailable(Exception):
    """No GPU telemetry: the message says why (no NVML library, no driver, no device...)."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU's state at one moment; None where the GPU does not support a reading."""

    sm_util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_mb: float | None = None
    power_w: float | None = None
    energy_mj: float | None = None  # NVML's total-energy counter, mJ since the driver loaded
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    throttle_reasons: int | None = None


class GpuReader(Protocol):
    def visible(self, cuda_visible_devices: str | None) -> list[int]:
        """NVML indices of the GPUs this process sees, in CUDA's order."""

    def read(self, index: int) -> GpuReading:
        """The current readings of the GPU with NVML index ``index``."""

    def close(self) -> None: ...


class NvmlReader:
    """The real :class:`GpuReader`.  Raises :class:`GpuUnavailable` if NVML cannot start."""

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError as exc:
            raise GpuUnavailable(f"nvidia-ml-py (pynvml) is not installed: {exc}") from exc
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise GpuUnavailable(f"NVML did not start: {exc}") from exc
        self.nvml: Any = pynvml
        self._handles: dict[int, Any] = {}

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self.nvml.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def visible(self, cuda_visible_devices: str | None) -> list[int]:
        count = int(self.nvml.nvmlDeviceGetCount())
        if cuda_visible_devices is None:
            # CUDA's default order is fastest first; NVML's is PCI bus order.  They agree on
            # machines with one GPU model, which is what bench's trials use; set
            # CUDA_DEVICE_ORDER=PCI_BUS_ID to make them agree everywhere.
            return list(range(count))
        uuids = {i: str(self.nvml.nvmlDeviceGetUUID(self._handle(i))) for i in range(count)}
        out: list[int] = []
        for item in (s.strip() for s in cuda_visible_devices.split(",")):
            if item.isdigit() and int(item) < count:
                out.append(int(item))
            elif item.startswith("GPU-"):
                match = [i for i, u in uuids.items() if u.startswith(item)]
                if len(match) != 1:
                    break
                out.append(match[0])
            elif item.startswith("MIG-"):
                raise GpuUnavailable("MIG instances are not sampled (NVML reports per GPU)")
            else:
                break  # CUDA ignores everything from the first invalid entry on
        return out

    def read(self, index: int) -> GpuReading:
        nvml, handle = self.nvml, self._handle(index)

        def get(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except (
                nvml.NVMLError_NotSupported,
                nvml.NVMLError_FunctionNotFound,
                nvml.NVMLError_NoPermission,  # e.g. energy or clocks on some virtual GPUs
            ):
                return None

        util = get(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        memory = get(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        power = get(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        energy = get(lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        reasons = get(lambda: _clock_event_reasons(nvml)(handle))
        return GpuReading(
            sm_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            mem_used_mb=None if memory is None else memory.used / 2**20,
            power_w=None if power is None else power / 1000.0,
            energy_mj=None if energy is None else float(energy),
            sm_clock_mhz=_float(
                get(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            ),
            temp_c=_float(
                get(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
            ),
            throttle_reasons=None if reasons is None else int(reasons),
        )

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass


def _clock_event_reasons(nvml: Any) -> Any:
    # Renamed from ...ClocksThrottleReasons in recent NVML; older bindings have only that.
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def cuda_index(device: str) -> int | None:
    """The CUDA ordinal of a trial's device string ("cuda:1" -> 1); None if not a GPU."""
    if not device.startswith("cuda"):
        return None
    _, _, index = device.partition(":")
    return int(index) if index.isdigit() else 0


def visible_devices() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")
