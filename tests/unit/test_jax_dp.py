"""distributed=jax_dp and jax_distributed (issue 35): the rank processes are started with
XLA's host devices asked for in XLA_FLAGS (the user's other flags kept; jax_distributed: one
each, and rank 0's coordination address), and the jax session's sharded step, on 2 host
devices in a child process, keeps its state replicated, shards each batch and trains as the
undistributed session at the same global batch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.core.config import BenchConfig
from bench.core.strategies.jax_distributed import JaxDistributedConfig
from bench.core.strategies.jax_dp import JaxDataParallelConfig
from bench.trial.distributed import jax_common, jax_distributed, jax_dp
from bench.trial.distributed.base import ENV_RANK, ENV_WORLD


def test_the_host_device_count_replaces_its_own_flag_and_keeps_the_rest() -> None:
    flags = jax_common.host_device_flags(
        "--xla_dump_to=/tmp/x xla_force_host_platform_device_count=8", 2
    )
    assert flags.split() == ["--xla_dump_to=/tmp/x", "--xla_force_host_platform_device_count=2"]
    assert jax_common.host_device_flags("", 3) == "--xla_force_host_platform_device_count=3"


def test_one_rank_process_asks_for_workers_host_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    cfg = BenchConfig(distributed=JaxDataParallelConfig(), workers=4)
    (proc,) = jax_dp.STRATEGY.processes(cfg, tmp_path)
    assert proc.env[ENV_RANK] == "0" and proc.env[ENV_WORLD] == "1"
    assert proc.env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=4"
    assert jax_dp.STRATEGY.step_batches(cfg) == 4  # one step: every device's batch


def test_jax_distributed_starts_a_process_per_worker_joined_at_one_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    cfg = BenchConfig(distributed=JaxDistributedConfig(), workers=3)
    procs = jax_distributed.STRATEGY.processes(cfg, tmp_path)
    assert [(p.env[ENV_RANK], p.env[ENV_WORLD]) for p in procs] == [("0", "3"), ("1", "3"),
                                                                    ("2", "3")]  # fmt: skip
    (address,) = {p.env[jax_distributed.ENV_COORDINATOR] for p in procs}
    host, port = address.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert {p.env["XLA_FLAGS"] for p in procs} == {"--xla_force_host_platform_device_count=1"}


def test_on_gpus_every_worker_needs_a_gpu() -> None:
    cfg = BenchConfig(distributed=JaxDataParallelConfig(), workers=4)
    (got,) = jax_dp.STRATEGY.check(cfg, gpu=True, gpus=2)
    assert got.startswith("workers: jax_dp on GPUs") and "2 visible, got workers=4" in got
    assert jax_dp.STRATEGY.check(cfg, gpu=False, gpus=0) == []


SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    from bench.trial import frameworks
    from bench.core.config import (
        BenchConfig, DataConfig, FrameworkConfig, ModelConfig, OptimizerConfig,
    )
    from bench.trial.data import synthetic

    cfg = BenchConfig(
        framework=FrameworkConfig(name="jax"), model=ModelConfig(name="lenet5"),
        batch_size=8, image_size=32, data=DataConfig(num_batches=2), device="cpu",
        optimizer=OptimizerConfig(name="sgd", lr=0.05, momentum=0.9),
    )
    frameworks.before_import(cfg, 1)
    adapter = frameworks.load("jax")
    adapter.configure(cfg, 1)
    import jax, numpy as np

    def trained(shard):
        adapter.configure(cfg, 1)  # seeded again: the same initial weights
        session = adapter.prepare(cfg, synthetic(cfg))
        if shard:
            session.data_parallel(jax.devices("cpu")[:2])
        batch = session.next_batch()
        for _ in range(4):
            session.step(session.next_batch())
        session.sync()
        return session, batch, session.take_mean_loss()

    one, _, loss_one = trained(False)
    two, batch, loss_two = trained(True)
    weights = two.net.trainable
    print(json.dumps({
        "devices": len(jax.devices("cpu")),
        "batch": [sorted(d.id for d in a.sharding.device_set) for a in batch],
        "batch_shards": [[s.data.shape[0] for s in a.addressable_shards] for a in batch],
        "state": sorted(d.id for d in weights[0].sharding.device_set),
        "replicated": all(a.sharding.is_fully_replicated for a in weights),
        "losses": [loss_one, loss_two],
        "apart": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                     for a, b in zip(one.net.trainable, weights)),
    }))
    """
)


@pytest.mark.slow
def test_the_sharded_step_replicates_the_state_and_trains_as_one_device() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2
    assert out["batch"] == [[0, 1], [0, 1]] and out["batch_shards"] == [[4, 4], [4, 4]]
    assert out["state"] == [0, 1] and out["replicated"]
    one, two = out["losses"]
    assert abs(one - two) < 1e-5 * abs(one), out["losses"]
    assert out["apart"] < 1e-5, out["apart"]


LOCAL_STEP = textwrap.dedent(
    """
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    from bench.trial import frameworks
    from bench.core.config import BenchConfig, DataConfig, FrameworkConfig, ModelConfig
    from bench.trial.data import synthetic
    from bench.trial.distributed.jax_common import exposed_comm

    cfg = BenchConfig(
        framework=FrameworkConfig(name="jax"), model=ModelConfig("lenet5", source=sys.argv[1]),
        batch_size=8, image_size=32, data=DataConfig(num_batches=2), device="cpu",
        steps_per_epoch=5, breakdown=True,
    )
    frameworks.before_import(cfg, 1)
    adapter = frameworks.load("jax")
    adapter.configure(cfg, 1)
    import jax, numpy as np

    session = adapter.prepare(cfg, synthetic(cfg))
    session.data_parallel(jax.devices("cpu")[:2])
    before = [np.asarray(a) for a in jax.tree.leaves(session.net.trainable)]
    local = session.local_step()
    batch = session.next_batch()
    local(batch)
    local(session.next_batch())
    copies = [[np.asarray(s.data) for s in a.addressable_shards]
              for a in jax.tree.leaves(local.state[0])]
    net = session.net
    state = (net.trainable, net.non_trainable, session._opt_state, session._loss_sum)
    hlo = {
        "sharded": session._train_step.lower(*state, *batch).compile().as_text(),
        "local": local.step.lower(*local.state, *batch).compile().as_text(),
    }
    print(json.dumps({
        "untouched": all(np.array_equal(a, np.asarray(b))
                         for a, b in zip(before, jax.tree.leaves(session.net.trainable))),
        "devices_apart": max(float(np.max(np.abs(c[0] - c[1]))) for c in copies),
        "all_reduce": {k: "all-reduce" in v for k, v in hlo.items()},
        "comm": exposed_comm(session, cfg),
        "loss_steps": session._loss_steps,
    }))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["bench", "flax"])
def test_the_local_step_runs_the_sharded_step_without_its_all_reduces(source: str) -> None:
    """time_comm_ms for the jax strategies: the step it is timed against is the same step on
    the same devices with no collective in its compiled program (the sharded step has
    them), trains a private copy (the session's weights untouched, each device's copy
    apart from the other's: nothing averaged them), and exposed_comm reports both times;
    the Keras model on JAX and the Flax one."""
    done = subprocess.run(
        [sys.executable, "-c", LOCAL_STEP, source], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["all_reduce"] == {"sharded": True, "local": False}
    assert out["untouched"]
    assert out["devices_apart"] > 0
    comm = out["comm"]
    assert set(comm) == {"time_comm_ms", "time_local_step_ms"}
    assert comm["time_comm_ms"] >= 0 and comm["time_local_step_ms"] > 0
    assert out["loss_steps"] == 0  # the extra steps' losses are not reported
