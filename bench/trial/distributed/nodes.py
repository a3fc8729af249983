"""A distributed trial across the nodes of a Slurm allocation (``nodes > 1``).

The coordinator (on the allocation's first node, where the trial runs) starts ONE job step:

    srun --overlap --nodes=N --ntasks=N --ntasks-per-node=1 \
        python -m bench.trial.distributed.nodes WORKDIR

so Slurm places one *node agent* on each node.  The agents meet through files in the trial's
work directory (which must be on a filesystem every node sees, as Slurm's own job folders
are): each writes ``nodes/node{k}.json`` with its address and the TCP ports it reserved,
then waits for the others.  From that :class:`Cluster` the strategy names the processes of
node ``k`` (:meth:`Strategy.node_processes`: torchrun with the first node as master,
``TF_CONFIG`` listing every node's workers, Horovod's rendezvous on the first node), and the
agent starts, watches and stops them with :mod:`.launch`, exactly as on one node.  Ranks
write ``rank{i}/`` in the shared work directory, and the coordinator assembles the result
from there as it does for one node.

If any agent fails, ``--kill-on-bad-exit`` makes Slurm stop the others; if the coordinator
stops the step (deadline, failure, Ctrl-C), Slurm signals every agent, and each agent stops
every process it started.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.core.config import BenchConfig
from bench.trial.distributed.base import Cluster, Node, Proc, rank_command

NODES_DIR = "nodes"
DONE = "done"  # written by the first agent whose processes ended, ok or not


def allocation_problem(cfg: BenchConfig) -> str:
    """Why this process cannot run ``cfg`` across ``cfg.nodes`` nodes; "" if it can."""
    if not os.environ.get("SLURM_JOB_ID"):
        return (
            f"nodes: {cfg.nodes} nodes need a Slurm allocation; run the sweep with "
            f"hydra/launcher=submitit_slurm, or inside `salloc -N {cfg.nodes}` / `sbatch -N "
            f"{cfg.nodes}`"
        )
    have = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 1)
    if have < cfg.nodes:
        return (
            f"nodes: {cfg.nodes} nodes asked for, but Slurm job {os.environ['SLURM_JOB_ID']} "
            f"has {have}"
        )
    if shutil.which("srun") is None:
        return "nodes: srun is not on PATH inside the allocation"
    return ""


def step_command(cfg: BenchConfig, workdir: Path) -> list[str]:
    """The job step that starts one node agent on each of the trial's nodes."""
    argv = [
        "srun", "--overlap", f"--nodes={cfg.nodes}", f"--ntasks={cfg.nodes}",
        "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--job-name=bench-nodes",
        f"--output={workdir / NODES_DIR / 'agent%n.log'}",
    ]  # fmt: skip
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus:  # the agent's ranks use the node's share the job asked for, not one CPU
        argv.append(f"--cpus-per-task={cpus}")
    gpus = os.environ.get("SLURM_GPUS_PER_NODE")
    if gpus:
        argv.append(f"--gpus-per-node={gpus}")
    return [*argv, sys.executable, "-m", "bench.trial.distributed.nodes", str(workdir)]


def node_address(name: str) -> str:
    """How the other nodes reach node ``name``: ``BENCH_NODE_ADDR`` if set, else the address
    Slurm itself uses for it (NodeAddr), else this host's name, resolved."""
    given = os.environ.get("BENCH_NODE_ADDR")
    if given:
        return given
    addr = ""
    try:
        out = subprocess.run(
            ["scontrol", "show", "node", "-o", name],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        addr = next((w.split("=", 1)[1] for w in out.split() if w.startswith("NodeAddr=")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return socket.gethostbyname(addr or socket.gethostname())
    except OSError:
        return addr or socket.gethostname()


# Where Gloo (torch, Horovod) and TensorPipe take their network interface from.
INTERFACE_VARS = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE")


def interface_of(address: str) -> str:
    """The name of this host's network interface that holds ``address``; "" if none does."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == address for a in addrs):
            return name
    return ""


def interface_env(address: str) -> dict[str, str]:
    """Gloo's and TensorPipe's interface on this node: the one holding the address the other
    nodes reach it at (left to themselves they take the host name's, which on a node with
    several networks may be another), unless the environment names one already."""
    iface = interface_of(address)
    if not iface:
        return {}
    return {var: iface for var in INTERFACE_VARS if not os.environ.get(var)}


def reserve_ports(n: int) -> tuple[int, ...]:
    """``n`` TCP ports free on every interface of this node right now."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
            ports.append(int(s.getsockname()[1]))
    finally:
        for s in socks:
            s.close()
    return tuple(ports)


def publish(workdir: Path, index: int, node: Node) -> None:
    d = workdir / NODES_DIR
    d.mkdir(exist_ok=True)
    tmp = d / f".node{index}.json.tmp"
    tmp.write_text(json.dumps({"name": node.name, "address": node.address, "ports": node.ports}))
    os.replace(tmp, d / f"node{index}.json")


def gather(workdir: Path, count: int, timeout_s: float, poll_s: float = 0.1) -> Cluster:
    """Every node's entry, once all ``count`` have published; TimeoutError naming the
    missing ones after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[int, Node] = {}
        for k in range(count):
            path = workdir / NODES_DIR / f"node{k}.json"
            try:
                got = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            found[k] = Node(got["name"], got["address"], tuple(got["ports"]))
        if len(found) == count:
            return Cluster(tuple(found[k] for k in range(count)))
        if time.monotonic() > deadline:
            missing = ", ".join(f"node{k}" for k in range(count) if k not in found)
            raise TimeoutError(f"{missing} did not report within {timeout_s:g} s")
        time.sleep(poll_s)


def _agent(workdir: Path) -> int:
    from bench.core.config import from_dict
    from bench.trial.distributed import launch
    from bench.trial.distributed.base import CONFIG, collective_timeout_s, deadline_s
    from bench.trial.distributed.registry import load
    from bench.trial.runtime import processes

    processes.die_with_parent()
    cfg = from_dict(BenchConfig, json.loads((workdir / CONFIG).read_text()))
    index = int(os.environ["SLURM_NODEID"])
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    strategy = load(cfg.distributed.name)
    node = Node(name, node_address(name), reserve_ports(strategy.ports_per_node(cfg, index)))
    publish(workdir, index, node)
    cluster = gather(workdir, cfg.nodes, collective_timeout_s(cfg))
    procs: list[Proc] = strategy.node_processes(cfg, workdir, cluster, index)
    logs = workdir / NODES_DIR / f"node{index}"
    logs.mkdir(parents=True, exist_ok=True)
    for p in procs:
        p.argv = p.argv or rank_command(workdir)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **interface_env(node.address))
    finished = workdir / NODES_DIR / DONE
    running = launch.spawn(procs, logs, env)
    try:
        # A node that only serves (ps_async's worker servers) serves until another node's
        # processes are done.
        outcome = launch.wait(running, time.monotonic() + deadline_s(cfg), done=finished.exists)
    finally:
        launch.stop_all(running, cfg.launcher.kill_grace_s)
        finished.touch()
    if not outcome.ok:
        print(f"bench node {index} ({name}): {outcome.failed}", file=sys.stderr)
    return 0 if outcome.ok else 1


def main() -> None:
    import signal

    # Slurm stops a step with SIGTERM (then SIGKILL): stop this node's processes first.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    sys.exit(_agent(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
