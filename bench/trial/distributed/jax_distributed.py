"""``distributed=jax_distributed``: JAX data parallelism across ``workers`` processes per
node, one device each, joined by ``jax.distributed``; on one node or, in a Slurm
allocation, across ``nodes`` nodes.

Rank 0 hosts JAX's coordination service: on one node at a loopback port the coordinator
picks; across nodes (:mod:`bench.trial.distributed.nodes`) at the first node's published address
and the port its node agent reserved (:func:`coordinator_address`), every node running its
``workers`` ranks (global index ``node x workers + local``).  Every rank calls
``jax.distributed.initialize`` with all four of its arguments (JAX's own Slurm detection
off: bench places the ranks, not ``srun``) before its first JAX computation, and on the CPU
takes gloo for the collectives across processes (``jax_cpu_collectives_implementation``;
without it a CPU all-reduce cannot leave its process).  Gloo listens on the address this
host's name resolves to: JAX offers no setting for its interface, so across nodes a rank
whose host name resolves to loopback only, on a node the others reach at another address,
fails at once saying so (:func:`gloo_address_problem`) instead of hanging in its first
all-reduce.  The step is ``jax_dp``'s
(:meth:`bench.trial.frameworks.jax_adapter.JaxSession.data_parallel`) over the global device list:
a Mesh over every process's device, the global batch sharded along it (each process
supplies its own ``batch_size`` samples: ``jax.make_array_from_process_local_data``), the
state replicated, XLA's all-reduces crossing the processes.  Each rank is timed like
``ddp``'s, the coordinator adding up their rates; each gets ``threads / workers`` threads.
One device per process: on the CPU the rank's ``XLA_FLAGS`` ask for one host device; with
``device=cuda`` each rank takes the GPU of its local index on its node.  ``breakdown=true``:
the jax breakdown's phases of the sharded step, and ``time_comm_ms``, the sharded step less
the same step with no communication (:func:`bench.trial.distributed.jax_common.exposed_comm`).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core.config import BenchConfig
from bench.trial.distributed import common
from bench.trial.distributed.base import (
    Proc,
    Rank,
    collective_timeout_s,
    env_rank,
    local_rank,
    node_ranks,
    per_rank,
)
from bench.trial.distributed.jax_common import exposed_comm, host_device_flags
from bench.trial.runtime.processes import free_port

if TYPE_CHECKING:
    from bench.trial.distributed.base import Cluster

# Where rank 0's coordination service listens, as the coordinator (or node agent) tells
# every rank.
ENV_COORDINATOR = "BENCH_JAX_COORDINATOR"
# Across nodes: the address the other nodes reach this rank's node at (its agent's).
ENV_NODE_ADDRESS = "BENCH_JAX_NODE_ADDRESS"


def endpoint(address: str, port: int) -> str:
    """``address:port`` as gRPC takes it (an IPv6 address in brackets)."""
    try:
        v6 = ipaddress.ip_address(address).version == 6
    except ValueError:  # a host name
        v6 = False
    return f"[{address}]:{port}" if v6 else f"{address}:{port}"


def coordinator_address(cluster: Cluster) -> str:
    """Rank 0's coordination service across nodes: the first node's address (where rank 0
    runs) and the one port its agent reserved."""
    first = cluster.nodes[0]
    return endpoint(first.address, first.ports[0])


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return address == "localhost"


def gloo_address_problem(node_address: str, host_addresses: list[str]) -> str:
    """Why gloo's collectives cannot be reached from the other nodes: gloo listens on
    (and tells its peers) the first address this host's name resolves to
    (``host_addresses``); if those are all loopback while the other nodes reach this node
    at ``node_address``, which is not, its peers cannot connect.  "" if no such problem."""
    if not host_addresses or _loopback(node_address):
        return ""
    if all(_loopback(a) for a in host_addresses):
        return (
            f"distributed=jax_distributed across nodes: this host's name resolves only to "
            f"loopback ({', '.join(sorted(set(host_addresses)))}), where gloo's CPU "
            f"collectives would listen, but the other nodes reach this node at "
            f"{node_address}; make the host name resolve to that address (/etc/hosts)"
        )
    return ""


def _host_addresses() -> list[str]:
    import socket

    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)
    except OSError:
        return []
    return [str(info[4][0]) for info in infos]


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
        return self._with(
            per_rank(cfg, cfg.workers), {ENV_COORDINATOR: endpoint("127.0.0.1", free_port())}
        )

    def ports_per_node(self, cfg: BenchConfig, node: int) -> int:
        return 1 if node == 0 else 0  # rank 0's coordination service, on the first node

    def node_processes(
        self, cfg: BenchConfig, workdir: Path, cluster: Cluster, node: int
    ) -> list[Proc]:
        env = {
            ENV_COORDINATOR: coordinator_address(cluster),
            ENV_NODE_ADDRESS: cluster.nodes[node].address,
        }
        return self._with(node_ranks(cfg, node), env)

    @staticmethod
    def _with(procs: list[Proc], env: dict[str, str]) -> list[Proc]:
        flags = host_device_flags(os.environ.get("XLA_FLAGS", ""), 1)
        for p in procs:
            p.env.update({**env, "XLA_FLAGS": flags})
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
            cluster_detection_method="deactivate",
            initialization_timeout=int(collective_timeout_s(cfg)),
        )
        session = adapter.prepare(cfg, data)
        platform = session.jax_device.platform
        if platform == "cpu" and (node := os.environ.get(ENV_NODE_ADDRESS)):
            problem = gloo_address_problem(node, _host_addresses())
            if problem:
                raise RuntimeError(problem)
        devices = jax.devices(platform)
        if len(devices) != rank.world:
            raise RuntimeError(
                f"distributed=jax_distributed: {rank.world} processes of one device each, but "
                f"JAX sees {len(devices)} {platform} devices in all"
            )
        session.data_parallel(devices)
        return _Session(session)


class _Session(common.Wrapped):
    def exposed_comm(self, cfg: BenchConfig) -> dict[str, float]:
        return exposed_comm(self, cfg)


STRATEGY = JaxDistributed()
