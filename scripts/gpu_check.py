"""Run each GPU path of bench once, at the smallest size that exercises it, and print a
table: path | ok / failed / skipped (why) | key figure.  The first thing to run on a new
GPU host (``bash scripts/gpu_check.sh``).

It runs with whatever the host has: a framework that is not installed, a missing Docker
engine or a Horovod built without NCCL give "skipped" rows, not failures.  Every path is a
real ``python -m bench`` trial into a temporary store.  Exit 0 when nothing failed.

On a host without a GPU it says so, then checks that each GPU-only setting is refused
before any trial (exit 2, no store created), and exits 0 when all are.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SMALL = ["model=resnet18", "batch_size=32", "image_size=64", "epochs=1", "steps_per_epoch=5",
         "warmup_steps=2", "force=true"]  # fmt: skip


@dataclass
class GpuPath:
    name: str
    overrides: list[str]
    gpus: int = 1  # GPUs it needs
    frameworks: tuple[str, ...] = ("torch",)
    expect: str = "ok"  # the trial status that means the path works
    figure: Callable[[dict[str, Any]], str] = lambda m: _rate(m)
    needs: list[Callable[[], str]] = field(default_factory=list)  # each: why it cannot run


def _rate(m: dict[str, Any]) -> str:
    rate = m.get("trial_samples_per_s") or m.get("samples_per_s")
    return f"{rate:,.0f} samples/s" if rate else "-"


def _telemetry(m: dict[str, Any]) -> str:
    energy, power, util = m.get("energy_j"), m.get("power_w"), m.get("gpu_util_pct")
    limit = _power_limit_w()
    problems = []
    if not energy or energy <= 0:
        problems.append("energy_j missing or 0")
    if power is None or power <= 0 or (limit and power > 1.1 * limit):
        problems.append(f"power_w {power} outside (0, {limit} W]")
    text = (
        f"util {util or 0:.0f}%, {power or 0:.0f} W (limit {limit or '?'} W), {energy or 0:.0f} J"
    )
    if problems:
        raise AssertionError("; ".join(problems) + f" ({text})")
    return text


def _power_limit_w() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
    except Exception:  # noqa: BLE001 - no NVML: the figure says '?'
        return None


def _installed(module: str) -> Callable[[], str]:
    def why() -> str:
        if module == "mxnet":
            from bench import interpreters

            return interpreters.problem("mxnet")
        return "" if importlib.util.find_spec(module) else f"{module} is not installed"

    return why


def _docker() -> str:
    """Why the CUDA image cannot be had: no engine, or its official base neither here nor
    reachable (this host's registry access)."""
    from bench.images import DEFAULT_BASES

    base = DEFAULT_BASES[("torch", "cuda")]
    try:
        import docker

        engine = docker.from_env()
        engine.ping()
    except Exception as exc:  # noqa: BLE001 - any reason is the row's reason
        return f"no Docker engine reachable ({type(exc).__name__})"
    try:
        engine.images.get(base)
    except Exception:  # noqa: BLE001 - not here: can a registry give it?
        try:
            engine.images.get_registry_data(base)
        except Exception as exc:  # noqa: BLE001
            return f"its base {base} is not here and no registry gives it ({type(exc).__name__})"
    return ""


def _horovod_nccl() -> str:
    if importlib.util.find_spec("horovod") is None:
        return "Horovod is not installed (bench setup horovod)"
    done = subprocess.run(
        [sys.executable, "-c", "import horovod.torch as h; print(int(h.nccl_built()))"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return f"horovod.torch does not import: {done.stderr.strip()[-120:]}"
    if done.stdout.strip() == "0":
        return "Horovod was built without NCCL (bench setup horovod builds its Gloo CPU path)"
    return ""


PATHS = [
    GpuPath("torch training on cuda", ["framework=torch", "device=cuda"]),
    GpuPath("tf training on cuda", ["framework=tf", "device=cuda"], frameworks=("tf",)),
    GpuPath("mxnet training on cuda", ["framework=mxnet", "device=cuda"], frameworks=("mxnet",)),
    GpuPath(
        "NVML utilization, power, energy",
        ["framework=torch", "device=cuda", "steps_per_epoch=-1", "min_window_s=3"],
        figure=_telemetry,
    ),
    GpuPath("fp16 (torch)", ["framework=torch", "device=cuda", "precision=fp16"]),
    GpuPath("bf16 (torch)", ["framework=torch", "device=cuda", "precision=bf16"]),
    GpuPath("fp16 (tf)", ["framework=tf", "device=cuda", "precision=fp16"], frameworks=("tf",)),
    GpuPath(
        "compile=true (torch)", ["framework=torch", "device=cuda", "compile=true", "warmup_steps=3"]
    ),
    GpuPath("dp on 2 GPUs", ["framework=torch", "device=cuda", "distributed=dp", "workers=2"], 2),
    GpuPath(
        "ddp on 2 GPUs (NCCL)",
        ["framework=torch", "device=cuda", "distributed=ddp", "workers=2"],
        2,
    ),
    GpuPath(
        "model_parallel (torch) on 2 GPUs",
        ["framework=torch", "device=cuda", "distributed=model_parallel", "workers=2"],
        2,
    ),
    GpuPath(
        "model_parallel (tf) on 2 GPUs",
        ["framework=tf", "device=cuda", "distributed=model_parallel", "workers=2"],
        2,
        ("tf",),
    ),
    GpuPath(
        "Horovod with NCCL",
        ["framework=torch", "device=cuda", "distributed=horovod", "workers=2"],
        2,
        needs=[_horovod_nccl],
    ),
    GpuPath(
        "launcher=docker, gpus=all (CUDA image)",
        ["framework=torch", "device=cuda", "launcher=docker", "launcher.docker.gpus=all"],
        needs=[_docker],
    ),
    GpuPath(
        "OOM frontier (a real GPU OOM)",
        [
            "framework=torch",
            "device=cuda",
            "model=resnet50",
            "image_size=224",
            "batch_size=16384",
            "steps_per_epoch=2",
        ],
        expect="oom",
        figure=lambda m: "recorded as oom",
    ),
]

# On a host without a GPU: settings that must be refused before any trial.
REFUSED = [
    ("device=cuda", ["device=cuda"]),
    ("precision=fp16", ["precision=fp16"]),
    ("distributed=dp", ["distributed=dp", "workers=2"]),
    ("model_parallel (torch)", ["framework=torch", "distributed=model_parallel", "workers=2"]),
    ("launcher.docker.gpus=all", ["launcher=docker", "launcher.docker.gpus=all"]),
]


def _bench(overrides: list[str], where: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    from bench.interpreters import child_env

    command = [
        sys.executable, "-m", "bench", *overrides,
        f"tracking.uri=sqlite:///{where}/mlflow.db", f"hydra.run.dir={where}/run",
    ]  # fmt: skip
    env = child_env()
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=where, env=env
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(command, 124, str(exc.stdout or ""), "timed out")


def _trial(where: Path) -> tuple[str, dict[str, Any], str]:
    """The trial's status, its summary metrics and its error, from the store."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{where}/mlflow.db")
    for run in client.search_runs([e.experiment_id for e in client.search_experiments()]):
        status = run.data.tags.get("bench.status")
        if status and "mlflow.parentRunId" in run.data.tags:
            return status, dict(run.data.metrics), run.data.tags.get("bench.error", "")
    return "no run", {}, ""


def check_gpu_host(gpus: int, timeout: float) -> list[list[str]]:
    rows = []
    for p in PATHS:
        why = ""
        if gpus < p.gpus:
            why = f"needs {p.gpus} GPUs, {gpus} here"
        for fw in p.frameworks:
            why = why or _installed({"tf": "tensorflow"}.get(fw, fw))()
        for need in p.needs:
            why = why or need()
        if why:
            rows.append([p.name, f"skipped ({why})", "-"])
            continue
        with tempfile.TemporaryDirectory(prefix="bench-gpu-check-") as tmp:
            started = time.perf_counter()
            done = _bench([*SMALL, *p.overrides], Path(tmp), timeout)
            status, metrics, error = _trial(Path(tmp))
            took = time.perf_counter() - started
        if status == p.expect:
            try:
                rows.append([p.name, "ok", f"{p.figure(metrics)} ({took:.0f} s)"])
            except AssertionError as exc:
                rows.append([p.name, "failed", str(exc)])
        else:
            last = (error or done.stderr).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            rows.append([p.name, "failed", f"status {status}: {last[0][:160]}"])
        print(f"gpu_check: {rows[-1][0]}: {rows[-1][1]}", file=sys.stderr, flush=True)
    return rows


def check_cpu_host(timeout: float) -> list[list[str]]:
    rows = []
    for name, overrides in REFUSED:
        with tempfile.TemporaryDirectory(prefix="bench-gpu-check-") as tmp:
            done = _bench(["model=lenet5", *overrides], Path(tmp), timeout)
            store = Path(tmp, "mlflow.db").exists()
        said = next((ln.strip() for ln in done.stderr.splitlines() if ":" in ln and
                     ln.startswith("  ")), done.stderr.strip()[-160:])  # fmt: skip
        ok = done.returncode == 2 and not store
        outcome = "refused" if ok else f"failed (exit {done.returncode}, store {store})"
        rows.append([name, outcome, said[:160]])
    return rows


def table(rows: list[list[str]], head: list[str]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per path")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("hydra") is None:
        print("gpu_check: bench's own environment is missing (run bash scripts/setup.sh)")
        return 1
    from bench.device_preflight import host_gpus

    gpus, driver = host_gpus()
    if gpus == 0:
        print(
            "gpu_check: no GPU visible here (NVML finds none): no GPU path can run. Checking "
            "that each GPU-only setting is refused before any trial (exit 2, no store)."
        )
        rows = check_cpu_host(args.timeout)
        print(table(rows, ["setting", "outcome", "what bench said"]))
        return 0 if all(r[1] == "refused" for r in rows) else 1
    print(f"gpu_check: {gpus} GPU(s), driver {driver}", flush=True)
    rows = check_gpu_host(gpus, args.timeout)
    print(table(rows, ["path", "outcome", "key figure"]))
    return 1 if any(r[1] == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
