"""Pieces several strategies share: sharding, a session wrapper, exposed-communication timing."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.trial.data import LabelledData


def shard(data: Any, index: int, world: int) -> Any:
    """Worker ``index``'s share of a labelled training set (every ``world``-th sample);
    synthetic batches are kept whole (each worker cycles through its own copy)."""
    if isinstance(data, LabelledData) and world > 1:
        return dataclasses.replace(
            data, train_x=data.train_x[index::world], train_y=data.train_y[index::world]
        )
    return data


def loopback_env() -> dict[str, str]:
    """Gloo on one node talks over loopback (a sandbox may have no other interface)."""
    return {"GLOO_SOCKET_IFNAME": "lo", "TP_SOCKET_IFNAME": "lo"}


def breakdown_pairs(cfg: BenchConfig) -> int:
    from bench.trial.profiling import breakdown_steps

    return breakdown_steps(cfg)


def exposed_comm(
    distributed: Callable[[], None], local: Callable[[], None], pairs: int
) -> dict[str, float]:
    """Exposed communication per step: a distributed step minus the same step with no
    communication (a copy of the model on this rank, or DDP's ``no_sync``), timed in
    ``pairs`` back-to-back pairs with alternating order; medians over the calmest quarter
    (at least 3) of the pairs.  Every rank runs the same sequence, so the distributed steps
    meet.  What overlaps with compute is not exposed and not counted."""
    perf = time.perf_counter
    got: list[tuple[float, float]] = []
    for i in range(pairs):
        took = {}
        for name in ("dist", "local") if i % 2 == 0 else ("local", "dist"):
            t0 = perf()
            (distributed if name == "dist" else local)()
            took[name] = perf() - t0
        got.append((took["dist"], took["local"]))
    calm = sorted(got, key=sum)[: max(3, pairs // 4)]
    dist = statistics.median(d for d, _ in calm)
    alone = statistics.median(v for _, v in calm)
    return {
        metrics.TIME_COMM_MS: 1e3 * max(0.0, dist - alone),
        metrics.TIME_STEP_MS: 1e3 * dist,
        metrics.TIME_LOCAL_STEP_MS: 1e3 * alone,
        metrics.BREAKDOWN_STEPS: float(pairs),
    }


def timed_alone(fn: Callable[[], Any], calls: int) -> float:
    """Median seconds of ``fn()`` over ``calls`` calls after one untimed call."""
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class Wrapped:
    """A session that delegates to the framework's own session and overrides some methods."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.num_parameters = inner.num_parameters
        self.device = inner.device
        self.steps_per_pass = inner.steps_per_pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def next_batch(self) -> Any:
        return self.inner.next_batch()

    def step(self, batch: Any) -> None:
        self.inner.step(batch)

    def sync(self) -> None:
        self.inner.sync()

    def take_mean_loss(self) -> float | None:
        return self.inner.take_mean_loss()

    def evaluate(self) -> tuple[float, float] | None:
        return self.inner.evaluate()

    def peak_device_memory_mb(self) -> float | None:
        return self.inner.peak_device_memory_mb()

    def forward_flops_per_sample(self) -> float | None:
        return self.inner.forward_flops_per_sample()


class CountedSteps(Wrapped):
    """A wrapped session that counts the steps of each epoch, for per-worker rates in a
    one-process strategy: ``steps_rate(samples_per_step, elapsed_s)`` is the last epoch's."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._steps = self._last = 0

    def step(self, batch: Any) -> None:
        self.inner.step(batch)
        self._steps += 1

    def take_mean_loss(self) -> float | None:
        self._last, self._steps = self._steps, 0
        return self.inner.take_mean_loss()

    def steps_rate(self, samples_per_step: int, elapsed_s: float) -> float:
        return self._last * samples_per_step / elapsed_s if elapsed_s > 0 else 0.0


class Lockstep(CountedSteps):
    """A one-process session over ``devices`` devices stepping in lockstep (``dp``,
    ``jax_dp``), ``per_device`` samples each: each device's rate is the process's split
    evenly, ``worker{i}_samples_per_s``."""

    def __init__(self, inner: Any, devices: int, per_device: int) -> None:
        super().__init__(inner)
        self.devices, self.per_device = devices, per_device

    def epoch_extra(self, elapsed_s: float) -> dict[str, float]:
        rate = self.steps_rate(self.per_device, elapsed_s)
        return {f"worker{i}_samples_per_s": rate for i in range(self.devices)}


def tf_config(cluster: dict[str, list[str]], task: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task, "index": index}})


def tf_checks(cfg: BenchConfig) -> list[str]:
    """What the tf.distribute sessions do not cover."""
    from bench.trial.models import MODELS

    problems = []
    if cfg.model.name in MODELS and MODELS[cfg.model.name].task != "image":
        problems.append(
            f"model: distributed={cfg.distributed.name} trains image models in this version; "
            f"{cfg.model.name} is a sequence model"
        )
    if cfg.precision == "fp16":
        problems.append(
            f"precision: fp16 loss scaling is not wired into distributed={cfg.distributed.name}; "
            "use fp32 or bf16"
        )
    return problems
