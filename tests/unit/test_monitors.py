"""Telemetry monitors, driven by recorded reading sequences (there is no GPU here).

The GPU path is the real :class:`~bench.trial.monitors.gpu.GpuMonitor` fed by a reader that replays
readings; NVML itself (``NvmlReader``) is only exercised for its absence.  The host monitor
reads this very process, and RAPL reads a powercap tree written into a temporary directory.
"""

from __future__ import annotations

import csv
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError
from bench.trial.monitors import Telemetry
from bench.trial.monitors.base import Sampler, integrate, interpolate
from bench.trial.monitors.cpu import CpuMonitor, ProcessTree, Rapl
from bench.trial.monitors.gpu import GpuMonitor, gpu_window
from bench.trial.monitors.nvml import GpuReading, GpuUnavailable, NvmlReader

POWER_W = 250.0


class LiveReader:
    """Replays a GPU drawing ``POWER_W``: its energy counter grows with the real clock, as
    NVML's does.  ``energy=False`` plays a GPU older than Volta (no counter)."""

    def __init__(self, energy: bool = True, fail_after: int | None = None) -> None:
        self.energy, self.fail_after = energy, fail_after
        self.t0 = time.perf_counter()
        self.reads = 0
        self.closed = False

    def visible(self, cuda_visible_devices: str | None) -> list[int]:
        return [0, 1]

    def read(self, index: int) -> GpuReading:
        self.reads += 1
        if self.fail_after is not None and self.reads > self.fail_after:
            raise RuntimeError("GPU has fallen off the bus")
        now = time.perf_counter() - self.t0
        return GpuReading(
            sm_util_pct=90.0,
            mem_util_pct=40.0,
            mem_used_mb=1000.0 + index,
            power_w=POWER_W,
            energy_mj=1e6 + POWER_W * now * 1e3 if self.energy else None,
            sm_clock_mhz=1400.0,
            temp_c=60.0 + index,
            throttle_reasons=0x4 if index else 0x0,
        )

    def close(self) -> None:
        self.closed = True


def telemetry_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("bench-telemetry")]


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# Window arithmetic on recorded sequences.


def test_interpolation_and_integration_over_a_window() -> None:
    times, counter = [0.0, 1.0, 2.0], [0.0, 10.0, 30.0]
    assert interpolate(times, counter, 0.5) == 5.0
    assert interpolate(times, counter, 1.5) == 20.0
    assert interpolate(times, counter, -1.0) == 0.0  # clamped to the sampled span
    assert interpolate(times, counter, 9.0) == 30.0
    # A constant 100 W over 1.5 s; a ramp from 0 to 200 W over 2 s.
    assert integrate(times, [100.0] * 3, 0.25, 1.75) == pytest.approx(150.0)
    assert integrate(times, [0.0, 100.0, 200.0], 0.0, 2.0) == pytest.approx(200.0)


def test_energy_is_the_counter_difference_over_the_window() -> None:
    # Samples every 0.1 s of a GPU whose counter (mJ) rises 300 J/s; power reads a stale 50 W
    # (NVML averages power over up to a second), which must not be used when a counter exists.
    times = [round(0.1 * k, 1) for k in range(30)]
    readings = [
        GpuReading(sm_util_pct=float(k), power_w=50.0, energy_mj=5e6 + 300e3 * t)
        for k, t in enumerate(times)
    ]
    figures, method = gpu_window(times, readings, start=0.55, end=2.05)
    assert method == "counter"
    assert figures["energy_j"] == pytest.approx(300 * 1.5)
    assert figures["gpu_util_pct"] == pytest.approx(sum(range(6, 21)) / 15)  # samples inside


def test_missing_energy_counter_falls_back_to_integrating_power() -> None:
    times = [0.0, 1.0, 2.0, 3.0]
    readings = [GpuReading(power_w=p, energy_mj=None) for p in (100.0, 100.0, 300.0, 300.0)]
    figures, method = gpu_window(times, readings, start=0.5, end=2.5)
    assert method == "power_integration"
    # 100 W for 0.5 s, a ramp 100 -> 300 W over 1 s, then 300 W for 0.5 s.
    assert figures["energy_j"] == pytest.approx(50 + 200 + 150)


def test_a_counter_lost_mid_window_is_not_half_used() -> None:
    times = [0.0, 1.0, 2.0]
    readings = [
        GpuReading(power_w=100.0, energy_mj=0.0),
        GpuReading(power_w=100.0, energy_mj=None),
        GpuReading(power_w=100.0, energy_mj=200e3),
    ]
    figures, method = gpu_window(times, readings, 0.0, 2.0)
    assert method == "power_integration" and figures["energy_j"] == pytest.approx(200.0)


def test_throttle_share_counts_slowdown_reasons_only() -> None:
    idle, power_cap, thermal = 0x1, 0x4, 0x40
    readings = [GpuReading(throttle_reasons=r) for r in (idle, power_cap, 0, thermal)]
    figures, _ = gpu_window([0.0, 1.0, 2.0, 3.0], readings, 0.0, 3.0)
    assert figures["gpu_throttle_pct"] == 50.0


# The GPU monitor with its sampler thread.


def run_epochs(monitor: GpuMonitor | CpuMonitor, windows: int, seconds: float) -> list[dict]:
    monitor.start()
    out = []
    for _ in range(windows):
        start = time.perf_counter()
        time.sleep(seconds)
        end = time.perf_counter()
        out.append(monitor.window(start, end, samples=100))
    return out


@pytest.mark.parametrize("energy", [True, False], ids=["counter", "no-counter"])
def test_gpu_monitor_measures_energy_per_epoch(tmp_path: Path, energy: bool) -> None:
    reader = LiveReader(energy=energy)
    monitor = GpuMonitor(reader, [0, 1], interval_s=0.02, origin=time.perf_counter())
    monitor.begin_idle()
    monitor.end_idle(idle_s=0.1)
    epochs = run_epochs(monitor, windows=2, seconds=0.3)
    report = monitor.stop(tmp_path)
    for figures in epochs:
        # Two GPUs at 250 W each; the window is ~0.3 s.
        assert figures["power_w"] == pytest.approx(2 * POWER_W, rel=0.05)
        assert figures["energy_per_sample_j"] == pytest.approx(figures["energy_j"] / 100)
        assert figures["gpu_util_pct"] == 90.0
        assert figures["gpu_mem_mb"] == 1000.0 + 1001.0
        assert figures["gpu_temp_c"] == 61.0
        assert figures["gpu_throttle_pct"] == 100.0  # GPU 1 is power capped throughout
    method = "counter" if energy else "power_integration"
    assert report.tags == {
        "gpu_telemetry": "nvml",
        "energy_method": method,
        "gpu_throttle_reasons": "sw_power_cap",
    }
    assert report.summary["gpu_idle_power_w"] == 2 * POWER_W
    assert report.summary["gpu0_idle_power_w"] == POWER_W
    assert reader.closed and not telemetry_threads()
    assert report.files == ["telemetry_gpu.csv", "telemetry_gpu.png"]
    with open(tmp_path / "telemetry_gpu.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["gpu"] for r in rows} == {"0", "1"}
    assert {r["epoch"] for r in rows} >= {"0", "1", "2"}
    assert (tmp_path / "telemetry_gpu.png").read_bytes()[:4] == b"\x89PNG"


def test_a_failing_reader_stops_sampling_but_not_the_trial(tmp_path: Path) -> None:
    monitor = GpuMonitor(LiveReader(fail_after=6), [0], interval_s=0.01, origin=0.0)
    epochs = run_epochs(monitor, windows=2, seconds=0.1)
    assert epochs[0]  # figures from the samples it had
    report = monitor.stop(tmp_path)
    assert report.tags["gpu_telemetry"] == (
        "nvml (sampling stopped early: RuntimeError: GPU has fallen off the bus)"
    )
    assert not telemetry_threads()


def test_sampler_stop_is_prompt_and_idempotent() -> None:
    calls: list[float] = []
    sampler = Sampler("bench-telemetry-test", lambda: calls.append(1.0), interval_s=30.0)
    sampler.start()
    sampler.sample_now()
    assert len(calls) >= 2  # the first read, then one on request without waiting 30 s
    started = time.perf_counter()
    sampler.stop()
    sampler.stop()
    assert time.perf_counter() - started < 1.0 and not sampler.alive


# NVML absent, and which GPU a trial uses.


def test_nvml_absent_is_a_tag_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = BenchConfig()
    # This machine has nvidia-ml-py but no NVIDIA driver: the real reader cannot start.
    try:
        NvmlReader().close()
        pytest.skip("NVML works here")
    except GpuUnavailable:
        pass
    telemetry = Telemetry(cfg)
    assert telemetry.tags["gpu_telemetry"].startswith("unavailable: NVML did not start")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # the package not installed at all
    telemetry = Telemetry(cfg)
    assert telemetry.tags["gpu_telemetry"].startswith(
        "unavailable: nvidia-ml-py (pynvml) is not installed"
    )
    telemetry.start("cpu")
    telemetry.stop(None)
    assert not telemetry_threads()


def test_telemetry_samples_only_the_trials_gpu(tmp_path: Path) -> None:
    reader = LiveReader()
    telemetry = Telemetry(BenchConfig(), open_gpu=lambda: reader)
    telemetry.before_device_use()
    telemetry.start("cuda:1")
    start = time.perf_counter()
    time.sleep(0.25)
    figures = telemetry.window(start, time.perf_counter(), samples=10)
    report = telemetry.stop(tmp_path)
    assert figures["gpu_temp_c"] == 61.0  # GPU 1's reading, not GPU 0's
    assert figures["power_w"] == pytest.approx(POWER_W, rel=0.1)
    assert "cpu_util_pct" in figures and "host_rss_mb" in figures
    assert report.summary["trial_energy_j"] == pytest.approx(figures["energy_j"])
    assert report.summary["trial_energy_per_sample_j"] == pytest.approx(figures["energy_j"] / 10)
    assert set(report.files) == {
        "telemetry_gpu.csv",
        "telemetry_gpu.png",
        "telemetry_host.csv",
        "telemetry_host.png",
    }
    assert telemetry.stop(tmp_path).files == []  # stopped once


def test_a_cpu_trial_drops_the_gpu_monitor() -> None:
    reader = LiveReader()
    telemetry = Telemetry(BenchConfig(), open_gpu=lambda: reader)
    telemetry.before_device_use()
    telemetry.start("cpu")
    report = telemetry.stop(None)
    assert report.tags["gpu_telemetry"] == "unavailable: the trial ran on cpu"
    assert reader.closed and not telemetry_threads()


def test_disabled_telemetry_samples_nothing() -> None:
    cfg = BenchConfig()
    cfg.telemetry.enabled = False
    opened: list[bool] = []

    def open_gpu() -> LiveReader:
        opened.append(True)
        return LiveReader()

    telemetry = Telemetry(cfg, open_gpu=open_gpu)
    telemetry.start("cuda:0")
    assert telemetry.window(0.0, 1.0, 1) == {} and not telemetry_threads() and not opened
    assert telemetry.stop(None).tags["gpu_telemetry"] == "unavailable: telemetry.enabled=false"


# Host: the process tree and RAPL.


def test_cpu_utilization_follows_the_process_tree(tmp_path: Path) -> None:
    monitor = CpuMonitor(
        0.02, time.perf_counter(), tree=ProcessTree(), rapl="not here", judge_contention=False
    )
    monitor.start()
    figures, expected = [], []
    for work in (busy, time.sleep):
        for _ in range(10):  # a busy window in which this process got a CPU to be busy on
            cpu, start = time.process_time(), time.perf_counter()
            work(0.5)
            end = time.perf_counter()
            # What this process really used (a shared machine may lend it less than a core).
            used = 100 * (time.process_time() - cpu) / (end - start)
            if work is time.sleep or used > 20:
                break
        expected.append(used)
        figures.append(monitor.window(start, end, samples=1))
    report = monitor.stop(tmp_path)
    # /proc counts CPU time in 10 ms ticks: allow a few over a 0.5 s window.
    for got, want in zip(figures, expected, strict=True):
        assert got["cpu_util_pct"] == pytest.approx(want, abs=10)
    assert figures[0]["cpu_util_pct"] > figures[1]["cpu_util_pct"] + 5
    assert figures[0]["host_rss_mb"] > 10
    assert report.tags == {"rapl": "unavailable: not here"}
    assert report.files == ["telemetry_host.csv", "telemetry_host.png"]
    assert not telemetry_threads()


def test_cpu_utilization_includes_child_processes() -> None:
    import subprocess

    import psutil

    code = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        monitor = CpuMonitor(0.02, time.perf_counter(), tree=ProcessTree(), rapl="not here")
        monitor.start()
        watched = psutil.Process(child.pid)
        # A window in which the child ran: on a machine loaded by others it may get no CPU
        # for a while, and such a window checks nothing (up to 10 windows are taken).
        for _ in range(10):
            before, start = sum(watched.cpu_times()[:2]), time.perf_counter()
            time.sleep(0.6)  # this process rests; its child works
            end = time.perf_counter()
            used = 100 * (sum(watched.cpu_times()[:2]) - before) / (end - start)
            if used > 5:
                break
        figures = monitor.window(start, end, samples=1)
        monitor.stop(None)
    finally:
        child.kill()
        child.wait()
    assert used > 5  # the child really ran
    assert figures["cpu_util_pct"] == pytest.approx(used, abs=10)


def write_rapl(root: Path, package: int, energy_uj: int, max_uj: int = 1000) -> None:
    domain = root / f"intel-rapl:{package}"
    (domain / f"intel-rapl:{package}:0").mkdir(parents=True, exist_ok=True)  # a sub-zone
    (domain / "energy_uj").write_text(f"{energy_uj}\n")
    (domain / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (domain / f"intel-rapl:{package}:0" / "energy_uj").write_text("999999\n")


def test_rapl_sums_packages_across_counter_wraparound(tmp_path: Path) -> None:
    write_rapl(tmp_path, 0, 900)
    write_rapl(tmp_path, 1, 100)
    rapl = Rapl.open(tmp_path)
    assert isinstance(rapl, Rapl) and len(rapl.domains) == 2  # sub-zones are not counted
    write_rapl(tmp_path, 0, 950)  # +50
    write_rapl(tmp_path, 1, 300)  # +200
    assert rapl.read_j() == pytest.approx(250e-6)
    write_rapl(tmp_path, 0, 30)  # wrapped at 1000: +81 (950 -> 1000 -> 0 -> 30)
    write_rapl(tmp_path, 1, 300)
    assert rapl.read_j() == pytest.approx(331e-6)


def test_rapl_unavailable_says_why(tmp_path: Path) -> None:
    assert Rapl.open(tmp_path / "absent") == (
        f"no {tmp_path / 'absent'} (inside a container, or no RAPL driver)"
    )
    assert "no intel-rapl:N package domain" in str(Rapl.open(tmp_path))
    (tmp_path / "intel-rapl:0").mkdir()
    assert "cannot read" in str(Rapl.open(tmp_path))


def test_rapl_energy_per_epoch(tmp_path: Path) -> None:
    # A package that uses 40 W: a reader thread advances the counter with the real clock.
    write_rapl(tmp_path, 0, 0, max_uj=2**40)
    t0 = time.perf_counter()
    rapl = Rapl.open(tmp_path)
    assert isinstance(rapl, Rapl)
    read: Callable[[], float] = rapl.read_j

    def read_at_40_w() -> float:
        write_rapl(tmp_path, 0, int(40e6 * (time.perf_counter() - t0)), max_uj=2**40)
        return read()

    rapl.read_j = read_at_40_w  # type: ignore[method-assign]
    monitor = CpuMonitor(0.02, t0, tree=ProcessTree(), rapl=rapl, judge_contention=False)
    (figures,) = run_epochs(monitor, windows=1, seconds=0.3)
    assert figures["cpu_power_w"] == pytest.approx(40, rel=0.1)
    assert monitor.stop(None).tags == {"rapl": "available"}


# Configuration.


def test_interval_is_validated_with_its_field() -> None:
    cfg = BenchConfig()
    cfg.telemetry.interval_s = 0
    with pytest.raises(ConfigError, match=r"^telemetry\.interval_s: must be between 0\.01 and 60"):
        validate(cfg)


# A real trial that fails.


def test_a_failing_trial_stops_its_samplers(tmp_path: Path) -> None:
    from bench.core.result import EpochRecord
    from bench.trial.loop import run_trial

    cfg = BenchConfig(batch_size=2, epochs=3, steps_per_epoch=20, warmup_steps=1, threads=1)
    cfg.model.name = "lenet5"
    cfg.telemetry.interval_s = 0.01
    seen: list[EpochRecord] = []

    def fail(record: EpochRecord) -> None:
        seen.append(record)
        raise RuntimeError("the trial fails after its first epoch")

    result = run_trial(cfg, fail, workdir=tmp_path)
    assert result.status == "error" and "fails after its first epoch" in result.error
    assert not telemetry_threads()
    assert {"cpu_util_pct", "host_rss_mb"} <= set(seen[0].extra)
    assert result.environment["gpu_telemetry"].startswith("unavailable: ")
    assert "telemetry_host.csv" in result.files
    with open(tmp_path / "telemetry_host.csv") as f:
        epochs = {row["epoch"] for row in csv.DictReader(f)}
    assert "2" not in epochs  # sampling ended with the failure in epoch 1


def _replayed_h200() -> tuple[list[float], list[GpuReading]]:
    """A ResNet-50 bf16 training trial's GPU samples as an H200 gave them (gpu_check's run on
    the lent machine, 0.1 s apart): the energy counter and NVML's averaged power reading."""
    path = Path(__file__).resolve().parents[1] / "data" / "h200_resnet50_bf16_telemetry_gpu.csv"
    with open(path) as f:
        rows = list(csv.DictReader(f))
    times = [float(r["time_s"]) for r in rows]
    readings = [
        GpuReading(sm_util_pct=float(r["sm_util_pct"]), mem_util_pct=float(r["mem_util_pct"]),
                   power_w=float(r["power_w"]),
                   energy_mj=float(r["energy_mj"]))
        for r in rows
    ]  # fmt: skip
    return times, readings


def test_power_from_the_energy_counter_leads_the_averaged_reading_on_an_h200() -> None:
    from bench.trial.monitors.gpu import counter_power

    times, readings = _replayed_h200()
    counted = dict(counter_power(times, readings))
    # The work starts at about 7.45 s: the counter shows 430 W from the next interval, the
    # averaged reading is still under 300 W 0.4 s later.
    at_once = [w for t, w in counted.items() if 7.55 < t < 7.9]
    assert at_once and min(at_once) > 400
    later = min(range(len(times)), key=lambda i: abs(times[i] - 7.92))
    assert readings[later].power_w is not None and readings[later].power_w < 300
    # Samples closer than MIN_COUNTER_DT_S (an epoch's edge sampled twice) give no point.
    assert all(w > 0 for w in counted.values()) and len(counted) < len(times) - 1
    # The epochs' figures come from the counter: both windows about 425 W.
    (first, method), (second, _) = (
        gpu_window(times, readings, 7.72, 9.0),
        gpu_window(times, readings, 9.05, 10.33),
    )
    power = [first["energy_j"] / (9.0 - 7.72), second["energy_j"] / (10.33 - 9.05)]
    assert method == "counter" and power[0] == pytest.approx(power[1], rel=0.03)
    assert 410 < power[0] < 445


def test_the_gpu_plot_draws_the_counters_power_beside_the_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.trial.monitors import plot as plot_mod

    drawn: list[list[str]] = []
    monkeypatch.setattr(
        plot_mod, "plot", lambda path, title, panels, windows, origin: drawn.append(
            [line.label for panel in panels for line in panel.lines])
    )  # fmt: skip
    times, readings = _replayed_h200()
    monitor = GpuMonitor(LiveReader(), [0], interval_s=0.1, origin=0.0)
    monitor.series[0].times[:] = times
    monitor.series[0].readings[:] = readings
    monitor._plot(tmp_path / "telemetry_gpu.png")
    assert drawn == [["GPU SM", "GPU memory", "GPU power (NVML reading, averaged)",
                      "GPU power (from the energy counter)"]]  # fmt: skip
