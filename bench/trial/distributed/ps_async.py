"""``distributed=ps_async``: tf ParameterServerStrategy, TensorFlow's asynchronous mode.

Processes: a coordinator (rank0: it runs the timing loop), ``ps`` parameter servers holding
the variables, and ``workers`` worker servers, all told their place by ``TF_CONFIG``.  One
timed step schedules one training step per worker (``ClusterCoordinator.schedule``) and
waits for them (``join``): each worker pulls the variables, computes its gradients on
``batch_size`` samples and pushes its update to the parameter servers on its own, with no
aggregation (stale reads are possible); the wait at the end of each step is the timing loop's
window edge, so a slow worker delays the step.  Each worker's rate comes from which worker
ran each scheduled step (a per-worker tag in its input pipeline).

``breakdown=true``: ``ps_pull_ms`` (a worker reading every variable from the parameter
servers) and ``ps_push_ms`` (a worker adding a zero update to every variable), each one
scheduled function timed alone minus an empty scheduled function's round trip;
``time_comm_ms`` is their sum.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import metrics
from bench.core.config import BenchConfig, resolved_threads
from bench.core.frameworks import TF
from bench.trial.distributed.base import ENV_RANK, ENV_WORLD, Proc, Rank, env_rank
from bench.trial.distributed.common import tf_config
from bench.trial.runtime.processes import free_port

if TYPE_CHECKING:
    from bench.trial.distributed.nodes import Cluster


class PsAsync:
    name = "ps_async"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        from bench.trial.distributed.common import tf_checks

        problems = tf_checks(cfg)
        if gpu:
            problems.append("device: ps_async runs on the CPU in this version; set device=cpu")
        return problems

    def processes(self, cfg: BenchConfig, workdir: Path) -> list[Proc]:
        def ports(n: int) -> list[str]:
            return [f"127.0.0.1:{free_port()}" for _ in range(n)]

        cluster = {"chief": ports(1), "worker": ports(cfg.workers), "ps": ports(cfg.ps)}
        return self._procs(cfg, cluster, 0)

    def ports_per_node(self, cfg: BenchConfig, node: int) -> int:
        # The chief and the parameter servers run on the first node; workers on every node.
        return (1 + cfg.ps + cfg.workers) if node == 0 else cfg.workers

    def node_processes(
        self, cfg: BenchConfig, workdir: Path, cluster: Cluster, node: int
    ) -> list[Proc]:
        first = cluster.nodes[0]
        head = 1 + cfg.ps
        workers = [
            f"{n.address}:{port}"
            for k, n in enumerate(cluster.nodes)
            for port in n.ports[(head if k == 0 else 0) :][: cfg.workers]
        ]
        spec = {
            "chief": [f"{first.address}:{first.ports[0]}"],
            "ps": [f"{first.address}:{p}" for p in first.ports[1:head]],
            "worker": workers,
        }
        return self._procs(cfg, spec, node)

    def _procs(self, cfg: BenchConfig, cluster: dict[str, list[str]], node: int) -> list[Proc]:
        threads = str(max(1, resolved_threads(cfg) // cfg.workers))
        server = [sys.executable, "-m", "bench.trial.distributed.tf_server"]
        procs = []
        if node == 0:
            chief = {ENV_RANK: "0", ENV_WORLD: "1", "TF_CONFIG": tf_config(cluster, "chief", 0)}
            procs.append(Proc("rank0", [], chief))
            for i in range(cfg.ps):
                env = {"TF_CONFIG": tf_config(cluster, "ps", i), "BENCH_THREADS": threads}
                procs.append(Proc(f"ps{i}", server, env, server=True))
        for j in range(cfg.workers):
            i = node * cfg.workers + j
            env = {"TF_CONFIG": tf_config(cluster, "worker", i), "BENCH_THREADS": threads}
            procs.append(Proc(f"worker{i}", server, env, server=True))
        return procs

    def timed_ranks(self, cfg: BenchConfig) -> int:
        return 1

    def step_batches(self, cfg: BenchConfig) -> int:
        return cfg.workers * cfg.nodes

    def rank(self, cfg: BenchConfig) -> Rank:
        return env_rank()

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
        workers = cfg.workers * cfg.nodes  # this process's batch_size covers all of them
        return _Session(cfg, data, cfg.batch_size // workers, workers)


class _Session:
    steps_per_pass = 0
    device = "cpu"

    def __init__(self, cfg: BenchConfig, data: Any, per_worker: int, workers: int) -> None:
        import keras
        import numpy as np
        import tensorflow as tf

        from bench.trial import models
        from bench.trial.distributed.tf_common import make_optimizer, per_replica_dataset

        self.per_worker, self.workers = per_worker, workers
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model = models.build(
                TF, cfg.model.name, cfg.num_classes, cfg.image_size, cfg.model.source
            )
            optimizer = make_optimizer(cfg)
            variables = model.trainable_variables
            optimizer.build(variables)
            loss_sum = tf.Variable(0.0, trainable=False)
        self.model, self._loss_sum = model, loss_sum
        self.num_parameters = int(sum(np.prod(w.shape) for w in variables))
        tf.random.set_seed(None)  # an unseeded tag, drawn anew by each worker's iterator

        def dataset_fn() -> tf.data.Dataset:
            # Made here, on each worker: a dataset made outside cannot be sent to one.
            ds = per_replica_dataset(data, cfg, per_worker, 0, 1)
            tag = tf.data.Dataset.random().take(1).cache().repeat()
            return tf.data.Dataset.zip((ds, tag))

        self._iter = iter(self.coordinator.create_per_worker_dataset(dataset_fn))
        losses = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        decay = cfg.optimizer.weight_decay

        def replica_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                loss = losses(y, tf.cast(model(x, training=True), tf.float32))
            grads = tape.gradient(loss, variables)
            if decay:
                grads = [g + decay * v for g, v in zip(grads, variables, strict=True)]
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            loss_sum.assign_add(loss)

        @tf.function
        def train(iterator: Any) -> tf.Tensor:
            (x, y), tag = next(iterator)
            strategy.run(replica_step, args=(x, y))  # a replica context, as Keras needs
            return tag

        @tf.function
        def pull() -> tf.Tensor:
            return tf.add_n([tf.reduce_sum(v) for v in variables])

        @tf.function
        def push() -> None:
            for v in variables:
                v.assign_add(tf.zeros(v.shape, v.dtype))

        @tf.function
        def noop() -> tf.Tensor:
            return tf.constant(0.0)

        self._train, self._pull, self._push, self._noop = train, pull, push, noop
        self._pending: list[Any] = []
        self._last: list[Any] = []
        self._tags: dict[int, int] = {}  # a worker's tag -> its index, in order of appearance

    def next_batch(self) -> None:
        return None  # each worker reads its own input pipeline

    def step(self, batch: Any) -> None:
        for _ in range(self.workers):
            self._pending.append(self.coordinator.schedule(self._train, args=(self._iter,)))

    def sync(self) -> None:
        self.coordinator.join()

    def take_mean_loss(self) -> float | None:
        self.coordinator.join()
        if not self._pending:
            return None
        mean = float(self._loss_sum.numpy()) / len(self._pending)
        self._loss_sum.assign(0.0)
        self._last, self._pending = self._pending, []
        return mean

    def epoch_extra(self, elapsed_s: float) -> dict[str, float]:
        counts = [0] * self.workers
        for remote in self._last:
            tag = int(remote.fetch())
            index = self._tags.setdefault(tag, len(self._tags))
            if index < self.workers:
                counts[index] += 1
        return {
            f"worker{i}_samples_per_s": n * self.per_worker / elapsed_s
            for i, n in enumerate(counts)
        }

    def evaluate(self) -> tuple[float, float] | None:
        return None

    def peak_device_memory_mb(self) -> float | None:
        return None

    def forward_flops_per_sample(self) -> float | None:
        return None  # the model's variables live on the parameter servers

    def _round_trip(self, fn: Any) -> Any:
        def call() -> None:
            self.coordinator.schedule(fn)
            self.coordinator.join()

        return call

    def breakdown(self, cfg: BenchConfig) -> dict[str, float]:
        from bench.trial.distributed import common

        pairs = common.breakdown_pairs(cfg)
        empty = common.timed_alone(self._round_trip(self._noop), pairs)
        pull = common.timed_alone(self._round_trip(self._pull), pairs)
        push = common.timed_alone(self._round_trip(self._push), pairs)

        def one_step() -> None:
            self.coordinator.schedule(self._train, args=(self._iter,))
            self.coordinator.join()

        step = common.timed_alone(one_step, pairs)
        self.take_mean_loss()
        out: dict[str, float] = {
            metrics.PS_PULL_MS: 1e3 * max(0.0, pull - empty),
            metrics.PS_PUSH_MS: 1e3 * max(0.0, push - empty),
            metrics.TIME_STEP_MS: 1e3 * step,
            metrics.BREAKDOWN_STEPS: float(pairs),
        }
        out[metrics.TIME_COMM_MS] = out[metrics.PS_PULL_MS] + out[metrics.PS_PUSH_MS]
        return out


STRATEGY = PsAsync()
