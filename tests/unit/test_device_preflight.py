"""The device preflight (bench.checks.device): its decisions from scripted answers of
each framework (a GPU host cannot exist here), and the real probes on this host."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.checks import device as device_preflight
from bench.checks.device import Seen
from bench.core.config import BenchConfig, ConfigError, FrameworkConfig
from bench.sweep.jobs import check_all

# A GPU host where torch's wheel brings its CUDA libraries and TensorFlow's are missing.
ANSWERS = {
    "torch": Seen(1, "torch 2.13.0, CUDA 12.8 build; NVIDIA H100 80GB HBM3"),
    "tf": Seen(0, "TensorFlow 2.21.0, built for CUDA 12.5.1 but its CUDA libraries were not "
               "found or do not match the driver (install tensorflow[and-cuda])"),
    "mxnet": Seen(1, "MXNet 1.9.1, CUDA build"),
}  # fmt: skip


def cfg(framework: str, **kw: Any) -> BenchConfig:
    return dataclasses.replace(BenchConfig(framework=FrameworkConfig(framework)), **kw)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def probe(c: BenchConfig) -> Seen:
        calls.append(c.framework.name)
        return ANSWERS[c.framework.name]

    monkeypatch.setattr(device_preflight, "seen", probe)
    return calls


def test_frameworks_that_would_train_on_different_devices_are_refused(asked: list[str]) -> None:
    configs = [(f"framework={f}", cfg(f)) for f in ("torch", "tf", "torch")]
    with pytest.raises(ConfigError) as refused:
        check_all(configs)
    (problem,) = refused.value.problems
    print(problem)  # the message, for the closing note
    assert problem.startswith("device: with device=auto the compared frameworks would train")
    assert "torch on the GPU (1 GPU seen: torch 2.13.0, CUDA 12.8 build" in problem
    assert "tf on the CPU (0 GPUs seen: TensorFlow 2.21.0, built for CUDA" in problem
    assert "tensorflow[and-cuda]" in problem and "launcher.docker.gpus=all" in problem
    assert "device=cpu for all" in problem and "allow_mixed_devices=true" in problem
    assert sorted(asked) == ["tf", "torch"]  # each framework asked once


def test_allow_mixed_devices_lets_it_run_and_says_so(asked: list[str], capsys: Any) -> None:
    configs = [(f, cfg(f, allow_mixed_devices=True)) for f in ("torch", "tf")]
    check_all(configs)
    err = capsys.readouterr().err
    assert "allow_mixed_devices=true: with device=auto, torch on the GPU" in err
    assert "measures the device too" in err


def test_device_cuda_with_a_framework_that_sees_no_gpu_is_refused(asked: list[str]) -> None:
    with pytest.raises(ConfigError) as refused:
        check_all([("framework=tf", cfg("tf", device="cuda"))])
    (problem,) = refused.value.problems
    assert problem.startswith("device: device=cuda, but tf sees no GPU (TensorFlow 2.21.0")
    check_all([("framework=torch", cfg("torch", device="cuda"))])  # torch sees one


def test_what_is_not_compared_or_all_on_one_kind_passes(asked: list[str]) -> None:
    check_all([(f, cfg(f)) for f in ("torch", "mxnet")])  # both on the GPU
    check_all([("torch", cfg("torch")), ("tf", cfg("tf", device="cpu"))])  # two settings
    asked.clear()
    check_all([(f, cfg(f, device="cpu")) for f in ("torch", "tf", "mxnet")])
    assert asked == []  # device=cpu: nobody is asked


def test_a_slurm_sweep_is_not_probed_here(asked: list[str]) -> None:
    check_all([(f, cfg(f)) for f in ("torch", "tf")], slurm=True)
    assert asked == []


def test_the_docker_launcher_answers_from_the_image_variant() -> None:
    from bench.core.config import DockerConfig, LauncherConfig

    def docker(gpus: str) -> BenchConfig:
        return cfg("tf", launcher=LauncherConfig(name="docker", docker=DockerConfig(gpus=gpus)))

    assert device_preflight.seen(docker("all")).gpus == 1
    assert device_preflight.seen(docker("")).gpus == 0


def test_on_this_host_the_real_probes_answer_and_are_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each framework asked in its own interpreter (torch here; MXNet in .venv-mxnet); the
    second question is answered from the cache, without a child process."""
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    count, _ = device_preflight.host_gpus()
    answer = device_preflight.ask("torch")
    assert answer.detail.startswith("torch 2.") and answer.gpus == count
    (cached,) = (tmp_path / "devices").glob("*.json")
    assert (cached.stat().st_mode & 0o777, cached.parent.stat().st_mode & 0o777) == (0o600, 0o700)

    def no_child(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("asked again")

    monkeypatch.setattr(subprocess, "run", no_child)
    assert device_preflight.ask("torch") == answer
    cached.chmod(0o666)  # writable by others (a shared cache): not believed, asked again
    with pytest.raises(AssertionError, match="asked again"):
        device_preflight.ask("torch")
    cached.chmod(0o600)
    if count == 0:  # no GPU on the host: nobody is asked at all
        assert device_preflight.seen(cfg("tf")).detail.startswith("no NVIDIA GPU on this host")
