"""The sampled telemetry as MLflow system metrics (bench.tracking.system_metrics), from
sample files written as the monitors write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.tracking import system_metrics


def test_gpu_samples_become_per_gpu_system_metrics_one_point_per_second(tmp_path: Path) -> None:
    path = tmp_path / "telemetry_gpu.csv"
    lines = ["time_s,epoch,gpu,sm_util_pct,mem_util_pct,mem_used_mb,power_w,energy_mj,"
             "sm_clock_mhz,temp_c,throttle_reasons"]  # fmt: skip
    for k in range(25):  # 0.1 s apart, two GPUs; GPU 1 has no power reading
        t = k / 10
        lines.append(f"{t:.4f},,0,{50 + k},10,1000,{200 + k},,1400,60,0")
        lines.append(f"{t:.4f},,1,{k},10,500,,,1400,55,0")
    path.write_text("\n".join(lines) + "\n")
    points = system_metrics.points([path, tmp_path / "other.csv"], start_s=1000.0)
    util0 = [p for p in points if p[0] == "system/gpu_0_utilization_percentage"]
    assert [(v, ts, step) for _, v, ts, step in util0] == [
        (50.0, 1_000_000, 0), (60.0, 1_001_000, 1), (70.0, 1_002_000, 2)]  # fmt: skip
    assert {p[0] for p in points if p[0].startswith("system/gpu_1_")} == {
        "system/gpu_1_utilization_percentage", "system/gpu_1_memory_usage_megabytes",
        "system/gpu_1_memory_utilization_percentage", "system/gpu_1_temperature_celsius",
        "system/gpu_1_sm_clock_megahertz"}  # fmt: skip
    assert any(p[0] == "system/gpu_0_power_usage_watts" for p in points)


def test_host_samples_give_cpu_utilization_and_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(system_metrics.os, "cpu_count", lambda: 2)
    path = tmp_path / "telemetry_host.csv"
    rows = ["time_s,epoch,cpu_time_s,rss_mb"]
    rows += [f"{k:.4f},,{1.5 * k:.3f},{300 + k:.1f}" for k in range(4)]  # 1.5 cores busy
    path.write_text("\n".join(rows) + "\n")
    points = system_metrics.points([path], start_s=0.0)
    cpu = [v for key, v, _, _ in points if key == "system/cpu_utilization_percentage"]
    assert cpu == [75.0, 75.0, 75.0]
    rss = [v for key, v, _, _ in points if key == "system/process_memory_rss_megabytes"]
    assert rss == [300.0, 301.0, 302.0, 303.0]


def test_cpu_utilization_is_averaged_over_each_kept_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Samples 1 ms apart, CPU time in 10 ms ticks (as /proc gives it): a pair of them reads
    0 % or 500 %; each point is the average since the previous one kept, the last sample
    included, so a 0.25 s trial still has one true point."""
    monkeypatch.setattr(system_metrics.os, "cpu_count", lambda: 2)
    path = tmp_path / "telemetry_host.csv"
    rows = ["time_s,epoch,cpu_time_s,rss_mb"]
    for k in range(0, 2600, 10):  # every 10 ms for 2.6 s, 1 core busy: 1 tick per sample
        t = k / 1000
        rows += [f"{t:.4f},,{t:.2f},300", f"{t + 0.001:.4f},,{t:.2f},300"]
    path.write_text("\n".join(rows) + "\n")
    points = system_metrics.points([path], start_s=0.0)
    cpu = [(v, step) for key, v, _, step in points if key == "system/cpu_utilization_percentage"]
    assert [step for _, step in cpu] == [0, 1, 2]  # at 1.0 s, 2.0 s and the last sample
    assert all(abs(v - 50.0) < 1.0 for v, _ in cpu), cpu

    short = tmp_path / "short" / "telemetry_host.csv"
    short.parent.mkdir()
    short.write_text(
        "time_s,epoch,cpu_time_s,rss_mb\n0.0,,1.00,300\n0.001,,1.00,300\n0.25,,1.25,301\n"
    )
    cpu = [v for key, v, _, _ in system_metrics.points([short], 0.0) if "cpu_util" in key]
    assert cpu == [50.0]

    # Both cores busy, CPU time read a tick late at 1 s: capped at 100, not 101.
    busy = tmp_path / "busy" / "telemetry_host.csv"
    busy.parent.mkdir()
    busy.write_text("time_s,epoch,cpu_time_s,rss_mb\n0.0,,0.00,300\n1.0,,2.02,300\n1.2,,2.40,300\n")
    cpu = [v for key, v, _, _ in system_metrics.points([busy], 0.0) if "cpu_util" in key]
    assert cpu == [100.0]  # the last sample, 0.2 s after the point at 1 s, is too close
