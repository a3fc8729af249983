"""GPU readiness without a GPU: set-up's choice of variant from a scripted nvidia-smi, and
scripts/gpu_check.py's table from scripted trials (its CPU-host behaviour runs for real in
tests/e2e/test_gpu_check.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gpu_check  # noqa: E402


def plan(tmp_path: Path, nvidia_smi: str | None, **env: str) -> subprocess.CompletedProcess[str]:
    """scripts/setup.sh's choice (BENCH_SETUP_PLAN=1: nothing installed), with ``nvidia_smi``
    as the body of a fake nvidia-smi first on PATH (None: one that fails, as without a
    driver)."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    script = fake / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + (nvidia_smi if nvidia_smi is not None else "exit 9\n"))
    script.chmod(0o755)
    path = f"{fake}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=REPO, capture_output=True, text=True,
        env=dict(os.environ, PATH=path, BENCH_SETUP_PLAN="1", **env),
    )  # fmt: skip


def test_set_up_takes_the_cuda_variant_where_nvidia_smi_lists_a_gpu(tmp_path: Path) -> None:
    done = plan(tmp_path, 'echo "NVIDIA H100 80GB HBM3, 570.86.15"\n')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "variant=cuda lock=requirements-cuda.lock"
    assert "nvidia-smi lists 1 GPU(s): NVIDIA H100 80GB HBM3" in done.stderr


def test_set_up_keeps_the_cpu_variant_without_a_driver(tmp_path: Path) -> None:
    done = plan(tmp_path, None)
    assert done.stdout.strip() == "variant=cpu lock=requirements.lock"
    assert "no NVIDIA driver answers" in done.stderr
    forced = plan(tmp_path, None, BENCH_VARIANT="cuda")
    assert forced.stdout.strip() == "variant=cuda lock=requirements-cuda.lock"
    bad = plan(tmp_path, None, BENCH_VARIANT="rocm")
    assert bad.returncode == 2 and "BENCH_VARIANT: cpu or cuda" in bad.stderr


def _lock(name: str) -> dict[str, str]:
    """``name: version`` of a generated host lock; every requirement carries its hashes."""
    lines = (REPO / name).read_text().splitlines()
    pins = {}
    for i, line in enumerate(lines):
        if "==" in line and not line.startswith((" ", "#")):
            assert line.endswith(" \\") and lines[i + 1].strip().startswith("--hash=sha256:"), line
            package, version = line.split(" ")[0].split("==")
            pins[package.split("[")[0]] = version
    return pins


def test_the_cuda_lock_has_torchs_cuda_build_and_tensorflows_cuda_libraries() -> None:
    cpu, cuda = _lock("requirements.lock"), _lock("requirements-cuda.lock")
    assert cpu["torch"] == "2.13.0+cpu" and cuda["torch"] == "2.13.0"
    assert cpu["tensorflow"] == cuda["tensorflow"] == "2.21.0"
    assert "nvidia-cudnn-cu12" in cuda  # tensorflow[and-cuda]
    assert not [name for name in cpu if name.startswith("nvidia-cu")]  # no CUDA libraries
    shared = {k for k in cpu if k in cuda and not k.startswith("torch")}
    assert {k: (cpu[k], cuda[k]) for k in shared if cpu[k] != cuda[k]} == {}


def test_on_a_gpu_host_each_path_is_ok_failed_or_skipped_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One GPU: the 2-GPU paths are skipped; a trial with another status than the path
    expects is failed with its error; the telemetry row checks energy and power."""
    ran: list[list[str]] = []

    def bench(overrides: list[str], where: Path, timeout: float) -> Any:
        ran.append(overrides)
        return subprocess.CompletedProcess([], 0, "", "")

    def trial(where: Path) -> tuple[str, dict[str, Any], str]:
        last = ran[-1]
        if "precision=fp16" in last and "framework=tf" in last:
            return "error", {}, "ValueError: a scripted failure"
        if "batch_size=16384" in last:
            return "oom", {}, "CUDA out of memory"
        return "ok", {"trial_samples_per_s": 1234.0, "energy_j": 900.0, "power_w": 300.0,
                      "gpu_util_pct": 97.0}, ""  # fmt: skip

    monkeypatch.setattr(gpu_check, "_bench", bench)
    monkeypatch.setattr(gpu_check, "_trial", trial)
    monkeypatch.setattr(gpu_check, "_power_limit_w", lambda: 700.0)
    monkeypatch.setattr(gpu_check, "_installed", lambda module: lambda: "")
    for p in gpu_check.PATHS:
        scripted = [lambda: "no Docker engine reachable (scripted)"] if p.needs else []
        monkeypatch.setattr(p, "needs", scripted)
    rows = {name: (outcome, figure) for name, outcome, figure in gpu_check.check_gpu_host(1, 60)}
    assert rows["torch training on cuda"][0] == "ok"
    assert rows["torch training on cuda"][1].startswith("1,234 samples/s")
    assert rows["dp on 2 GPUs"][0] == "skipped (needs 2 GPUs, 1 here)"
    assert rows["fp16 (tf)"] == ("failed", "status error: ValueError: a scripted failure")
    assert rows["OOM frontier (a real GPU OOM)"][0] == "ok"
    assert rows["NVML utilization, power, energy"][1].startswith("util 97%, 300 W (limit 700")
    assert rows["Horovod with NCCL"][0] == "skipped (needs 2 GPUs, 1 here)"
    docker = rows["launcher=docker, gpus=all (CUDA image)"]
    assert docker[0] == "skipped (no Docker engine reachable (scripted))"
    table = gpu_check.table([[n, *v] for n, v in rows.items()], ["path", "outcome", "figure"])
    assert table.splitlines()[0].split() == ["path", "outcome", "figure"]


def test_energy_missing_or_power_beyond_the_limit_fails_the_telemetry_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpu_check, "_power_limit_w", lambda: 300.0)
    with pytest.raises(AssertionError, match="energy_j missing"):
        gpu_check._telemetry({"power_w": 100.0})
    with pytest.raises(AssertionError, match="power_w 500.0 outside"):
        gpu_check._telemetry({"power_w": 500.0, "energy_j": 10.0})
