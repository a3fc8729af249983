"""``distributed=jax_dp``: JAX data parallelism over ``workers`` XLA devices of one process,
with ``jax.sharding``: a Mesh over the devices, each global batch (``workers x batch_size``;
an image model's images and labels, a sequence model's inputs and every array of its
targets tuple) sharded along its one axis, the weights, non-trainable variables and
optimizer state replicated; the jax adapter's jitted step with these in/out shardings, so
XLA partitions it and inserts the all-reduces
(:meth:`bench.trial.frameworks.jax_adapter.JaxSession.data_parallel`).

Devices: the visible GPUs where JAX sees any and ``device`` is not ``cpu``; otherwise
``workers`` host devices, which XLA's CPU client makes when ``XLA_FLAGS`` holds
``--xla_force_host_platform_device_count=workers`` before JAX loads: the rank process is
started with it (always: it changes nothing on GPUs).  Like ``mirrored`` on the CPU, a
stand-in for the mechanics (state replicated per device, gradients all-reduced every step):
the host devices share the cores.  Threads: the rank takes the trial's intra-op threads
(one process), and XLA's CPU client runs every host device's work on one Eigen pool of
that many threads (at least one per device).  BatchNorm's statistics are over the global
batch (XLA's global view of a sharded batch), as in the undistributed step.  One step
trains ``workers x batch_size`` samples; each device's rate is the process's rate split
evenly (lockstep).  ``breakdown=true``: the jax breakdown's phases of the sharded step, and
``time_comm_ms``, the sharded step less the same step on the same devices with no
communication (:func:`bench.trial.distributed.jax_common.exposed_comm`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.core.config import BenchConfig
from bench.trial.distributed import common
from bench.trial.distributed.base import OneProcess, Proc, Rank, per_rank
from bench.trial.distributed.jax_common import HOST_DEVICES, exposed_comm, host_device_flags


class JaxDP(OneProcess):
    name = "jax_dp"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        if gpu and cfg.workers > gpus:
            return [
                f"workers: jax_dp on GPUs shards each batch over one GPU per worker; {gpus} "
                f"visible, got workers={cfg.workers}"
            ]
        return []

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        procs = per_rank(cfg, 1)
        flags = host_device_flags(os.environ.get("XLA_FLAGS", ""), cfg.workers)
        procs[0].env["XLA_FLAGS"] = flags
        return procs

    def step_batches(self, cfg: BenchConfig) -> int:
        return cfg.workers

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import jax

        # cfg.batch_size is the global batch here (bench.trial.distributed.rank: step_batches).
        session = adapter.prepare(cfg, data)
        workers = cfg.workers
        platform = session.jax_device.platform
        devices = jax.devices(platform)
        if len(devices) < workers:
            where = "GPUs" if platform == "gpu" else f"host devices (XLA_FLAGS: --{HOST_DEVICES})"
            raise RuntimeError(
                f"distributed=jax_dp: workers={workers} needs {workers} {platform} devices; JAX "
                f"sees {len(devices)} {where}"
            )
        session.data_parallel(devices[:workers])
        return _Session(session, workers, cfg.batch_size // workers)


class _Session(common.Lockstep):
    def exposed_comm(self, cfg: BenchConfig) -> dict[str, float]:
        return exposed_comm(self, cfg)


STRATEGY = JaxDP()
