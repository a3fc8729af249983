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


def _run(status: str = "ok", **params: str) -> gpu_check.Run:
    p = {"model.name": "resnet50", "image_size": "224", "mode": "train", "precision": "fp32",
         "batch_size": "64", **params}  # fmt: skip
    metrics = {"trial_samples_per_s": 821.0, "mfu_pct": 39.4, "peak_flops_per_s": 51e12,
               "power_w": 556.0, "energy_j": 900.0, "trial_energy_per_sample_j": 0.67,
               "gpu_util_pct": 97.0, "gpu_idle_power_w": 81.0, "gpu_mem_mb": 13_000.0}  # fmt: skip
    tags = {"bench.error": "torch.OutOfMemoryError: CUDA out of memory"} if status != "ok" else {}
    return gpu_check.Run(status, p, metrics if status == "ok" else {}, tags)


class Scripted:
    """``Check.bench`` answered from a script: the runs each experiment would record."""

    def __init__(self, answers: dict[str, list[gpu_check.Run]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, list[str], bool]] = []

    def __call__(self, experiment: str, overrides: list[str], sweep: bool = False) -> Any:
        self.asked.append((experiment, overrides, sweep))
        if experiment not in self.answers:
            raise RuntimeError("bench: scripted failure")
        return self.answers[experiment]


def _check(tmp_path: Path, answers: dict[str, list[gpu_check.Run]], budget: float = 600) -> Any:
    check = gpu_check.Check(tmp_path, tmp_path / "out", budget, 60, "gpu", gpus=1)
    (tmp_path / "out").mkdir()
    scripted = Scripted(answers)
    check.bench = scripted  # type: ignore[method-assign]
    return check, scripted


def test_on_a_gpu_host_each_row_is_ok_failed_or_skipped_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_check, "_power_limit_w", lambda: 700.0)
    monkeypatch.setattr(gpu_check, "_gpu_memory_bytes", lambda: 140 * 2**30)
    batch = gpu_check.oom_batch(140 * 2**30)
    matrix = [_run(), _run(mode="infer"), _run("error", precision="fp16")]
    oom = [_run("oom", batch_size=str(batch)), _run(batch_size="32")]
    check, scripted = _check(tmp_path, {"gpu-matrix": matrix, "gpu-oom": oom})
    monkeypatch.setattr(gpu_check, "OTHERS", [gpu_check.Other("dp on 2 GPUs", [], 2)])
    rows = {r[0]: r[1:] for r in gpu_check.check_host(check, ("matrix", "nvml", "oom", "others"))}
    assert rows["resnet50 224 px train fp32 batch 64"] == [
        "ok", "821 samples/s, MFU 39.4% of 51 TFLOP/s, 556 W, 0.670 J/sample"
    ]  # fmt: skip
    assert rows["resnet50 224 px train fp16 batch 64"][0] == "failed"
    assert "CUDA out of memory" in rows["resnet50 224 px train fp16 batch 64"][1]
    nvml = rows["NVML: utilization, power, energy, memory"]
    assert nvml[0] == "ok" and nvml[1].startswith("idle 81 W; mean power 556-556 W (limit 700")
    assert rows["out of memory, recorded as oom"][0] == "ok"
    assert f"batch {batch} for 140 GiB: oom; the next trial ran ok" in rows[
        "out of memory, recorded as oom"][1]  # fmt: skip
    assert rows["dp on 2 GPUs"] == ["skipped (needs 2 GPUs, 1 here)", "-"]
    # The matrix is one sweep on the framework the interpreter has.
    experiment, overrides, sweep = scripted.asked[0]
    assert experiment == "gpu-matrix" and sweep
    assert "framework.version=installed" in overrides and "precision=fp32,bf16,fp16" in overrides
    # Each row reached the out folder as it finished.
    written = (tmp_path / "out" / "gpu_check.txt").read_text().splitlines()
    assert [ln.split("\t")[0] for ln in written] == list(rows)


def test_a_row_that_no_longer_fits_the_budget_is_skipped_saying_so(tmp_path: Path) -> None:
    check, scripted = _check(tmp_path, {}, budget=10)
    rows = gpu_check.check_host(check, ("matrix", "compile"))
    assert rows[0][1].startswith("skipped (about 60 s;")
    assert rows[1][0] == "compile=true (torch.compile)" and "s left)" in rows[1][1]
    assert scripted.asked == []


def test_a_failed_command_is_a_failed_row_not_a_crash(tmp_path: Path) -> None:
    check, _ = _check(tmp_path, {})
    rows = gpu_check.check_host(check, ("matrix", "launch"))
    assert [r[1] for r in rows] == ["failed", "failed"]
    assert rows[0][2] == "bench: scripted failure"


def test_power_beyond_the_limit_or_no_energy_fails_the_nvml_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_check, "_power_limit_w", lambda: 300.0)
    check, _ = _check(tmp_path, {})
    hot, cold = _run(), _run(batch_size="128")
    cold.metrics["energy_j"] = 0.0
    gpu_check.row_nvml(check, [hot, cold])
    (row,) = check.rows
    assert row[1] == "failed"
    assert "power_w 556.0 outside (0, 300.0 W]" in row[2] and "energy_j 0.0" in row[2]


def test_the_oom_batch_asks_for_three_times_the_gpus_memory() -> None:
    h100, h200 = gpu_check.oom_batch(80e9), gpu_check.oom_batch(141e9)
    assert h100 * gpu_check.OOM_BYTES_PER_SAMPLE >= 3 * 80e9
    assert h200 > h100 and h200 == 4230


# -- the second round's rows (issue 53): jax beside torch, an LM, serving, accuracy --------


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """As on a host where ``modules`` are not installed (gpu_check asks find_spec)."""
    real = gpu_check.importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name in modules else real(name, *args)

    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", find_spec)


def test_the_jax_rows_say_what_is_missing_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, "keras", "mlperf_loadgen")
    check, scripted = _check(tmp_path, {})
    rows = gpu_check.check_host(check, ("jax", "parity", "serve"))
    assert rows[0] == [
        "jax: ResNet-50 224 px, Keras and Flax",
        "skipped (keras not installed (scripts/gpu_wheels.py carries keras))",
        "-",
    ]
    assert [r[1] for r in rows[1:3]] == ["skipped (keras not installed (scripts/gpu_wheels."
                                         "py carries keras))"] * 2  # fmt: skip
    assert [r[0] for r in rows[3:]] == [f"mode=serve Server ({f})" for f in ("torch", "jax", "tf")]
    assert all("mlperf_loadgen not installed" in r[1] for r in rows[3:])
    assert scripted.asked == []


def test_jax_runs_keras_and_flax_on_its_installed_build_and_flax_bf16_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keras = [_run(**{"framework.name": "jax", "precision": p}) for p in ("fp32", "bf16")]
    flax = [_run(**{"framework.name": "jax", "model.source": "flax"})]
    check, scripted = _check(tmp_path, {"gpu-jax": keras, "gpu-jax-flax": flax})
    said = "bench: invalid configuration; no trial was started:\n  precision: model.source=flax trains in float32 so far\n"  # noqa: E501
    asked: list[list[str]] = []
    check.command = lambda e, o, sweep=False: (asked.append(o), (2, said))[1]  # type: ignore[method-assign]
    gpu_check.row_jax(check)
    rows = {r[0]: r[1:] for r in check.rows}
    assert rows["jax resnet50 224 px train bf16 batch 64"][0] == "ok"
    assert rows["jax flax:resnet50 224 px train fp32 batch 64"][0] == "ok"
    assert rows["jax flax precision=bf16"] == [
        "skipped (bench refuses it before any trial: precision: model.source=flax trains in "
        "float32 so far)", "-"]  # fmt: skip
    (_, keras_overrides, sweep), (_, flax_overrides, _) = scripted.asked
    assert sweep and {"framework=jax", "framework.version=installed", "device=cuda",
                      "model=resnet50", "batch_size=64,128", "mode=train,infer",
                      "precision=fp32,bf16"} <= set(keras_overrides)  # fmt: skip
    assert "model.source=flax" in flax_overrides and "precision=fp32" in flax_overrides
    assert "precision=bf16" in asked[0] and "model.source=flax" in asked[0]
    # A setting bench runs (or fails otherwise) where it must refuse is a failure.
    check.command = lambda e, o, sweep=False: (0, "ran")  # type: ignore[method-assign]
    gpu_check.refused_row(check, "x", "gpu-x", [])
    assert check.rows[-1] == ["x", "failed", "not refused (exit 0): ran"]


def test_the_parity_row_shows_each_sides_deviations_and_the_verdict() -> None:
    out = """relative deviation          loss      update    scale     weights   BN stats
torch vs itself, 1 ulp off  1.04e-07  3.44e-06  3.03e-08  9.43e-08  -         rounding
jax vs torch                0.00e+00  2.79e-06  5.86e-08  8.96e-09  -         passed
jax[source=flax] vs torch   0.00e+00  2.74e-06  3.79e-08  8.87e-09  -         passed

passed: every deviation must be at most 0.01 (513.0 s)
"""
    outcome, figure = gpu_check.parity_outcome(0, out, "")
    assert outcome == "ok"
    assert figure.startswith("jax: loss 0.00e+00, update 2.79e-06, weights 8.96e-09 passed; "
                             "jax[source=flax]: loss")  # fmt: skip
    assert figure.endswith("passed: every deviation must be at most 0.01 (513.0 s)")
    failed = out.replace("-         passed\n\npassed", "-         FAILED\n\nFAILED", 1)
    assert gpu_check.parity_outcome(1, failed, "")[0] == "failed"
    assert gpu_check.parity_outcome(2, "", "bench.parity: bad input")[1].startswith(
        "exit 2: bench.parity: bad input")  # fmt: skip


def test_generation_serving_and_accuracy_rows_show_their_own_figures() -> None:
    generate = gpu_check.Run("ok", {"model.name": "llama", "model.source": "hf", "mode":
                                    "generate", "precision": "bf16", "batch_size": "8"},
                             {"trial_samples_per_s": 9.0, "trial_decode_tokens_per_s": 1234.0,
                              "trial_prefill_tokens_per_s": 56789.0,
                              "trial_time_to_first_token_ms": 4.25,
                              "trial_time_per_output_token_p50_ms": 6.5}, {})  # fmt: skip
    assert gpu_check._label(generate) == "hf:llama generate bf16 batch 8"
    assert gpu_check.figures(generate) == (
        "decode 1,234 tokens/s, prefill 56,789 tokens/s, first token 4.2 ms, per output "
        "token 6.50 ms (p50)")  # fmt: skip
    served = gpu_check.Run("ok", {}, {"trial_serve_latency_p99_ms": 3.5,
                                      "trial_serve_target_qps": 1000.0,
                                      "trial_serve_samples_per_s": 998.0},
                           {"bench.serve.result": "VALID"})  # fmt: skip
    assert gpu_check.figures(served) == "VALID at 1,000 QPS: 998 samples/s, p99 3.50 ms"
    missed = gpu_check.Run("ok", {"goal.name": "accuracy"}, {"target_reached": 0.0,
                           "epochs_trained": 12.0, "best_test_accuracy": 0.9}, {})  # fmt: skip
    assert gpu_check.figures(missed) == "target not reached in 12 epochs, best accuracy 0.900"
    assert gpu_check._label(missed).endswith(" goal=accuracy")
