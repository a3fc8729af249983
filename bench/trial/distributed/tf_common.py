"""TensorFlow: a training session under a ``tf.distribute`` strategy (mirrored, multiworker).

The model, optimizer and loss accumulator are made under ``strategy.scope()``; a step is
``strategy.run`` of the per-replica step in one ``tf.function``: each replica computes its
loss over ``batch_size`` samples, scaled by the global batch (``tf.nn.compute_average_loss``),
and the Keras optimizer all-reduces (sums) the gradients across replicas before it applies
them.  Input: each replica gets its own per-replica batches (``distribute_datasets_from_
function``), so ``batch_size`` is per replica as in the PyTorch strategies.

Communication (``breakdown=true``): the all-reduce of one step's gradients (tensors shaped like
the trainable variables) timed alone.  TensorFlow reduces the gradients after the backward
pass, in ``apply_gradients``, so none of it overlaps compute: timed alone, it is the exposed
communication per step.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from bench.core import metrics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.core.config import BenchConfig  # noqa: E402
from bench.core.frameworks import TF  # noqa: E402
from bench.trial import models  # noqa: E402
from bench.trial.data import ArrayBatches, LabelledData  # noqa: E402
from bench.trial.distributed import common  # noqa: E402


def per_replica_dataset(
    data: ArrayBatches | LabelledData, cfg: BenchConfig, per_replica: int, index: int, world: int
) -> tf.data.Dataset:
    """Batches of ``per_replica`` samples: synthetic batches split into per-replica chunks,
    or worker ``index``'s shard of a labelled set through the adapter's pipeline."""
    if isinstance(data, LabelledData):
        from bench.trial.frameworks.tf_adapter import _pipeline

        part = common.shard(data, index, world)
        one = dataclasses.replace(cfg, batch_size=per_replica)
        return _pipeline(part.train_x, part.train_y, part, one, True)
    xs, ys = [], []
    for x, y in zip(data.images, data.labels, strict=True):
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # NCHW -> NHWC
        for start in range(0, len(x), per_replica):
            xs.append(x[start : start + per_replica])
            ys.append(y[start : start + per_replica])
    return tf.data.Dataset.from_tensor_slices((np.stack(xs), np.stack(ys))).repeat()


def make_optimizer(cfg: BenchConfig) -> keras.optimizers.Optimizer:
    """The single-process trial's optimizer (Adam with PyTorch's epsilon included)."""
    from bench.trial.frameworks.tf_adapter import make_optimizer as adapters

    return adapters(cfg)


class StrategySession:
    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        cfg: BenchConfig,
        data: Any,
        per_replica: int,
        index: int,
        world: int,
        gpu: bool,
    ) -> None:
        self.strategy = strategy
        self.device = "cuda:0" if gpu else "cpu"
        self.steps_per_pass = 0
        self.per_replica = per_replica
        self.local_replicas = strategy.num_replicas_in_sync // world
        keras.mixed_precision.set_global_policy(
            {"bf16": "mixed_bfloat16"}.get(cfg.precision, "float32")
        )
        global_batch = per_replica * strategy.num_replicas_in_sync
        with strategy.scope():
            self.model = models.build(
                TF, cfg.model.name, cfg.num_classes, cfg.image_size, cfg.model.source
            )
            self.optimizer = make_optimizer(cfg)
            self.optimizer.build(self.model.trainable_variables)
            self._loss_sum = tf.Variable(0.0, trainable=False)
        self.num_parameters = int(sum(np.prod(w.shape) for w in self.model.trainable_weights))
        ds = per_replica_dataset(data, cfg, per_replica, index, world)
        if isinstance(data, LabelledData):
            self.steps_per_pass = data.steps_per_pass(per_replica * world * self.local_replicas)
        self._iter = iter(strategy.distribute_datasets_from_function(lambda ctx: ds))
        self._steps = self._last_steps = 0
        losses = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        model, optimizer, loss_sum = self.model, self.optimizer, self._loss_sum
        variables, decay = model.trainable_variables, cfg.optimizer.weight_decay

        def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = tf.cast(model(x, training=True), tf.float32)
                loss = tf.nn.compute_average_loss(losses(y, logits), global_batch_size=global_batch)
            grads = tape.gradient(loss, variables)
            if decay:
                grads = [g + decay * v for g, v in zip(grads, variables, strict=True)]
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss

        @tf.function
        def train_step(x: Any, y: Any) -> None:
            per_replica_loss = strategy.run(replica_step, args=(x, y))
            loss_sum.assign_add(
                strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_loss, axis=None)
            )

        @tf.function
        def all_reduce() -> Any:
            def fn() -> Any:
                grads = [tf.ones_like(v) for v in variables]
                reduced = tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, grads
                )
                return tf.add_n([tf.reduce_sum(g) for g in reduced])

            return strategy.run(fn)

        self._train_step, self._all_reduce = train_step, all_reduce

    def next_batch(self) -> Any:
        return next(self._iter)

    def step(self, batch: Any) -> None:
        self._train_step(*batch)
        self._steps += 1

    def sync(self) -> None:
        if self.device != "cpu":
            tf.test.experimental.sync_devices()

    def take_mean_loss(self) -> float | None:
        if not self._steps:
            return None
        mean = float(self._loss_sum.numpy()) / self._steps
        self._loss_sum.assign(0.0)
        self._last_steps, self._steps = self._steps, 0
        return mean

    def epoch_extra(self, elapsed_s: float) -> dict[str, float]:
        """Each local replica's rate: they step in lockstep, so it is the process's rate
        split evenly (only worth logging where one process holds several replicas)."""
        if self.local_replicas < 2:
            return {}
        rate = self._last_steps * self.per_replica / elapsed_s
        return {f"worker{i}_samples_per_s": rate for i in range(self.local_replicas)}

    def evaluate(self) -> tuple[float, float] | None:
        return None  # not measured under a tf.distribute strategy in this version

    def peak_device_memory_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        return float(tf.config.experimental.get_memory_info("GPU:0")["peak"]) / 2**20

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


class WorkerSession(StrategySession):
    """A :class:`StrategySession` of one worker process among several
    (MultiWorkerMirroredStrategy): its timed windows start with a collective."""

    def __init__(self, strategy: tf.distribute.Strategy, *args: Any) -> None:
        super().__init__(strategy, *args)

        @tf.function
        def one() -> Any:
            def fn() -> Any:
                return tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, tf.ones([])
                )

            return strategy.run(fn)

        self._one = one

    def barrier(self) -> None:
        self._one()
