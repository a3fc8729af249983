"""Constructed run records for the report's tests: every section's data, with known answers."""

from __future__ import annotations

import random
from typing import Any

from bench.tracking import RunRecord, RunSet

PARAMS = {"resnet50": 23_520_842, "vgg16": 14_728_266}
_counter = [0]


def record(
    framework: str,
    model: str = "resnet50",
    *,
    mode: str = "train",
    batch: int = 32,
    image: int = 32,
    device: str = "cpu",
    status: str = "ok",
    rate: float = 100.0,
    params: dict[str, str] | None = None,
    metrics: dict[str, float] | None = None,
    history: dict[str, list[tuple[int, float]]] | None = None,
    tags: dict[str, str] | None = None,
    num_parameters: int | None = None,
    repeat: int = 0,
) -> RunRecord:
    """One run as tracking.load_runs returns it; ``rate`` is trial_samples_per_s."""
    _counter[0] += 1
    version_tag = "torch_version" if framework == "torch" else "tensorflow_version"
    p: dict[str, Any] = {
        "framework.name": framework,
        "model.name": model,
        "mode": mode,
        "batch_size": batch,
        "image_size": image,
        "device": "auto",
        "seed": 0,
        "repeat": repeat,
        "repeats": 1,
        "tracking.uri": "sqlite:///x.db",
        "num_parameters": num_parameters or PARAMS[model],
    }
    p.update(params or {})
    t = {
        "bench.framework": framework,
        "bench.model": model,
        "bench.mode": mode,
        "bench.status": status,
        "bench.device": device,
        "bench.python_version": "3.11.7",
        "bench.cpu_model": "Test CPU",
        f"bench.{version_tag}": "2.0",
        "bench.repeat": str(repeat),
    }
    t.update(tags or {})
    m: dict[str, float] = {}
    if status == "ok":
        epochs = 2
        seconds = epochs * 5 * batch / rate
        m = {"trial_samples_per_s": rate, "trial_time_s": seconds, "epochs_completed": epochs}
    m.update(metrics or {})
    return RunRecord(
        run_id=f"run{_counter[0]:05d}",
        name=f"{framework} {model} {repeat}",
        start_time_ms=_counter[0],
        params={k: str(v) for k, v in p.items()},
        tags=t,
        metrics=m,
        history=history or {},
    )


def runset(records: list[RunRecord]) -> RunSet:
    return RunSet(records, "sqlite:///x.db", "test", "parent", "sweep-test")


def every_section(seed: int = 0) -> RunSet:
    """Runs that fill every section of the report (torch faster in training by 25%)."""
    rng = random.Random(seed)

    def noisy(x: float) -> float:
        return x * rng.gauss(1.0, 0.01)

    runs = []
    for repeat in range(4):
        for framework, train_rate in (("torch", 125.0), ("tf", 100.0)):
            # training on CIFAR-10 on a GPU: accuracy, utilization, power, phases, operators
            accuracy = [(e, 0.3 + 0.1 * e + rng.uniform(0, 0.02)) for e in (1, 2, 3)]
            runs.append(
                record(
                    framework,
                    device="cuda:0",
                    rate=noisy(train_rate),
                    repeat=repeat,
                    params={"data.name": "cifar10"},
                    metrics={
                        "time_data_ms": noisy(2.0),
                        "time_forward_ms": noisy(10.0 if framework == "torch" else 14.0),
                        "time_backward_ms": noisy(20.0),
                        "time_optimizer_ms": noisy(3.0),
                        "trial_energy_j": noisy(250.0),
                        "op_convolution_ms": noisy(8.0 if framework == "torch" else 6.0),
                        "op_batch_norm_ms": noisy(3.0),
                    },
                    history={"test_accuracy": accuracy, "gpu_util_pct": [(1, 45.0), (2, 47.0)]},
                    tags={"bench.gpu_names": "Test GPU"},
                )
            )
            # inference against batch size on the CPU, both models
            for model in ("resnet50", "vgg16"):
                for batch in (1, 4, 16, 64):
                    rate = noisy(40.0 * batch**0.5)
                    runs.append(
                        record(
                            framework,
                            model,
                            mode="infer",
                            batch=batch,
                            image=64,
                            rate=rate,
                            repeat=repeat,
                            metrics={"trial_cpu_energy_j": noisy(30.0 + batch)},
                        )
                    )
            # data-parallel training on 1, 2 and 4 workers
            for workers in (1, 2, 4):
                runs.append(
                    record(
                        framework,
                        device="cuda:0",
                        rate=noisy(train_rate),
                        repeat=repeat,
                        params={"distributed": "ddp", "workers": str(workers), "nodes": "1"},
                        metrics={
                            "global_samples_per_s": noisy(
                                train_rate * workers * 0.9 ** (workers - 1)
                            )
                        },
                        tags={"bench.gpu_names": "Test GPU"},
                    )
                )
    # the out-of-memory frontier: batch 256 ran, 512 did not
    for framework in ("torch", "tf"):
        runs.append(record(framework, "vgg16", batch=256, device="cuda:0", rate=300.0))
        runs.append(record(framework, "vgg16", batch=512, device="cuda:0", status="oom"))
    return runset(runs)


def said(cell: Any) -> str:
    """A report table's verdict cell as the reader gets it: its short text, then the note
    said once below the table (``not comparable: <reasons>``)."""
    return f"{cell.text}: {cell.note}" if cell.note else str(cell.text)
