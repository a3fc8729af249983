"""scripts/gpu_check.sh on this host, for real: without a GPU it says so and checks that
every GPU-only setting is refused before any trial (exit 2, no store), exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.checks.device import host_gpus

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(host_gpus()[0] > 0, reason="a GPU host runs the GPU paths instead")
def test_on_a_host_without_a_gpu_every_gpu_only_setting_is_refused() -> None:
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no GPU visible here" in done.stdout
    rows = [ln.split("  ")[0] for ln in done.stdout.splitlines() if "  refused  " in ln]
    assert rows == ["device=cuda", "precision=fp16", "precision=tf32", "distributed=dp",
                    "model_parallel (torch)", "launcher.docker.gpus=all"]  # fmt: skip
