"""JAX: bench's Keras models (the TF side's ``build_keras`` builders) on Keras' JAX backend,
trained with a jitted, stateless step (``model.stateless_call``, the optimizer's
``stateless_apply``, ``jax.value_and_grad``, the state's buffers donated); inference is a
jitted ``stateless_call`` likewise.  With ``model.source=flax`` the zoo's Flax NNX models
(``build_flax``) run in the same step, split into graph and state (``nnx.split``, merged
inside the jitted step), with PyTorch's optimizer arithmetic written in jax.numpy
(:mod:`.jax_optim`).  The always-jitted step is the idiomatic JAX loop, so ``compile``
changes nothing here.

Keras picks its backend when first imported: ``KERAS_BACKEND=jax`` is set before this
module imports it, and a process that already holds Keras on another backend is refused
(hence no ``launcher=inline``).  Optimizer arithmetic is PyTorch's, as on the TF side:
weight decay an L2 term added to the gradient, Adam's epsilon added to the bias-corrected
sqrt(v).  Input: the same bytes as the TF side (NHWC).  JAX dispatches asynchronously, on
the CPU too: :meth:`JaxSession.sync` blocks on the state (``block_until_ready``).

Threads: XLA's CPU client sizes its Eigen pool (the intra-op threads) from ``NPROC``, and
Eigen's multi-threading is off for one thread (``XLA_FLAGS``), both set by
:func:`bench.trial.frameworks.before_import` before JAX loads.  The pool has at least one thread
per device (``distributed=jax_dp``'s host devices share it).  JAX has no inter-op setting: XLA
runs one compiled program's operations itself, so ``inter_threads`` has no effect here.
Out of memory is XLA's allocator's ``RESOURCE_EXHAUSTED``.  FLOPs: the zoo's count
(contractions only) on the traced forward (:func:`bench.trial.models.flops.jax_forward_flops`).

Sequence models (lstm, transformer, bert_base, deepspeech2): the TF side's Keras builders,
or with ``model.source=flax`` the Flax NNX transformer, in the same step, on the same
synthetic arrays as the other frameworks (integers as int32: JAX has no int64 unless
``jax_enable_x64``) with the same losses: the Keras models the TF side's (Keras'
cross-entropy over the positions that have a target; CTC, ``keras.ops.ctc_loss``, over
each label's length, averaged), the Flax model PyTorch's cross-entropy with its ignore
index.  Their FLOPs are counted too (the recurrent layers' ``lax.scan`` bodies times their
length), where torch and tf count none for them.  Not yet: fp16 (loss scaling), sequence
models under jax_distributed (both refused before any trial; jax_dp shards their batches).
"""

from __future__ import annotations

import itertools
import os
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any

if "keras" in sys.modules and sys.modules["keras"].backend.backend() != "jax":
    raise RuntimeError(
        "framework=jax: this process already imported Keras on the "
        f"{sys.modules['keras'].backend.backend()} backend; a jax trial needs a process of its own"
    )
os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from bench.core.config import BenchConfig  # noqa: E402
from bench.trial import models  # noqa: E402
from bench.trial.data import (  # noqa: E402
    IGNORE_INDEX,
    ArrayBatches,
    LabelledData,
    SequenceBatches,
    folder,
    score,
)
from bench.trial.data.folder import ImageFiles  # noqa: E402
from bench.trial.frameworks.keras_optim import make_optimizer  # noqa: E402

# (inputs, targets): targets are a label array, or a tuple of arrays for sequence models.
Batch = tuple[Any, Any]
_POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16"}


def _device(requested: str) -> Any:
    """This process's device (its own first one: under ``jax.distributed`` the global
    device list starts with process 0's)."""
    gpus = [d for d in jax.local_devices() if d.platform == "gpu"]
    if requested == "cuda" and not gpus:
        raise RuntimeError("device: 'cuda' was requested but JAX sees no GPU")
    return gpus[0] if gpus and requested != "cpu" else jax.local_devices(backend="cpu")[0]


def _labelled(
    x: np.ndarray, y: np.ndarray, data: LabelledData, cfg: BenchConfig, train: bool
) -> Iterator[Batch]:
    """Batches of a labelled split, converted on the host as the TF side's pipeline does
    (x / 255 - mean) / std, NHWC; training shuffles each pass with the trial's seed."""
    rng = np.random.default_rng(cfg.seed)
    mean, std = np.asarray(data.mean, np.float32), np.asarray(data.std, np.float32)
    n, size = len(x), cfg.batch_size
    while True:
        order = rng.permutation(n) if train else np.arange(n)
        stop = n - n % size if train else n
        for start in range(0, stop, size):
            index = order[start : start + size]
            images = (x[index].astype(np.float32) / 255.0 - mean) / std
            yield jnp.asarray(images), jnp.asarray(y[index])
        if not train:
            return


def _sequence_batches(data: SequenceBatches) -> list[Batch]:
    """The sequence batches on the device, the same arrays as the other frameworks': integers
    as int32 (JAX has no int64 without ``jax_enable_x64``; token ids, labels and lengths fit)."""

    def put(a: np.ndarray) -> Any:
        return jax.device_put(a.astype(np.int32) if a.dtype == np.int64 else a)

    return [
        (put(x), tuple(put(t) for t in targets))
        for x, targets in zip(data.inputs, data.targets, strict=True)
    ]


def _keras_sequence_loss(task: str) -> Any:
    """loss(targets, logits) of a sequence task for the Keras models, the TF side's arithmetic
    (:func:`bench.trial.frameworks.tf_adapter._sequence_loss`) in ``keras.ops``."""
    if task == "ctc":

        def ctc(targets: tuple[Any, ...], logits: Any) -> Any:
            """CTC (blank 0): each sequence's loss over its label length, averaged."""
            labels, label_lengths, frames = targets
            losses = keras.ops.ctc_loss(
                labels, logits.astype(jnp.float32), label_lengths, frames, mask_index=0
            )
            return jnp.mean(losses / label_lengths.astype(jnp.float32))

        return ctc
    # Mean over the positions that have a target (causal_lm, masked_lm).
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=IGNORE_INDEX
    )

    def tokens(targets: tuple[Any, ...], logits: Any) -> Any:
        return cross_entropy(targets[0], logits)

    return tokens


def _torch_token_loss(targets: tuple[Any, ...], logits: Any) -> Any:
    """PyTorch's ``cross_entropy(..., ignore_index=IGNORE_INDEX)``: the mean over the
    positions that have a target (causal_lm, masked_lm), for the Flax models."""
    target = targets[0].astype(jnp.int32)
    keep = target != IGNORE_INDEX
    log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(log_p, jnp.where(keep, target, 0)[..., None], axis=-1)
    return -jnp.sum(jnp.where(keep, picked[..., 0], 0.0)) / jnp.sum(keep)


class _KerasModel:
    """bench's Keras model (model.source=bench), stepped through Keras' stateless API:
    ``stateless_call`` and the optimizer's ``stateless_apply`` (PyTorch's arithmetic,
    :mod:`.keras_optim`); random state (seed generators' variables) is among the
    non-trainable variables, carried through the call and returned updated."""

    def __init__(self, cfg: BenchConfig, task: str) -> None:
        self.loss_fn: Any
        if task == "image":
            self.model = models.build_image("jax", cfg.model, cfg.num_classes, cfg.image_size)
            self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        else:
            self.model = models.build_sequence("jax", cfg.model)
            self.loss_fn = _keras_sequence_loss(task)
        self.num_parameters = int(sum(np.prod(w.shape) for w in self.model.trainable_weights))
        self.trainable: Any = [v.value for v in self.model.trainable_variables]
        self.non_trainable: Any = [v.value for v in self.model.non_trainable_variables]

    def forward(self, trainable: Any, non_trainable: Any, x: Any, training: bool) -> Any:
        return self.model.stateless_call(trainable, non_trainable, x, training=training)

    def loss(self, y: Any, logits: Any) -> Any:
        return self.loss_fn(y, logits)

    def optimizer(self, cfg: BenchConfig) -> tuple[Any, Any]:
        """The optimizer's initial state and its update(state, grads, params)."""
        optimizer = make_optimizer(cfg)
        optimizer.build(self.model.trainable_variables)

        def update(state: Any, grads: Any, params: Any) -> tuple[Any, Any]:
            params, state = optimizer.stateless_apply(state, grads, params)
            return params, state

        return [v.value for v in optimizer.variables], update

    def to_model(self) -> None:
        for variable, value in zip(self.model.trainable_variables, self.trainable, strict=True):
            variable.assign(value)
        pairs = zip(self.model.non_trainable_variables, self.non_trainable, strict=True)
        for variable, value in pairs:
            variable.assign(value)

    def from_model(self) -> None:
        self.trainable = [jnp.array(v.value) for v in self.model.trainable_variables]
        self.non_trainable = [jnp.array(v.value) for v in self.model.non_trainable_variables]


class _FlaxModel:
    """The zoo's Flax NNX model (model.source=flax), stepped as NNX's functional API does:
    ``nnx.split`` into a static graph and its state (``nnx.Param``, the weights the
    optimizer trains; the rest: BatchNorm's running statistics and any RNG state, carried
    through the step and returned updated), ``nnx.merge`` inside the jitted step.  Training
    and inference are two graphs (BatchNorm's ``use_running_average`` is static).  Optimizer:
    PyTorch's arithmetic in jax.numpy (:mod:`.jax_optim`); loss: PyTorch's cross-entropy
    (log-softmax, mean over the batch; for the transformer, over the masked positions)."""

    def __init__(self, cfg: BenchConfig, task: str) -> None:
        from flax import nnx

        from bench.trial.models import common

        self._nnx = nnx
        self._image = task == "image"
        if self._image:
            self.model = models.build_image(
                "jax", cfg.model, cfg.num_classes, cfg.image_size, seed=cfg.seed
            )
        else:  # the transformer (masked_lm): the only sequence model Flax builds
            self.model = models.build_sequence("jax", cfg.model, seed=cfg.seed)
        self.num_parameters = common.flax_params(self.model)
        self.model.eval()
        self._eval_graph = nnx.graphdef(self.model)
        self.model.train()
        parts: Any = nnx.split(self.model, nnx.Param, ...)
        self._train_graph: Any = parts[0]
        self.trainable: Any = parts[1]
        self.non_trainable: Any = parts[2]

    def forward(self, trainable: Any, non_trainable: Any, x: Any, training: bool) -> Any:
        nnx = self._nnx
        graph = self._train_graph if training else self._eval_graph
        # copy: Variables of their own, made at this trace's level (inside the gradient's),
        # which BatchNorm's update may mutate; the state's own are the jitted step's inputs.
        model = nnx.merge(graph, trainable, non_trainable, copy=True)
        logits = model(x)
        return logits, nnx.state(model, nnx.Not(nnx.Param))

    def loss(self, y: Any, logits: Any) -> Any:
        if not self._image:
            return _torch_token_loss(y, logits)
        log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        picked = jnp.take_along_axis(log_p, y.astype(jnp.int32)[:, None], axis=1)
        return -jnp.mean(picked)

    def optimizer(self, cfg: BenchConfig) -> tuple[Any, Any]:
        from bench.trial.frameworks.jax_optim import make_optimizer as make_jax_optimizer

        optimizer = make_jax_optimizer(cfg)
        return optimizer.init(self.trainable), optimizer.update

    def to_model(self) -> None:
        self._nnx.update(self.model, self.trainable, self.non_trainable)

    def from_model(self) -> None:
        parts: Any = self._nnx.split(self.model, self._nnx.Param, ...)
        self.trainable = jax.tree.map(jnp.array, parts[1])
        self.non_trainable = jax.tree.map(jnp.array, parts[2])


class _LocalStep:
    """:meth:`JaxSession.local_step`: a step on its own ``state`` (trainable, non-trainable,
    optimizer state, loss sum), waited for."""

    def __init__(self, step: Callable[..., Any], state: tuple[Any, ...]) -> None:
        self.step, self.state = step, state

    def __call__(self, batch: Batch) -> None:
        self.state = jax.block_until_ready(self.step(*self.state, *batch))


class JaxSession:
    def __init__(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> None:
        task = models.task(cfg.model)
        self.jax_device = _device(cfg.device)
        self.device = "cpu" if self.jax_device.platform == "cpu" else "cuda:0"
        self.training = cfg.mode == "train"
        self.steps_per_pass = 0
        self.source = cfg.model.source
        self._cfg, self._data = cfg, data
        # distributed=jax_dp's shardings of the state and of each batch (data_parallel).
        self._replicated: Any = None
        self._sharded: Any = None
        self._fixed: list[Batch] | None = None  # synthetic data: the batches cycled through
        self._sample: Any = None  # a sequence model's one-sample input (zeros), for FLOPs
        keras.mixed_precision.set_global_policy(_POLICIES[cfg.precision])
        with jax.default_device(self.jax_device):
            self.net = _FlaxModel(cfg, task) if self.source == "flax" else _KerasModel(cfg, task)
            self.model = self.net.model
            self.num_parameters = self.net.num_parameters
            self._batches: Iterator[Batch]
            if isinstance(data, LabelledData):
                self._batches = _labelled(data.train_x, data.train_y, data, cfg, True)
                self.steps_per_pass = data.steps_per_pass(cfg.batch_size)
            elif isinstance(data, ImageFiles):  # bench's loader: jax has no pipeline of its own
                train = folder.batches(data, cfg.seed, cfg.batch_size, True, cfg.data.workers)
                self._batches = ((jnp.asarray(x), jnp.asarray(y)) for x, y in train)
                self.steps_per_pass = data.steps_per_pass(cfg.batch_size)
            elif isinstance(data, SequenceBatches):  # the same arrays as the other frameworks'
                self._fixed = _sequence_batches(data)
                self._batches = itertools.cycle(self._fixed)
                x = self._fixed[0][0]
                self._sample = jnp.zeros((1, *x.shape[1:]), x.dtype)
            else:  # the TF side's bytes: NHWC
                self._fixed = [
                    (
                        jax.device_put(np.ascontiguousarray(x.transpose(0, 2, 3, 1))),
                        jax.device_put(y),
                    )
                    for x, y in zip(data.images, data.labels, strict=True)
                ]
                self._batches = itertools.cycle(self._fixed)
            self._loss_sum = jnp.zeros((), jnp.float32)
            self._loss_steps = 0
            self._out: Any = None
            if self.training:
                self._make_train_step(cfg)
            else:
                self._make_infer_step()
            self._eval_fn = self._make_eval_step()

    def _make_train_step(self, cfg: BenchConfig) -> None:
        self._opt_state, self._update = self.net.optimizer(cfg)
        self._jit_train_step(cfg)

    def _jit_train_step(self, cfg: BenchConfig) -> None:
        """The jitted step; with ``data_parallel``'s shardings as its in/out shardings."""
        net, decay, update = self.net, cfg.optimizer.weight_decay, self._update
        shardings: dict[str, Any] = {}
        if self._replicated is not None:
            rep, part = self._replicated, self._sharded
            shardings = {"in_shardings": (rep, rep, rep, rep, part, part), "out_shardings": rep}

        def objective(trainable: Any, non_trainable: Any, x: Any, y: Any) -> Any:
            logits, non_trainable = net.forward(trainable, non_trainable, x, True)
            return net.loss(y, logits), non_trainable

        grad_fn = jax.value_and_grad(objective, has_aux=True)

        def train_step(
            trainable: Any, non_trainable: Any, opt_state: Any, loss_sum: Any, x: Any, y: Any
        ) -> tuple[Any, Any, Any, Any]:
            (loss, non_trainable), grads = grad_fn(trainable, non_trainable, x, y)
            if decay:
                grads = jax.tree.map(lambda g, v: g + decay * v, grads, trainable)
            trainable, opt_state = update(opt_state, grads, trainable)
            return trainable, non_trainable, opt_state, loss_sum + loss.astype(jnp.float32)

        self._step_fn = train_step  # not jitted: local_step maps it over the devices
        self._train_step = jax.jit(train_step, donate_argnums=(0, 1, 2, 3), **shardings)

    def data_parallel(self, devices: list[Any]) -> None:
        """Train data-parallel over ``devices``, before the first step: a one-axis Mesh
        (``batch``) over them, each batch sharded along it, the state (weights,
        non-trainable variables, optimizer state, loss sum) replicated on every device, and
        the same jitted step with these as its in/out shardings, so XLA partitions it and
        inserts the all-reduces: of the gradients, and of BatchNorm's batch statistics,
        which are the global batch's as in the undistributed step.  A sequence model's
        targets (a tuple: labels, and CTC's label lengths and frames) are sharded as its
        inputs, along the batch axis (the sharding is the step's argument's pytree prefix),
        and its loss, a mean over the global batch's positions, is the undistributed one.
        ``distributed=jax_dp``: this process's devices; ``jax_distributed``: every
        process's, this process's batches its share of the global batch."""
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        if not self.training:
            raise ValueError("distributed=jax_dp: a training session only")
        mesh = Mesh(np.array(devices), ("batch",))
        self._replicated = NamedSharding(mesh, PartitionSpec())
        self._sharded = NamedSharding(mesh, PartitionSpec("batch"))
        self._place_state()
        if self._fixed is not None:
            self._fixed = [self._place_batch(b) for b in self._fixed]
            self._batches = itertools.cycle(self._fixed)
        else:
            self._batches = map(self._place_batch, self._batches)
        self._jit_train_step(self._cfg)

    def local_step(self) -> Callable[[Batch], None]:
        """``data_parallel``'s step with no communication, to time against it
        (``time_comm_ms``): the same step on every device of the mesh, each on its own
        shard of the batch from its own copy of the state, nothing reduced across devices
        (``jax.shard_map`` of the step, whose outputs are taken as they are: no
        collective).  It trains a private copy of the state, made here and donated step by
        step as the real step donates the session's, so the session is untouched; the
        devices' copies drift apart, which the timing does not mind."""
        from jax.sharding import PartitionSpec

        if self._replicated is None:
            raise ValueError("local_step: a data-parallel session only (data_parallel first)")
        rep, part = PartitionSpec(), PartitionSpec("batch")
        alone = jax.shard_map(
            self._step_fn,
            mesh=self._sharded.mesh,
            in_specs=(rep, rep, rep, rep, part, part),
            out_specs=rep,
            check_vma=False,
        )
        copy = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree), out_shardings=self._replicated)
        net = self.net
        state = copy((net.trainable, net.non_trainable, self._opt_state, self._loss_sum))
        return _LocalStep(jax.jit(alone, donate_argnums=(0, 1, 2, 3)), state)

    def _place_batch(self, batch: Batch) -> Batch:
        """This process's batch as its share of the global, sharded batch: every array of it
        (the inputs, and the labels or a sequence model's targets tuple) split along its
        first axis, the batch's."""
        return jax.tree.map(
            lambda a: jax.make_array_from_process_local_data(self._sharded, np.asarray(a)),
            batch,
        )

    def _place_state(self) -> None:
        """The step's state on ``data_parallel``'s devices, replicated (no-op without).
        Every process holds the same values (the same seed, or the same weights loaded)."""
        if self._replicated is None:
            return
        net = self.net
        net.trainable, net.non_trainable = self._replicate((net.trainable, net.non_trainable))
        self._opt_state, self._loss_sum = self._replicate((self._opt_state, self._loss_sum))

    def _replicate(self, tree: Any) -> Any:
        """``tree``'s arrays replicated on the mesh's devices, from this process's copy (a
        global array from local values: under ``jax.distributed`` each process supplies
        the part on its own devices).  A typed PRNG key (a Flax model's dropout stream)
        goes as its key data, wrapped again after."""

        def one(a: Any) -> Any:
            if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
                impl = jax.random.key_impl(a)
                return jax.random.wrap_key_data(one(jax.random.key_data(a)), impl=impl)
            host = np.asarray(a)
            return jax.make_array_from_callback(host.shape, self._replicated, lambda i: host[i])

        return jax.tree.map(one, tree)

    def _make_infer_step(self) -> None:
        net = self.net

        @jax.jit
        def infer(trainable: Any, non_trainable: Any, x: Any) -> Any:
            logits, _ = net.forward(trainable, non_trainable, x, False)
            return logits

        self._infer = infer

    def _make_eval_step(self) -> Any:
        net = self.net

        @jax.jit
        def eval_step(trainable: Any, non_trainable: Any, x: Any) -> Any:
            logits, _ = net.forward(trainable, non_trainable, x, False)
            return logits.astype(jnp.float32)

        return eval_step

    def next_batch(self) -> Batch:
        return next(self._batches)

    def step(self, batch: Batch) -> None:
        x, y = batch
        net = self.net
        if self.training:
            (net.trainable, net.non_trainable, self._opt_state, self._loss_sum) = self._train_step(
                net.trainable, net.non_trainable, self._opt_state, self._loss_sum, x, y
            )
            self._loss_steps += 1
        else:
            self._out = self._infer(net.trainable, net.non_trainable, x)

    def sync(self) -> None:
        # Dispatch is asynchronous on every platform: wait for the queued steps' results.
        jax.block_until_ready((self.net.trainable, self._loss_sum, self._out))

    def predict(self, x: np.ndarray) -> np.ndarray:
        if x.ndim == 4:  # bench's NCHW to Keras' NHWC, as its batches
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        net = self.net
        out = self._infer(net.trainable, net.non_trainable, jax.device_put(x, self.jax_device))
        return np.asarray(out, dtype=np.float32)

    def output_finite(self) -> bool:
        x, _ = self.next_batch()
        net = self.net
        out = jax.jit(lambda t, n, x: net.forward(t, n, x, False)[0])(
            net.trainable, net.non_trainable, x
        )
        # This process's part (all of it, but with jax.distributed's sharded batch).
        parts = [np.asarray(s.data, dtype=np.float32) for s in out.addressable_shards]
        return all(bool(np.isfinite(p).all()) for p in parts)

    def take_mean_loss(self) -> float | None:
        if not self._loss_steps:
            return None
        mean = float(self._loss_sum) / self._loss_steps
        self._loss_sum = jnp.zeros((), jnp.float32)
        if self._replicated is not None:
            self._loss_sum = self._replicate(self._loss_sum)
        self._loss_steps = 0
        return mean

    def evaluate(self) -> tuple[float, float] | None:
        data = self._data
        if not isinstance(data, LabelledData | ImageFiles) or not self._cfg.data.evaluate:
            return None
        if self._replicated is not None:
            return None  # the JAX strategies measure no test accuracy (as the TF ones)
        return score(self.test_logits(), data.test_y)

    def test_logits(self) -> np.ndarray:
        data, cfg, net = self._data, self._cfg, self.net
        batches: Iterator[tuple[Any, Any]]
        if isinstance(data, ImageFiles):
            batches = folder.batches(data, cfg.seed, cfg.batch_size, False, cfg.data.workers)
        elif isinstance(data, LabelledData):
            batches = _labelled(data.test_x, data.test_y, data, cfg, False)
        else:
            raise RuntimeError("test_logits: this session has no held-out split")
        return np.concatenate(
            [np.asarray(self._eval_fn(net.trainable, net.non_trainable, x)) for x, _ in batches]
        )

    def to_model(self) -> None:
        """Write the step's state back into the model (Keras' variables, the NNX module's
        state), which the stateless step never touches: before reading its weights (the
        parity check)."""
        self.net.to_model()

    def from_model(self) -> None:
        """Take the model's weights as the step's state: after setting its weights (placed
        as ``data_parallel`` placed the state)."""
        self.net.from_model()
        self._place_state()

    def peak_device_memory_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        stats = self.jax_device.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return None if peak is None else float(peak) / 2**20

    def forward_flops_per_sample(self) -> float | None:
        """The zoo's way (contractions only, :func:`bench.trial.models.flops.jax_forward_flops`):
        the inference forward of one sample traced to a jaxpr; nothing runs.  A sequence
        model's sample is one of its batches' shape (seq_len tokens, or a spectrogram); its
        recurrent layers (Keras' ``lax.scan``) count their step times the sequence length."""
        from bench.trial.models import flops

        net, size = self.net, self._cfg.image_size
        x = self._sample if self._sample is not None else jnp.zeros((1, size, size, 3))
        with jax.default_device(self.jax_device):
            count = flops.jax_forward_flops(
                lambda t, n, x: net.forward(t, n, x, False)[0], net.trainable, net.non_trainable, x
            )
        return None if count is None else float(count)


def _seed(seed: int) -> None:
    """``keras.utils.set_random_seed`` without TensorFlow: Keras' seeds it too wherever it is
    installed, importing it (seconds, and its memory) into a trial that never uses it."""
    try:
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        from keras.src.utils import rng_utils
    except ImportError:  # another Keras layout: its own function
        keras.utils.set_random_seed(seed)
        return
    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    random.seed(seed)
    np.random.seed(seed)


class Adapter:
    name = "jax"

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        # Threads are XLA_FLAGS, read when JAX's CPU client starts (before_import); JAX has
        # no inter-op threads.  fp32 means float32 on GPUs with TensorFloat-32 too.
        precision = "tensorfloat32" if cfg.precision == "tf32" else "highest"
        jax.config.update("jax_default_matmul_precision", precision)
        if cfg.device == "cpu":
            jax.config.update("jax_platforms", "cpu")
        _seed(cfg.seed)

    def environment(self) -> dict[str, str]:
        import jaxlib

        from bench.trial.frameworks import XLA_CPU_THREADS

        flags = os.environ.get("XLA_FLAGS", "")
        env = {
            "jax_version": jax.__version__,
            "jaxlib_version": jaxlib.__version__,
            "keras_version": keras.__version__,
            "keras_backend": keras.backend.backend(),
            "intra_op_threads": os.environ.get(XLA_CPU_THREADS, "default"),
            "inter_op_threads": "none (JAX has no inter-op setting)",
            "xla_flags": flags,
        }
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if gpus:
            env["gpu_name"] = str(gpus[0].device_kind)
        return env

    def prepare(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> JaxSession:
        return JaxSession(cfg, data)

    def is_oom(self, exc: BaseException, capped: bool = False) -> bool:
        if isinstance(exc, MemoryError):
            return True
        # XLA's allocator: jax.errors.JaxRuntimeError (XlaRuntimeError) "RESOURCE_EXHAUSTED".
        return "RESOURCE_EXHAUSTED" in str(exc) and type(exc).__name__ in (
            "JaxRuntimeError",
            "XlaRuntimeError",
        )
