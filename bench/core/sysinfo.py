"""What a result ran on: host, GPU driver and source revision, read without any framework."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def host_environment() -> dict[str, str]:
    return {
        "python_version": platform.python_version(),
        "os": platform.platform(),
        "cpu_model": cpu_model(),
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_environment() -> dict[str, str]:
    """GPU names and the driver version from NVML; empty without a GPU or NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver or no device
        return {}
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [
            pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)
        ]
        return {
            "gpu_driver": str(pynvml.nvmlSystemGetDriverVersion()),
            "gpu_count": str(count),
            "gpu_names": ", ".join(str(n) for n in names),
        }
    finally:
        pynvml.nvmlShutdown()


def git_environment() -> dict[str, str]:
    """The commit of the bench checkout and whether it has uncommitted changes."""
    root = Path(__file__).resolve().parents[2]  # the checkout: bench/core/sysinfo.py

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit, "git_dirty": str(dirty).lower()}


def slurm_environment() -> dict[str, str]:
    """The Slurm job this process runs in (job id, node list, partition); empty outside one."""
    names = {
        "SLURM_JOB_ID": "slurm_job_id",
        "SLURM_JOB_NODELIST": "slurm_nodelist",
        "SLURM_JOB_PARTITION": "slurm_partition",
    }
    return {key: os.environ[var] for var, key in names.items() if os.environ.get(var)}
