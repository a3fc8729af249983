"""MXNet: a hybridized Gluon ``HybridBlock`` trained with ``autograd`` and a ``gluon.Trainer``.

MXNet 1.9.1 lives in its own environment (``.venv-mxnet``, see :mod:`bench.envs.interpreters`);
this module is imported only there.  MXNet's engine is asynchronous on the CPU too: calls
return at once and the work runs on engine threads, so :meth:`MXNetSession.sync` is
``mx.nd.waitall()`` on every device.

Threads: MXNet reads ``OMP_NUM_THREADS`` once, when it is loaded, so
:func:`bench.trial.frameworks.before_import` sets it to the trial's ``threads`` before this module
is imported (intra-op threads); the engine keeps its default of one CPU worker thread
(operators run one at a time, each on all the threads, like PyTorch's eager CPU loop) unless
``inter_threads`` sets ``MXNET_CPU_WORKER_NTHREADS``; ``onednn=on|off`` sets
``MXNET_MKLDNN_ENABLED`` the same way.

Optimizers: ``mx.optimizer.SGD`` (momentum; weight decay as an L2 gradient term) does
PyTorch's arithmetic; so does :class:`TorchAdam`, MXNet's Adam with epsilon where PyTorch
adds it (``python -m bench.parity`` checks both).

Input: synthetic batches live on the device and are cycled; labelled data goes through
``gluon.data.DataLoader`` over an ``ArrayDataset`` of the same uint8 bytes, with
``data.workers`` worker processes converting and normalizing per sample (or an
``ArrayDataset`` of pre-converted samples with ``data.cache=true``).

Data parallelism (``distributed``): ``kvstore_device`` splits each step's batches over
``workers`` devices of this process (GPUs, or CPU contexts) and reduces the gradients with
the ``device`` kvstore; ``kvstore_sync`` / ``kvstore_async`` make this process one worker of
a parameter-server job (``dist_sync`` / ``dist_async``: the servers run the optimizer) whose
scheduler and servers :mod:`bench.trial.distributed.kvstore` started, and this worker trains on
its shard (every ``num_workers``-th sample from its rank) of a labelled training set.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import statistics
import time
from collections.abc import Iterator
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.trial import models
from bench.trial.data import ArrayBatches, LabelledData, SequenceBatches, score
from bench.trial.data.folder import ImageFiles
from bench.trial.models import common

# One batch per context: (inputs, labels), each a list with an NDArray per context.
Batch = tuple[list[mx.nd.NDArray], list[mx.nd.NDArray]]
# Split steps measured after each timed window of a kvstore trial (time_comm_ms, ...).
PROBE_STEPS = 2


def _dist(cfg: BenchConfig) -> bool:
    """Whether the trial trains through a distributed kvstore (scheduler, servers, workers):
    MXNet's own ``dist_*`` types."""
    return cfg.distributed.kvstore.startswith("dist_")


def _gpu_count() -> int:
    try:
        return int(mx.context.num_gpus())
    except mx.base.MXNetError:  # a CPU build
        return 0


def contexts(cfg: BenchConfig) -> list[mx.Context]:
    """The devices this process trains on: one, or ``workers`` with kvstore_device."""
    count = cfg.workers if cfg.distributed.per_device else 1
    gpus = _gpu_count()
    if cfg.device == "cuda" and gpus == 0:
        raise RuntimeError("device: 'cuda' was requested but MXNet sees no GPU")
    if cfg.device == "cpu" or gpus == 0:
        return [mx.cpu(i) for i in range(count)]
    if count > gpus:
        raise RuntimeError(f"workers: kvstore_device with {count} workers needs {count} GPUs")
    if _dist(cfg):  # one GPU per worker process, by local rank
        local = int(os.environ.get("BENCH_LOCAL_RANK", "0"))
        return [mx.gpu(local % gpus)]
    return [mx.gpu(i) for i in range(count)]


def _device_name(ctx: mx.Context) -> str:
    return f"cuda:{ctx.device_id}" if ctx.device_type == "gpu" else "cpu"


class TorchAdam(mx.optimizer.Adam):
    """MXNet's Adam with PyTorch's epsilon: added to the bias-corrected sqrt(v).  MXNet adds
    it before the correction, in effect epsilon / sqrt(1 - beta2^t) (3e-7 at the first step
    instead of 1e-8), which moved lenet5's weights 26% off PyTorch's in 20 steps (many of
    its gradients are that small).  The same fused ``adam_update`` with epsilon scaled by
    sqrt(1 - beta2^t) is PyTorch's update exactly, at the same cost."""

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        correction = math.sqrt(1.0 - self.beta2**t)
        lr *= correction / (1.0 - self.beta1**t)
        kwargs = {
            "beta1": self.beta1,
            "beta2": self.beta2,
            "epsilon": self.epsilon * correction,
            "rescale_grad": self.rescale_grad,
        }
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        mean, var = state
        mx.nd.adam_update(
            weight,
            grad,
            mean,
            var,
            out=weight,
            lazy_update=self.lazy_update,
            lr=lr,
            wd=wd,
            **kwargs,
        )


def _optimizer(cfg: BenchConfig) -> mx.optimizer.Optimizer:
    """The optimizer, with ``rescale_grad`` left at 1: ``gluon.Trainer.step(n)`` sets it to
    ``1/n`` itself (times the value given here), turning the summed per-sample gradients
    into their mean.  Passing ``1/n`` here as well divided every gradient by the batch a
    second time (SGD learnt ~batch-size times slower; Adam, nearly scale-free, hid it)."""
    opt = cfg.optimizer
    if opt.name == "adam":
        return TorchAdam(learning_rate=opt.lr, wd=opt.weight_decay, epsilon=1e-8)
    return mx.optimizer.SGD(learning_rate=opt.lr, momentum=opt.momentum, wd=opt.weight_decay)


def _images(x: np.ndarray, data: LabelledData) -> np.ndarray:
    """uint8 NHWC images -> normalized float32 NCHW, all at once (data.cache=true)."""
    mean = np.asarray(data.mean, np.float32).reshape(1, 3, 1, 1)
    std = np.asarray(data.std, np.float32).reshape(1, 3, 1, 1)
    return ((x.transpose(0, 3, 1, 2).astype(np.float32) / 255.0 - mean) / std).astype(np.float32)


def _loader(
    x: np.ndarray, y: np.ndarray, data: LabelledData, cfg: BenchConfig, batch: int, train: bool
) -> gluon.data.DataLoader:
    labels = mx.nd.array(y, dtype="int64")
    if cfg.data.cache:
        dataset = gluon.data.ArrayDataset(mx.nd.array(_images(x, data)), labels)
    else:
        convert = gluon.data.vision.transforms.Compose(
            [
                gluon.data.vision.transforms.ToTensor(),  # HWC uint8 -> CHW float in [0, 1]
                gluon.data.vision.transforms.Normalize(data.mean, data.std),
            ]
        )
        dataset = gluon.data.ArrayDataset(mx.nd.array(x, dtype="uint8"), labels)
        dataset = dataset.transform_first(convert)
    return gluon.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=train,
        last_batch="discard" if train else "keep",
        num_workers=cfg.data.workers,
    )


def _forever(loader: gluon.data.DataLoader) -> Iterator[tuple[mx.nd.NDArray, mx.nd.NDArray]]:
    while True:
        yield from loader


class MXNetSession:
    def __init__(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> None:
        if isinstance(data, SequenceBatches):
            raise RuntimeError("model: framework=mxnet builds image models only")
        self.cfg = cfg
        self.ctxs = contexts(cfg)
        self.device = _device_name(self.ctxs[0])
        self.training = cfg.mode == "train"
        net = models.build("mxnet", cfg.model.name, cfg.num_classes, cfg.image_size)
        self._image_size = cfg.image_size
        self.num_parameters = common.mxnet_trainable_params(net)
        self._flops_net = net  # counted on the symbol graph, before any device copy matters
        net.collect_params().reset_ctx(self.ctxs)
        # static_alloc/static_shape: the graph's memory and shapes are planned once (on the
        # first call, in the warm-up), MXNet's fastest mode for a fixed input shape.
        net.hybridize(static_alloc=True, static_shape=True)
        self.net = net
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self._losses: list[mx.nd.NDArray] = []
        self.kvstore: Any = None
        self.rank, self.num_workers = 0, 1
        if _dist(cfg):
            self.kvstore = mx.kv.create(cfg.distributed.kvstore)
            self.rank, self.num_workers = self.kvstore.rank, self.kvstore.num_workers
        # Samples whose gradients one optimizer update averages: every device's batch, and
        # in dist_sync every worker's (the servers sum the workers' pushes).
        self.update_batch = cfg.batch_size * len(self.ctxs)
        if cfg.distributed.kvstore == "dist_sync":
            self.update_batch *= self.num_workers
        self.trainer: gluon.Trainer | None = None
        if self.training:
            kvstore: Any = self.kvstore
            if kvstore is None:
                kvstore = "device" if len(self.ctxs) > 1 else None
            self.trainer = gluon.Trainer(
                net.collect_params(),
                _optimizer(cfg),
                kvstore=kvstore,
                # The dist kvstores update on the servers; the device kvstore reduces
                # gradients and the update runs here (so the two can be timed apart).
                update_on_kvstore=True if self.kvstore is not None else False,
            )
        self.steps_per_pass = 0
        self._test: gluon.data.DataLoader | None = None
        self._test_y = np.zeros(0, np.int64)
        self._batches: Iterator[tuple[mx.nd.NDArray, mx.nd.NDArray]]
        per_step = cfg.batch_size * len(self.ctxs)
        if isinstance(data, ImageFiles):  # refused before the trial (bench.checks.config)
            raise ValueError("data=folder: framework=mxnet reads no image folder yet")
        if isinstance(data, LabelledData):
            x, y = data.train_x, data.train_y
            if self.num_workers > 1:  # this worker's shard, the same size on every worker
                size = len(x) // self.num_workers
                x, y = (
                    x[self.rank :: self.num_workers][:size],
                    y[self.rank :: self.num_workers][:size],
                )
            self._batches = _forever(_loader(x, y, data, cfg, per_step, True))
            self.steps_per_pass = len(x) // per_step
            if cfg.data.evaluate:
                self._test = _loader(data.test_x, data.test_y, data, cfg, cfg.batch_size, False)
                self._test_y = data.test_y
            self._resident: list[Batch] | None = None
        else:
            # Synthetic: each step takes one host batch per device, placed there once.
            n = len(self.ctxs)
            resident: list[Batch] = []
            for i in range(len(data)):
                picks = [((i * n + j) % len(data), c) for j, c in enumerate(self.ctxs)]
                xs = [mx.nd.array(data.images[k], ctx=c) for k, c in picks]
                ys = [mx.nd.array(data.labels[k], ctx=c, dtype="int64") for k, c in picks]
                resident.append((xs, ys))
            self._resident = resident
            self._cycle = itertools.cycle(resident)
        mx.nd.waitall()

    def next_batch(self) -> Batch:
        if self._resident is not None:
            return next(self._cycle)
        x, y = next(self._batches)
        return (
            gluon.utils.split_and_load(x, self.ctxs, even_split=False),
            gluon.utils.split_and_load(y, self.ctxs, even_split=False),
        )

    def forward_backward(self, batch: Batch) -> None:
        xs, ys = batch
        with autograd.record():
            losses = [self.loss_fn(self.net(x), y) for x, y in zip(xs, ys, strict=True)]
        autograd.backward(losses)
        self._losses += [loss.mean() for loss in losses]

    def step(self, batch: Batch) -> None:
        if not self.training:
            for x in batch[0]:
                self.net(x)
            return
        assert self.trainer is not None
        self.forward_backward(batch)
        self.trainer.step(self.update_batch)

    def sync(self) -> None:
        mx.nd.waitall()

    def predict(self, x: np.ndarray) -> np.ndarray:
        out = self.net(mx.nd.array(x, ctx=self.ctxs[0]))
        return np.asarray(out.astype("float32").asnumpy())  # asnumpy waits for the engine

    def take_mean_loss(self) -> float | None:
        if not self._losses:
            return None
        mean = float(np.mean([float(loss.asscalar()) for loss in self._losses]))
        self._losses = []
        return mean

    def evaluate(self) -> tuple[float, float] | None:
        if self._test is None:
            return None
        return score(self.test_logits(), self._test_y)

    def test_logits(self) -> np.ndarray:
        if self._test is None:
            raise RuntimeError("test_logits: this session has no held-out split")
        ctx = self.ctxs[0]
        # predict mode: outside autograd.record()
        out = [self.net(x.as_in_context(ctx)).astype("float32").asnumpy() for x, _ in self._test]
        return np.concatenate(out)

    def peak_device_memory_mb(self) -> float | None:
        # MXNet 1.9 exposes no peak-allocation counter (gpu_memory_info is the device's
        # current free/total); the GPU telemetry's gpu_mem_mb covers it.
        return None

    def forward_flops_per_sample(self) -> float | None:
        from bench.trial.models import flops

        return float(flops.mxnet_flops_per_sample(self._flops_net, self._image_size))

    # --- communication, for data-parallel trials -------------------------------------------

    def communicate(self) -> dict[str, float]:
        """After forward_backward and a sync: the rest of a training step, in timed parts
        with a sync after each (seconds).  dist kvstore: ``push`` (the gradients to the
        servers, which sum them over the workers (dist_sync: waiting for all of them) and
        update the weights), then ``pull`` (the new weights); device kvstore: ``comm``
        (gradients reduced over the devices), then ``optimizer``; otherwise ``optimizer``."""
        assert self.trainer is not None
        perf, trainer = time.perf_counter, self.trainer
        t0 = perf()
        if self.kvstore is not None:
            params = trainer._params  # the Trainer's keys are the indices in this list
            for i, param in enumerate(params):
                if param.grad_req != "null":
                    self.kvstore.push(i, param.list_grad(), priority=-i)
            self.sync()
            t1 = perf()
            for i, param in enumerate(params):
                if param.grad_req != "null":
                    self.kvstore.pull(i, param.list_data(), priority=-i)
            self.sync()
            return {"push": t1 - t0, "pull": perf() - t1}
        if len(self.ctxs) > 1:
            trainer.allreduce_grads()
            self.sync()
            t1 = perf()
            trainer.update(self.update_batch)
            self.sync()
            return {"comm": t1 - t0, "optimizer": perf() - t1}
        trainer.step(self.update_batch)
        self.sync()
        return {"optimizer": perf() - t0}

    def after_window(self) -> dict[str, float]:
        """Communication time per step, from PROBE_STEPS split training steps run right after
        an epoch's timed window (outside it); for data-parallel trials only.  dist kvstores
        end with a barrier, so that every worker starts the next window together."""
        if not self.training or (self.kvstore is None and len(self.ctxs) == 1):
            return {}
        parts: dict[str, list[float]] = {}
        for _ in range(PROBE_STEPS):
            self.forward_backward(self.next_batch())
            self.sync()
            for name, seconds in self.communicate().items():
                parts.setdefault(name, []).append(seconds)
        self.take_mean_loss()  # these steps' losses are not the epoch's
        ms = {name: 1e3 * statistics.median(values) for name, values in parts.items()}
        out: dict[str, float] = {
            metrics.WINDOW_COMM_MS: ms.get("push", 0.0) + ms.get("pull", 0.0) + ms.get("comm", 0.0)
        }
        if self.kvstore is not None:
            out[metrics.WINDOW_PS_PUSH_MS], out[metrics.WINDOW_PS_PULL_MS] = ms["push"], ms["pull"]
            self.kvstore._barrier()
        return out


class Adapter:
    name = "mxnet"

    def __init__(self) -> None:
        self.session: MXNetSession | None = None

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        mx.random.seed(cfg.seed)
        np.random.seed(cfg.seed)  # DataLoader's shuffling
        random.seed(cfg.seed)

    def environment(self) -> dict[str, str]:
        features = mx.runtime.Features()
        env = {
            "mxnet_version": mx.__version__,
            "numpy_version": np.__version__,
            "intra_op_threads": os.environ.get("OMP_NUM_THREADS", ""),
            "inter_op_threads": os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1"),
            "onednn": os.environ.get("MXNET_MKLDNN_ENABLED", "default"),
            "mxnet_features": ",".join(
                name for name in ("CUDA", "CUDNN", "NCCL", "MKLDNN", "DIST_KVSTORE")
                if features.is_enabled(name)
            ),
        }  # fmt: skip
        session = self.session
        if session is not None and session.kvstore is not None:
            env["kvstore_rank"] = str(session.rank)
        if session is not None and len(session.ctxs) > 1:
            env["kvstore"] = "device"
            env["kvstore_devices"] = ",".join(str(c) for c in session.ctxs)
        return {k: v for k, v in env.items() if v}

    def prepare(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> MXNetSession:
        self.session = MXNetSession(cfg, data)
        return self.session

    def is_oom(self, exc: BaseException, capped: bool = False) -> bool:
        if isinstance(exc, MemoryError):
            return True
        text = str(exc).lower()
        words: tuple[str, ...] = ("out of memory", "bad_alloc", "cudamalloc")
        if capped:  # the storage manager's own words for a failed host allocation
            words += ("failed to allocate", "cannot allocate memory")
        return isinstance(exc, mx.base.MXNetError) and any(w in text for w in words)
