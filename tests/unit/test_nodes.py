"""Across nodes: how node agents meet, and what each strategy starts on each node."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from bench.core.config import BenchConfig, ModelConfig
from bench.trial.distributed import nodes
from bench.trial.distributed.nodes import Cluster, Node
from bench.trial.distributed.registry import load


def cfg_for(framework: str, distributed: str, workers: int, node_count: int, ps: int = 0):
    cfg = BenchConfig(
        model=ModelConfig("lenet5"), distributed=distributed, workers=workers,
        nodes=node_count, ps=ps, device="cpu", timeout_s=60,
    )  # fmt: skip
    cfg.framework.name = framework
    return cfg


TWO = Cluster(
    (Node("n1", "10.0.0.1", (7000, 7001, 7002, 7003)), Node("n2", "10.0.0.2", (8000, 8001)))
)


def test_agents_meet_through_the_shared_folder(tmp_path: Path) -> None:
    def late() -> None:
        time.sleep(0.3)
        nodes.publish(tmp_path, 1, Node("b", "10.0.0.2", (5,)))

    nodes.publish(tmp_path, 0, Node("a", "10.0.0.1", (1, 2)))
    threading.Thread(target=late).start()
    got = nodes.gather(tmp_path, 2, timeout_s=10)
    assert got.nodes == (Node("a", "10.0.0.1", (1, 2)), Node("b", "10.0.0.2", (5,)))
    assert got.endpoints(1) == ["10.0.0.1:1", "10.0.0.2:5"]


def test_a_node_that_never_reports_is_named(tmp_path: Path) -> None:
    nodes.publish(tmp_path, 0, Node("a", "10.0.0.1", ()))
    with pytest.raises(TimeoutError, match=r"node1, node2 did not report within 0.3 s"):
        nodes.gather(tmp_path, 3, timeout_s=0.3)


def test_reserved_ports_are_distinct_and_bindable() -> None:
    import socket

    ports = nodes.reserve_ports(4)
    assert len(set(ports)) == 4
    for port in ports:
        with socket.socket() as s:
            s.bind(("", port))


def test_ddp_runs_one_torchrun_per_node_with_the_first_node_as_master(tmp_path: Path) -> None:
    cfg = cfg_for("torch", "ddp", 2, 2)
    strategy = load("ddp")
    assert [strategy.ports_per_node(cfg, k) for k in (0, 1)] == [1, 0]
    (proc,) = strategy.node_processes(cfg, tmp_path, TWO, 1)
    argv = proc.argv
    for arg in ("--nnodes=2", "--node-rank=1", "--nproc-per-node=2", "--master-addr=10.0.0.1",
                "--master-port=7000", "--rdzv-backend=static"):  # fmt: skip
        assert arg in argv, argv
    assert "GLOO_SOCKET_IFNAME" not in proc.env, "across nodes gloo must not be held to loopback"


def test_multiworker_lists_every_nodes_workers_in_global_rank_order(tmp_path: Path) -> None:
    cfg = cfg_for("tf", "multiworker", 2, 2)
    procs = load("multiworker").node_processes(cfg, tmp_path, TWO, 1)
    assert [p.name for p in procs] == ["rank2", "rank3"]
    spec = json.loads(procs[1].env["TF_CONFIG"])
    assert spec["cluster"]["worker"] == [
        "10.0.0.1:7000", "10.0.0.1:7001", "10.0.0.2:8000", "10.0.0.2:8001",
    ]  # fmt: skip
    assert spec["task"] == {"type": "worker", "index": 3}
    assert procs[1].env["BENCH_WORLD_SIZE"] == "4" and procs[1].env["BENCH_LOCAL_RANK"] == "1"


def test_ps_async_keeps_chief_and_servers_on_the_first_node(tmp_path: Path) -> None:
    cfg = cfg_for("tf", "ps_async", 2, 2, ps=1)
    strategy = load("ps_async")
    assert [strategy.ports_per_node(cfg, k) for k in (0, 1)] == [4, 2]
    first = strategy.node_processes(cfg, tmp_path, TWO, 0)
    second = strategy.node_processes(cfg, tmp_path, TWO, 1)
    assert [p.name for p in first] == ["rank0", "ps0", "worker0", "worker1"]
    assert [p.name for p in second] == ["worker2", "worker3"]
    spec = json.loads(second[0].env["TF_CONFIG"])
    assert spec["cluster"] == {
        "chief": ["10.0.0.1:7000"],
        "ps": ["10.0.0.1:7001"],
        "worker": ["10.0.0.1:7002", "10.0.0.1:7003", "10.0.0.2:8000", "10.0.0.2:8001"],
    }
    assert spec["task"] == {"type": "worker", "index": 2}
    assert strategy.step_batches(cfg) == 4  # one timed step schedules every worker's


def test_jax_distributed_joins_every_node_at_rank_0s_service_on_the_first_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.trial.distributed import jax_distributed as jd

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    cfg = cfg_for("jax", "jax_distributed", 2, 2)
    strategy = load("jax_distributed")
    assert [strategy.ports_per_node(cfg, k) for k in (0, 1)] == [1, 0]
    first = strategy.node_processes(cfg, tmp_path, TWO, 0)
    second = strategy.node_processes(cfg, tmp_path, TWO, 1)
    assert [p.name for p in first + second] == ["rank0", "rank1", "rank2", "rank3"]
    assert {p.env[jd.ENV_COORDINATOR] for p in first + second} == {"10.0.0.1:7000"}
    assert [p.env[jd.ENV_NODE_ADDRESS] for p in first + second] == ["10.0.0.1"] * 2 + [
        "10.0.0.2"
    ] * 2
    env = second[1].env
    assert (env["BENCH_RANK"], env["BENCH_WORLD_SIZE"], env["BENCH_LOCAL_RANK"]) == ("3", "4", "1")
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=1"
    v6 = Cluster((Node("a", "fd00::2", (9000,)), Node("b", "fd00::3", ())))
    assert jd.coordinator_address(v6) == "[fd00::2]:9000"


def test_jax_distributed_names_a_host_name_gloo_would_listen_on_loopback_for() -> None:
    from bench.trial.distributed.jax_distributed import gloo_address_problem

    got = gloo_address_problem("10.0.0.2", ["127.0.1.1", "127.0.1.1"])
    assert got.startswith("distributed=jax_distributed across nodes: this host's name")
    assert "(127.0.1.1)" in got and "reach this node at 10.0.0.2" in got
    assert gloo_address_problem("10.0.0.2", ["127.0.1.1", "10.0.0.2"]) == ""
    assert gloo_address_problem("127.0.0.1", ["127.0.0.1"]) == ""  # nodes on one host
    assert gloo_address_problem("10.0.0.2", ["::1"]) != ""
    assert gloo_address_problem("10.0.0.2", []) == ""  # unresolved: gloo says so itself


def test_horovod_slots_match_horovods_own_host_assignment(tmp_path: Path) -> None:
    cfg = cfg_for("torch", "horovod", 2, 2)
    procs = load("horovod").node_processes(cfg, tmp_path, TWO, 0)
    assert [p.name for p in procs] == ["rendezvous", "rank0", "rank1"]
    assert procs[0].server and procs[0].argv[-4:] == ["7000", "2", "n1", "n2"]
    env = procs[2].env
    assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "10.0.0.1"
    assert env["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "7000"
    from bench.trial.distributed.horovod import slot_env

    ours = [e for k in (0, 1) for e in slot_env(TWO, k, 2)]
    hosts = pytest.importorskip("horovod.runner.common.util.hosts")
    theirs = hosts.get_host_assignments(hosts.parse_hosts("n1:2,n2:2"), 4)
    for mine, slot in zip(ours, theirs, strict=True):
        assert mine == {
            "HOROVOD_HOSTNAME": slot.hostname, "HOROVOD_RANK": str(slot.rank),
            "HOROVOD_SIZE": str(slot.size), "HOROVOD_LOCAL_RANK": str(slot.local_rank),
            "HOROVOD_LOCAL_SIZE": str(slot.local_size),
            "HOROVOD_CROSS_RANK": str(slot.cross_rank),
            "HOROVOD_CROSS_SIZE": str(slot.cross_size),
        }  # fmt: skip


def test_outside_slurm_several_nodes_are_refused_with_the_way_to_get_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        monkeypatch.delenv(var, raising=False)
    cfg = cfg_for("torch", "ddp", 1, 2)
    assert nodes.allocation_problem(cfg) == (
        "nodes: 2 nodes need a Slurm allocation; run the sweep with "
        "hydra/launcher=submitit_slurm, or inside `salloc -N 2` / `sbatch -N 2`"
    )
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    assert nodes.allocation_problem(cfg) == ("nodes: 2 nodes asked for, but Slurm job 77 has 1")


def test_the_step_keeps_the_jobs_cpus_and_gpus_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")
    monkeypatch.setenv("SLURM_GPUS_PER_NODE", "4")
    argv = nodes.step_command(cfg_for("torch", "ddp", 4, 3), tmp_path)
    assert argv[:5] == ["srun", "--overlap", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1"]
    assert "--cpus-per-task=16" in argv and "--gpus-per-node=4" in argv
    assert argv[-3:-1] == ["-m", "bench.trial.distributed.nodes"] and argv[-1] == str(tmp_path)


def test_gloo_uses_the_interface_of_the_published_address_unless_one_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in nodes.INTERFACE_VARS:
        monkeypatch.delenv(var, raising=False)
    assert nodes.interface_of("127.0.0.1") == "lo"
    assert nodes.interface_env("127.0.0.1") == dict.fromkeys(nodes.INTERFACE_VARS, "lo")
    assert nodes.interface_env("198.51.100.7") == {}  # not this host's: left to Gloo
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib0")  # the user's choice stands
    assert "GLOO_SOCKET_IFNAME" not in nodes.interface_env("127.0.0.1")
