"""``distributed=jax_distributed``: JAX data parallelism across ``workers`` processes on this
node, one device each, joined by ``jax.distributed``.

Rank 0 hosts JAX's coordination service on a loopback port the coordinator picks; every
rank calls ``jax.distributed.initialize`` before its first JAX computation, and on the CPU
takes gloo for the collectives across processes (``jax_cpu_collectives_implementation``;
without it a CPU all-reduce cannot leave its process).  The step is ``jax_dp``'s
(:meth:`bench.frameworks.jax_adapter.JaxSession.data_parallel`) over the global device list:
a Mesh over every process's device, the global batch sharded along it (each process
supplies its own ``batch_size`` samples: ``jax.make_array_from_process_local_data``), the
state replicated, XLA's all-reduces crossing the processes.  Each rank is timed like
``ddp``'s, the coordinator adding up their rates; each gets ``threads / workers`` threads.
One device per process: on the CPU the rank's ``XLA_FLAGS`` ask for one host device; with
``device=cuda`` each rank takes the GPU of its local index.  One node (across Slurm nodes: not yet).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.core.config import BenchConfig
from bench.distributed.base import Proc, Rank, collective_timeout_s, env_rank, local_rank, per_rank
from bench.distributed.jax_common import host_device_flags
from bench.runtime.processes import free_port

# Where rank 0's coordination service listens, as the coordinator tells every rank.
ENV_COORDINATOR = "BENCH_JAX_COORDINATOR"


class JaxDistributed:
    name = "jax_distributed"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        if gpu and cfg.workers > gpus:
            return [
                f"workers: jax_distributed on GPUs runs one process per GPU; {gpus} visible, "
                f"got workers={cfg.workers}"
            ]
        return []

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        address = f"127.0.0.1:{free_port()}"
        flags = host_device_flags(os.environ.get("XLA_FLAGS", ""), 1)
        procs = per_rank(cfg, cfg.workers)
        for p in procs:
            p.env.update({ENV_COORDINATOR: address, "XLA_FLAGS": flags})
        return procs

    def rank(self, cfg: BenchConfig) -> Rank:
        return env_rank()

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        import jax

        # Before anything that starts XLA's backend (jax.devices included).
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            os.environ[ENV_COORDINATOR],
            num_processes=rank.world,
            process_id=rank.index,
            local_device_ids=[local_rank(rank)] if cfg.device == "cuda" else None,
            initialization_timeout=int(collective_timeout_s(cfg)),
        )
        session = adapter.prepare(cfg, data)
        devices = jax.devices(session.jax_device.platform)
        if len(devices) != rank.world:
            raise RuntimeError(
                f"distributed=jax_distributed: {rank.world} processes of one device each, but "
                f"JAX sees {len(devices)} {session.jax_device.platform} devices in all"
            )
        session.data_parallel(devices)
        return session


STRATEGY = JaxDistributed()
