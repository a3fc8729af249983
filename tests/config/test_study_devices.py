"""A study whose paper names its hardware names its device in every cell (issue 52, item 2):
``device: auto`` would run seed003's CPU-cluster study on CUDA with NCCL wherever a Slurm
node has a GPU.  Composition only: each preset's sweep is composed once per scale and each
job's device read from its overrides (a grid block's ``device``), else from the scale's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR
from bench.sweep.jobs import pairs
from tests.sweeper_fixture import sweeper_jobs as jobs_of

PRESETS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("seed*.yaml"))
# Which scales must name the device: every paper scale, and the machine and smoke scales of
# the studies whose paper names its hardware (001: RTX 2080 Ti and one CPU core, section V;
# 003: three 4-vCPU Intel VMs, IV-A; 004: a Tesla T4 and 2 A100s, Experimental Setup).
# 000's abstract says "single GPU" and names none: its machine and smoke scales compare the
# frameworks on the device there is (their headers say so).
NAMES_ITS_HARDWARE = {
    "seed000_single_gpu": ("paper",),
    "seed001_frameworks": ("paper", "machine", "smoke"),
    "seed003_distributed_cpu": ("paper", "machine", "smoke"),
    "seed004_cifar10_strategies": ("paper", "machine", "smoke"),
}


def _compose(overrides: list[str]) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def devices(preset: str, scale: str) -> dict[str, str]:
    """Each job's device (its label without the repeat -> device)."""
    cfg = _compose([f"+experiment={preset}", f"scale={scale}"])
    found = {}
    for job in jobs_of(cfg):
        given = pairs(job)
        label = " ".join(f"{k}={v}" for k, v in given.items() if k != "repeat")
        found[label] = str(given.get("device", cfg.device))
    return found


def test_every_seed_preset_is_listed() -> None:
    assert sorted(NAMES_ITS_HARDWARE) == PRESETS


@pytest.mark.parametrize(
    ("preset", "scale"), [(p, s) for p, scales in NAMES_ITS_HARDWARE.items() for s in scales]
)
def test_no_cell_of_a_study_that_names_its_hardware_runs_on_device_auto(
    preset: str, scale: str
) -> None:
    found = devices(preset, scale)
    assert found, f"{preset} scale={scale}: no job composed"
    auto = [label for label, device in found.items() if device == "auto"]
    assert not auto, f"{preset} scale={scale}: device=auto in {len(auto)} cell(s): {auto[:3]}"


def test_seed003_runs_on_the_cpu_at_every_scale() -> None:
    for scale in ("paper", "machine", "smoke"):
        assert set(devices("seed003_distributed_cpu", scale).values()) == {"cpu"}, scale


def test_the_check_sees_a_cell_left_on_auto() -> None:
    """The test above can fail: a block without ``device`` inherits the scale's (auto)."""
    found = devices("seed000_single_gpu", "machine")  # the one scale left on auto
    assert set(found.values()) == {"auto"}
