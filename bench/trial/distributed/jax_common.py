"""Pieces the JAX strategies share (``jax_dp``, ``jax_distributed``): XLA's host devices,
and their exposed communication (``time_comm_ms``)."""

from __future__ import annotations

import re
from typing import Any

from bench.core import metrics
from bench.core.config import BenchConfig

# XLA's flag that makes its CPU client expose that many host devices (read when JAX loads).
HOST_DEVICES = "xla_force_host_platform_device_count"


def host_device_flags(existing: str, devices: int) -> str:
    """``XLA_FLAGS`` asking XLA's CPU client for ``devices`` host devices, the rest kept."""
    kept = re.sub(rf"(--)?{HOST_DEVICES}=\S*", "", existing).split()
    return " ".join([*kept, f"--{HOST_DEVICES}={devices}"])


def exposed_comm(session: Any, cfg: BenchConfig) -> dict[str, float]:
    """``time_comm_ms`` of a data-parallel JAX session (``jax_dp``, ``jax_distributed``): the
    sharded step, whose all-reduces XLA puts inside the one compiled program, minus the same
    step mapped over the same devices with no communication
    (:meth:`~bench.trial.frameworks.jax_adapter.JaxSession.local_step`), timed in alternating
    pairs (:func:`bench.trial.distributed.common.exposed_comm`); every rank runs the same
    sequence, so the sharded steps meet.  Also ``time_local_step_ms``; ``time_step_ms``
    stays the breakdown's own (the sharded step timed alone)."""
    from bench.trial.distributed import common

    local = session.local_step()

    def sharded() -> None:
        session.step(session.next_batch())
        session.sync()

    def alone() -> None:
        local(session.next_batch())

    out = common.exposed_comm(sharded, alone, common.breakdown_pairs(cfg))
    session.take_mean_loss()  # the losses of these extra steps are not reported
    return {key: out[key] for key in (metrics.TIME_COMM_MS, metrics.TIME_LOCAL_STEP_MS)}
