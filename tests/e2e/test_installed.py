"""bench as an installed tool: a wheel built from the checkout carries its configs, image
definitions and set-up scripts, and its `bench` command runs trials from another directory
(the checkout out of sight: the wheel's own bench comes first on the path), MXNet's among
them, in an environment made on first use in bench's cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_a_built_wheel_runs_from_another_directory(tmp_path: Path) -> None:
    source = tmp_path / "source"
    for name in ("bench", "conf", "docker", "hydra_plugins", "patches", "scripts"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
                    str(source)], check=True, cwd=tmp_path)  # fmt: skip
    (wheel,) = tmp_path.glob("bench-*.whl")
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    assert (site / "bench" / "_data" / "conf" / "config.yaml").is_file()
    assert (site / "bench" / "_data" / "docker" / "torch.Dockerfile").is_file()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert (site / "bench" / "_data" / "scripts" / "setup_mxnet.sh").is_file()
    assert (site / "bench" / "_data" / "patches" / "horovod-0.28.1.patch").is_file()
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(site), BENCH_CACHE=str(cache))
    env.pop("BENCH_MXNET_PYTHON", None)
    command = [str(site / "bin" / "bench")]
    shown = subprocess.run([*command, "--help"], capture_output=True, text=True, env=env,
                           cwd=elsewhere)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("bench: a benchmark matrix")
    done = subprocess.run(
        [*command, "model=lenet5", "epochs=1", "steps_per_epoch=2", "warmup_steps=1",
         f"tracking.uri=sqlite:///{elsewhere}/mlflow.db"],
        capture_output=True, text=True, env=env, cwd=elsewhere, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 trial: 1 ok" in done.stdout
    where = subprocess.run(
        [sys.executable, "-c", "import bench.core.paths as p; print(p.data('conf'))"],
        capture_output=True, text=True, env=env, cwd=elsewhere,
    )  # fmt: skip
    assert where.stdout.strip() == str(site / "bench" / "_data" / "conf")

    # MXNet's own environment: made by the first MXNet trial, in the cache, not the checkout.
    mxnet = subprocess.run(
        [*command, "framework=mxnet", "model=lenet5", "epochs=1", "steps_per_epoch=2",
         "warmup_steps=1", f"tracking.uri=sqlite:///{elsewhere}/mlflow.db"],
        capture_output=True, text=True, env=env, cwd=elsewhere, timeout=900,
    )  # fmt: skip
    assert mxnet.returncode == 0, mxnet.stdout + mxnet.stderr
    assert "making MXNet's own environment (first use" in mxnet.stderr
    assert "1 trial: 1 ok" in mxnet.stdout
    assert (cache / "mxnet" / "venv" / "bin" / "python").exists()
    assert (cache / "source" / "bench").resolve() == site / "bench"
    again = subprocess.run([*command, "setup", "mxnet"], capture_output=True, text=True,
                           env=env, cwd=elsewhere, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "bench setup: mxnet ready"
    assert "installing" not in again.stderr  # current: nothing to do
    wrong = subprocess.run([*command, "setup", "mxnt"], capture_output=True, text=True,
                           env=env, cwd=elsewhere)  # fmt: skip
    assert wrong.returncode == 2
    assert "invalid choice: 'mxnt'" in wrong.stderr and "horovod" in wrong.stderr
