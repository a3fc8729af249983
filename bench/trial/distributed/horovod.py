"""``distributed=horovod``: Horovod 0.28.1 (built by `bench setup horovod`), by horovodrun.

Gloo on the CPU (``--gloo``), NCCL on GPUs where Horovod was built with it.  PyTorch: the
session's optimizer becomes ``hvd.DistributedOptimizer`` (gradients all-reduced as the
backward pass produces them); TensorFlow: ``hvd.DistributedGradientTape`` (all-reduced when
the gradients are taken).  Rank 0's parameters and optimizer state are broadcast first.

Exposed communication (``breakdown=true``): PyTorch, a Horovod step minus the same step on a
private copy of the model (no all-reduce; Horovod overlaps part of it with the backward
pass); TensorFlow, the grouped all-reduce of one step's gradients timed alone (the tape
reduces after the backward pass, so none of it overlaps compute).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.core.frameworks import TF, TORCH
from bench.trial.distributed import common
from bench.trial.distributed.base import Proc, Rank

if TYPE_CHECKING:
    from bench.trial.distributed.base import Cluster


def horovodrun() -> list[str]:
    found = shutil.which("horovodrun", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "horovod.runner.launch"]


class Horovod:
    name = "horovod"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        import importlib.util

        problems = []
        if importlib.util.find_spec("horovod") is None:
            problems.append(
                "distributed: horovod is not installed in this environment; run `bench setup "
                "horovod` (it builds Horovod 0.28.1 against this torch and TF, about 13 "
                "minutes on 2 cores, once)"
            )
        if gpu and cfg.workers > gpus:
            problems.append(
                f"workers: horovod on GPUs runs one worker per GPU; {gpus} visible, "
                f"got workers={cfg.workers}"
            )
        if cfg.framework.name == TF:
            from bench.trial.distributed.common import tf_checks

            problems += tf_checks(cfg)
        return problems

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        from bench.trial.distributed.base import collective_timeout_s

        n = cfg.workers
        timeout = str(int(collective_timeout_s(cfg)))
        argv = [
            *horovodrun(), "-np", str(n), "-H", f"localhost:{n}", "--gloo",
            "--gloo-timeout-seconds", timeout, "--network-interfaces", "lo",
            sys.executable, "-m", "bench.trial.distributed.rank", str(workdir),
        ]  # fmt: skip
        env = {**common.loopback_env(), "HOROVOD_GLOO_TIMEOUT_SECONDS": timeout}
        return [Proc("horovodrun", argv, env)]

    def ports_per_node(self, cfg: BenchConfig, node: int) -> int:
        return 1 if node == 0 else 0  # the rendezvous server, on the first node

    def node_processes(
        self, cfg: BenchConfig, workdir: Path, cluster: Cluster, node: int
    ) -> list[Proc]:
        """What horovodrun would start on this node, without its ssh: the ranks with
        Horovod's rendezvous variables, and on the first node the rendezvous server."""
        from bench.trial.distributed.base import collective_timeout_s

        first = cluster.nodes[0]
        port = str(first.ports[0])
        procs = []
        if node == 0:
            names = [n.name for n in cluster.nodes]
            argv = [sys.executable, "-m", "bench.trial.distributed.horovod", port, str(cfg.workers)]
            procs.append(Proc("rendezvous", [*argv, *names], server=True))
        for env in slot_env(cluster, node, cfg.workers):
            env.update(
                HOROVOD_GLOO_RENDEZVOUS_ADDR=first.address,
                HOROVOD_GLOO_RENDEZVOUS_PORT=port,
                HOROVOD_CONTROLLER="gloo",
                HOROVOD_CPU_OPERATIONS="gloo",
                HOROVOD_GLOO_TIMEOUT_SECONDS=str(int(collective_timeout_s(cfg))),
            )
            procs.append(Proc(f"rank{env['HOROVOD_RANK']}", [], env))
        return procs

    def rank(self, cfg: BenchConfig) -> Rank:
        return Rank(int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"]))

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        if cfg.framework.name == TORCH:
            return _torch(adapter, cfg, common.shard(data, rank.index, rank.world))
        return _tf(cfg, data, rank)


def _torch(adapter: Any, cfg: BenchConfig, data: Any) -> Any:
    import horovod.torch as hvd
    import torch

    from bench.trial.distributed import torch_common

    hvd.init()
    gpu = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    torch_common.cuda_device(gpu, hvd.local_rank())
    session = adapter.prepare(cfg, data)
    alone = torch_common.local_step(session)
    session.optimizer = hvd.DistributedOptimizer(
        session.optimizer, named_parameters=session.model.named_parameters()
    )
    hvd.broadcast_parameters(session.model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(session.optimizer, root_rank=0)
    return _TorchSession(session, alone)


class _TorchSession(common.Wrapped):
    def __init__(self, inner: Any, alone: Any) -> None:
        super().__init__(inner)
        self.alone = alone

    def barrier(self) -> None:
        import horovod.torch as hvd
        import torch

        hvd.allreduce(torch.zeros(1), name="bench.window_start")

    def breakdown(self, cfg: BenchConfig) -> dict[str, float]:
        def dist_step() -> None:
            self.inner.step(self.inner.next_batch())
            self.inner.sync()

        out = common.exposed_comm(
            dist_step, lambda: self.alone(self.inner.next_batch()), common.breakdown_pairs(cfg)
        )
        self.inner.take_mean_loss()
        return out


def _tf(cfg: BenchConfig, data: Any, rank: Rank) -> Any:
    import horovod.tensorflow as hvd
    import keras
    import numpy as np
    import tensorflow as tf

    from bench.trial import models
    from bench.trial.distributed.tf_common import make_optimizer, per_replica_dataset

    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    if gpus and cfg.device != "cpu":
        tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")
    keras.mixed_precision.set_global_policy(
        {"bf16": "mixed_bfloat16"}.get(cfg.precision, "float32")
    )
    model = models.build(TF, cfg.model.name, cfg.num_classes, cfg.image_size, cfg.model.source)
    optimizer = make_optimizer(cfg)
    variables = model.trainable_variables
    optimizer.build(variables)
    # Horovod's broadcast_variables expects tf.Variables: Keras 3 keeps them in ``.value``.
    hvd.broadcast_variables([v.value for v in model.variables + optimizer.variables], 0)
    tf_variables = [v.value for v in variables]
    losses = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    decay = cfg.optimizer.weight_decay
    loss_sum = tf.Variable(0.0, trainable=False)

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            loss = losses(y, tf.cast(model(x, training=True), tf.float32))
        tape = hvd.DistributedGradientTape(tape)  # averages the gradients over workers
        grads = tape.gradient(loss, tf_variables)
        if decay:
            grads = [g + decay * v for g, v in zip(grads, variables, strict=True)]
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        loss_sum.assign_add(loss)

    @tf.function
    def all_reduce() -> tf.Tensor:
        reduced = hvd.grouped_allreduce([tf.ones_like(v) for v in variables])
        return tf.add_n([tf.reduce_sum(g) for g in reduced])

    session = _TFSession(
        iter(per_replica_dataset(data, cfg, cfg.batch_size, rank.index, rank.world)),
        train_step,
        all_reduce,
        loss_sum,
    )
    session.device = "cuda:0" if gpus and cfg.device != "cpu" else "cpu"
    session.model = model
    session.num_parameters = int(sum(np.prod(w.shape) for w in variables))
    return session


class _TFSession:
    steps_per_pass = 0

    def __init__(self, batches: Any, train_step: Any, all_reduce: Any, loss_sum: Any) -> None:
        self._batches, self._train_step, self._all_reduce = batches, train_step, all_reduce
        self._loss_sum, self._steps = loss_sum, 0
        self.device = "cpu"
        self.model: Any = None
        self.num_parameters = 0

    def next_batch(self) -> Any:
        return next(self._batches)

    def step(self, batch: Any) -> None:
        self._train_step(*batch)
        self._steps += 1

    def sync(self) -> None:
        if self.device != "cpu":
            import tensorflow as tf

            tf.test.experimental.sync_devices()

    def take_mean_loss(self) -> float | None:
        if not self._steps:
            return None
        mean = float(self._loss_sum.numpy()) / self._steps
        self._loss_sum.assign(0.0)
        self._steps = 0
        return mean

    def barrier(self) -> None:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        hvd.allreduce(tf.zeros(1), name="bench.window_start")

    def evaluate(self) -> tuple[float, float] | None:
        return None

    def peak_device_memory_mb(self) -> float | None:
        return None

    def forward_flops_per_sample(self) -> float | None:
        from bench.trial.models import flops

        count = flops.keras_flops_per_sample(self.model, self.model.input_shape[1])
        return None if count is None else float(count)

    def _one_step(self) -> None:
        self.step(self.next_batch())
        self.sync()

    def breakdown(self, cfg: BenchConfig) -> dict[str, float]:
        pairs = common.breakdown_pairs(cfg)
        step_s = common.timed_alone(self._one_step, pairs)
        comm_s = common.timed_alone(lambda: self._all_reduce(), pairs)
        self.take_mean_loss()
        return {
            metrics.TIME_COMM_MS: 1e3 * comm_s,
            metrics.TIME_STEP_MS: 1e3 * step_s,
            metrics.BREAKDOWN_STEPS: float(pairs),
        }


STRATEGY = Horovod()


def slot_env(cluster: Cluster, node: int, per_node: int) -> list[dict[str, str]]:
    """Horovod's identity variables for node ``node``'s ranks: the same slots as Horovod's
    own host assignment (hosts in order, ``per_node`` slots each)."""
    size, nodes = per_node * cluster.size, cluster.size
    return [
        {
            "HOROVOD_HOSTNAME": cluster.nodes[node].name,
            "HOROVOD_RANK": str(node * per_node + j),
            "HOROVOD_SIZE": str(size),
            "HOROVOD_LOCAL_RANK": str(j),
            "HOROVOD_LOCAL_SIZE": str(per_node),
            "HOROVOD_CROSS_RANK": str(node),
            "HOROVOD_CROSS_SIZE": str(nodes),
        }
        for j in range(per_node)
    ]


def serve_rendezvous(port: int, per_node: int, names: list[str]) -> None:
    """Horovod's Gloo rendezvous server for ``names`` x ``per_node`` slots, on ``port``,
    until stopped: ``python -m bench.trial.distributed.horovod PORT PER_NODE NAME...``."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    from bench.trial.runtime import processes

    processes.die_with_parent()
    hosts = parse_hosts(",".join(f"{n}:{per_node}" for n in names))
    server = RendezvousHTTPServer(("", port), RendezvousHandler, 0)
    server.init(get_host_assignments(hosts, per_node * len(names)))
    server.serve_forever()


if __name__ == "__main__":
    serve_rendezvous(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
