"""TensorFlow: a Keras 3 model on the TF backend, trained with a compiled ``tf.function`` step.

Optimizer semantics follow PyTorch's so both frameworks do the same arithmetic: weight decay
is an L2 term added to the gradient (as in ``torch.optim.SGD``/``Adam``), and Adam's epsilon
is 1e-8.  Input: synthetic batches live on the device; labelled data goes through
``tf.data`` (per-sample conversion with ``data.workers`` parallel calls, ``cache()`` when
``data.cache=true``).  Mixed precision uses Keras policies (with loss scaling for fp16);
``compile=true`` builds the step with XLA (``jit_compile=True``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

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

# (inputs, targets): targets are a label tensor, or a tuple of tensors for sequence models.
Batch = tuple[tf.Tensor, Any]
_POLICIES = {
    "fp32": "float32",
    "tf32": "float32",
    "fp16": "mixed_float16",
    "bf16": "mixed_bfloat16",
}


def _device(requested: str) -> str:
    gpus = tf.config.list_logical_devices("GPU")
    if requested == "cuda" and not gpus:
        raise RuntimeError("device: 'cuda' was requested but TensorFlow sees no GPU")
    return "/GPU:0" if gpus and requested != "cpu" else "/CPU:0"


def _pipeline(
    x: np.ndarray, y: np.ndarray, data: LabelledData, cfg: BenchConfig, train: bool
) -> tf.data.Dataset:
    mean = tf.constant(data.mean, tf.float32)
    std = tf.constant(data.std, tf.float32)

    def convert(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return (tf.cast(image, tf.float32) / 255.0 - mean) / std, label

    calls = cfg.data.workers or None
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if cfg.data.cache:
        ds = ds.map(convert, num_parallel_calls=calls).cache()
    if train:
        ds = ds.shuffle(len(x), seed=cfg.seed, reshuffle_each_iteration=True)
    if not cfg.data.cache:
        ds = ds.map(convert, num_parallel_calls=calls)
    ds = ds.batch(cfg.batch_size, drop_remainder=train)
    if train:
        ds = ds.repeat()
    if cfg.data.workers:
        ds = ds.prefetch(2 * cfg.data.workers)
    return ds


def _files_pipeline(
    paths: list[str], y: np.ndarray, files: ImageFiles, cfg: BenchConfig, train: bool
) -> tf.data.Dataset:
    """data=folder in tf.data: each pass's plan (bench.trial.data.folder.plan) as a generator of
    (index, dy, dx, flip); a parallel map of data.workers calls reads, decodes
    (``tf.io.decode_jpeg``, ``decode_png``), resizes (``tf.image.resize``, bilinear),
    crops, flips and normalizes; batched and prefetched."""
    names = tf.constant(paths)
    labels = tf.constant(y)
    mean, std = tf.constant(files.mean, tf.float32), tf.constant(files.std, tf.float32)
    size, pad, resize = files.size, folder.PAD, files.resize

    def items() -> Iterator[tuple[int, int, int, bool]]:
        epoch = 0
        while True:
            order, dy, dx, flip = folder.plan(cfg.seed, epoch, len(paths))
            yield from zip(order.tolist(), dy.tolist(), dx.tolist(), flip.tolist(), strict=True)
            epoch += 1

    def read(i: tf.Tensor, dy: tf.Tensor, dx: tf.Tensor, flip: tf.Tensor) -> Any:
        data = tf.io.read_file(names[i])
        raw = tf.cond(  # JPEG's accurate integer IDCT, as PIL's (TF's default is the fast one)
            tf.io.is_jpeg(data),
            lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
            lambda: tf.io.decode_png(data, channels=3),
        )
        x = tf.cast(raw, tf.float32) / 255.0
        if resize:
            x = tf.image.resize(x, (size, size), method="bilinear", antialias=False)
        x = tf.pad(x, [[pad, pad], [pad, pad], [0, 0]])[dy : dy + size, dx : dx + size]
        x = tf.cond(flip, lambda: tf.reverse(x, axis=[1]), lambda: x)
        return tf.ensure_shape((x - mean) / std, (size, size, 3)), labels[i]

    if train:
        signature = (tf.TensorSpec((), tf.int64),) * 3 + (tf.TensorSpec((), tf.bool),)
        ds = tf.data.Dataset.from_generator(items, output_signature=signature)
    else:
        n = len(paths)
        ds = tf.data.Dataset.from_tensor_slices(
            (np.arange(n), np.full(n, pad), np.full(n, pad), np.zeros(n, bool))
        )
    ds = ds.map(read, num_parallel_calls=cfg.data.workers or None)
    ds = ds.batch(cfg.batch_size, drop_remainder=train)
    return ds.prefetch(2 * cfg.data.workers) if cfg.data.workers else ds


def _sequence_loss(task: str) -> Any:
    """loss(targets, logits) for a sequence task, the same arithmetic as PyTorch's."""
    if task == "ctc":

        def ctc(targets: tuple[tf.Tensor, ...], logits: tf.Tensor) -> tf.Tensor:
            """CTC (blank 0): each sequence's loss over its label length, averaged."""
            labels, label_lengths, frames = targets
            losses = tf.nn.ctc_loss(
                labels, tf.cast(logits, tf.float32), label_lengths, frames,
                logits_time_major=False, blank_index=0,
            )  # fmt: skip
            return tf.reduce_mean(losses / tf.cast(label_lengths, tf.float32))

        return ctc
    # Mean over the positions that have a target (causal_lm, masked_lm).
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=IGNORE_INDEX
    )

    def tokens(targets: tuple[tf.Tensor, ...], logits: tf.Tensor) -> tf.Tensor:
        return cross_entropy(targets[0], logits)

    return tokens


class TFSession:
    def __init__(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> None:
        self.tf_device = _device(cfg.device)
        self.device = "cuda:0" if "GPU" in self.tf_device else "cpu"
        self.training = cfg.mode == "train"
        self.jit = cfg.compile
        self.steps_per_pass = 0
        self._test: tf.data.Dataset | None = None
        self._test_y = np.zeros(0, np.int64)
        self._batches: Iterator[Batch]
        keras.mixed_precision.set_global_policy(_POLICIES[cfg.precision])
        task = models.task(cfg.model)
        self._image_size = cfg.image_size if task == "image" else None
        # model=hf, and a causal LM of model=py: FLOPs counted on one sample of seq_len tokens
        self._tokens_per_sample = cfg.model.seq_len if models.own_causal_lm(cfg.model) else 0
        with tf.device(self.tf_device):
            if task == "image":
                self.model = models.build_image("tf", cfg.model, cfg.num_classes, cfg.image_size)
            else:
                self.model = models.build_sequence("tf", cfg.model)
            self.num_parameters = int(sum(np.prod(w.shape) for w in self.model.trainable_weights))
            self._loss_sum = tf.Variable(0.0, trainable=False)
            if isinstance(data, LabelledData):
                self._batches = iter(_pipeline(data.train_x, data.train_y, data, cfg, True))
                self.steps_per_pass = data.steps_per_pass(cfg.batch_size)
                if cfg.data.evaluate:
                    self._test = _pipeline(data.test_x, data.test_y, data, cfg, False)
                    self._test_y = data.test_y
            elif isinstance(data, ImageFiles):
                train = _files_pipeline(data.train_paths, data.train_y, data, cfg, True)
                self._batches = iter(train)
                self.steps_per_pass = data.steps_per_pass(cfg.batch_size)
                if cfg.data.evaluate:
                    self._test = _files_pipeline(data.test_paths, data.test_y, data, cfg, False)
                    self._test_y = data.test_y
            elif isinstance(data, SequenceBatches):  # same layout in both frameworks
                sequence_batches = [
                    (tf.constant(x), tuple(tf.constant(t) for t in targets))
                    for x, targets in zip(data.inputs, data.targets, strict=True)
                ]
                self._batches = itertools.cycle(sequence_batches)
            else:
                batches = [
                    (tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1))), tf.constant(y))
                    for x, y in zip(data.images, data.labels, strict=True)
                ]
                self._batches = itertools.cycle(batches)
        self._loss_steps = 0
        self.loss_fn = (
            keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            if task == "image"
            else _sequence_loss(task)
        )
        # mode=generate with model=py: the positions of your LM's own cache (0: keras-hub's)
        self._own_cache_length = 0
        # mode=serve serves a causal LM by generating (bench.trial.serve)
        generating = cfg.mode == "generate" or (
            cfg.mode == "serve" and models.own_causal_lm(cfg.model)
        )
        if generating and cfg.model.source == "py":
            from bench.trial.models import custom

            self._generate_step = tf.function(custom.greedy_step(self.model), jit_compile=self.jit)
            self._own_cache_length = cfg.prompt_len + cfg.new_tokens
        elif generating:  # model=hf (refused for the other models)
            from bench.trial.models import keras_hub_lm

            self._generate_step = tf.function(
                keras_hub_lm.greedy_step(self.model), jit_compile=self.jit
            )
            length = cfg.prompt_len + cfg.new_tokens
            self._cache_shape = keras_hub_lm.cache_shape(self.model, cfg.batch_size, length)
        if self.training:
            self._fn = self._make_train_step(cfg)
        else:
            model = self.model
            self._fn = tf.function(lambda x, y: model(x, training=False), jit_compile=self.jit)
        self._eval_fn = self._make_eval_step()
        self._predict_fn: Any = None  # mode=serve's forward, made on first use

    def _make_train_step(self, cfg: BenchConfig) -> Any:
        opt = cfg.optimizer
        optimizer = make_optimizer(cfg)
        scaled = cfg.precision == "fp16"
        if scaled:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        self.optimizer = optimizer
        model, loss_fn, loss_sum, decay = self.model, self.loss_fn, self._loss_sum, opt.weight_decay
        variables = model.trainable_variables

        @tf.function(jit_compile=self.jit)
        def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
                objective = optimizer.scale_loss(loss) if scaled else loss
            grads = tape.gradient(objective, variables)
            if decay:
                grads = [g + decay * v for g, v in zip(grads, variables, strict=True)]
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            loss_sum.assign_add(tf.cast(loss, tf.float32))

        return train_step

    def _make_eval_step(self) -> Any:
        model = self.model

        @tf.function
        def eval_step(x: tf.Tensor) -> tf.Tensor:
            return tf.cast(model(x, training=False), tf.float32)

        return eval_step

    def next_batch(self) -> Batch:
        x, y = next(self._batches)
        if self.device != "cpu":
            with tf.device(self.tf_device):
                x, y = tf.identity(x), tf.nest.map_structure(tf.identity, y)
        return x, y

    def step(self, batch: Batch) -> None:
        with tf.device(self.tf_device):
            self._fn(*batch)
        if self.training:
            self._loss_steps += 1

    # mode=generate (model=hf): keras-hub's cached forward (call_with_cache), greedily; the
    # cache holds prompt_len + new_tokens positions, the tokens stay on the device.  A causal
    # LM of model=py: its own init_cache and cached_forward (bench.trial.models.custom).
    def start_generation(self, prompts: np.ndarray | None = None) -> None:
        if prompts is None:
            self._prompt, _ = self.next_batch()
        with tf.device(self.tf_device):
            if prompts is not None:  # mode=serve's batch of prompts, of any size
                self._prompt = tf.constant(np.ascontiguousarray(prompts))
            batch = int(self._prompt.shape[0])
            if self._own_cache_length:
                self._cache = self.model.init_cache(batch, self._own_cache_length)
            else:
                shape = (batch, *self._cache_shape[1:])
                self._cache = tf.zeros(shape, dtype=self.model.lm.compute_dtype)
        self._tokens: list[tf.Tensor] = []

    def prefill(self) -> None:
        with tf.device(self.tf_device):
            token, self._cache = self._generate_step(self._prompt, self._cache, tf.constant(0))
        self._tokens.append(token)

    def decode(self) -> None:
        index = tf.constant(int(self._prompt.shape[1]) + len(self._tokens) - 1)
        with tf.device(self.tf_device):
            token, self._cache = self._generate_step(self._tokens[-1], self._cache, index)
        self._tokens.append(token)

    def generated(self) -> np.ndarray:
        return np.asarray(tf.concat(self._tokens, axis=1))

    def sync(self) -> None:
        if self.device != "cpu":
            tf.test.experimental.sync_devices()

    def output_finite(self) -> bool:
        x, _ = self.next_batch()
        with tf.device(self.tf_device):
            out = self.model(x, training=False)
        outs = tf.nest.flatten(out)
        return all(bool(np.isfinite(np.asarray(o, dtype=np.float32)).all()) for o in outs)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self._predict_fn is None:  # one trace per batch size (mode=serve warms each up)
            model = self.model
            self._predict_fn = tf.function(
                lambda x: tf.cast(model(x, training=False), tf.float32), jit_compile=self.jit
            )
        if self._image_size is not None:  # bench's NCHW to Keras' NHWC, as its batches
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        with tf.device(self.tf_device):
            return np.asarray(self._predict_fn(tf.constant(x)))

    def take_mean_loss(self) -> float | None:
        if not self._loss_steps:
            return None
        mean = float(self._loss_sum.numpy()) / self._loss_steps
        self._loss_sum.assign(0.0)
        self._loss_steps = 0
        return mean

    def evaluate(self) -> tuple[float, float] | None:
        if self._test is None:
            return None
        return score(self.test_logits(), self._test_y)

    def test_logits(self) -> np.ndarray:
        if self._test is None:
            raise RuntimeError("test_logits: this session has no held-out split")
        with tf.device(self.tf_device):
            return np.concatenate([np.asarray(self._eval_fn(x)) for x, _ in self._test])

    def peak_device_memory_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        return float(tf.config.experimental.get_memory_info("GPU:0")["peak"]) / 2**20

    def forward_flops_per_sample(self) -> float | None:
        """Counted on the traced inference graph of one sample; nothing runs (image models,
        and causal LMs on one sample of seq_len tokens, as the torch side counts them)."""
        from bench.trial.models import flops

        if self._tokens_per_sample:
            return self.forward_flops_of(self._tokens_per_sample)
        if self._image_size is None:
            return None  # bench's own sequence models: not counted yet
        with tf.device(self.tf_device):
            count = flops.keras_flops_per_sample(self.model, self._image_size)
        return None if count is None else float(count)

    def forward_flops_of(self, tokens: int) -> float | None:
        """A causal LM's (model=hf, model=py) forward of one sample of ``tokens`` tokens."""
        from bench.trial.models import flops

        if not self._tokens_per_sample:
            return None
        with tf.device(self.tf_device):
            count = flops.keras_forward_flops(self.model, (tokens,), "int32")
        return None if count is None else float(count)


class Adapter:
    name = "tf"

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        tf.get_logger().setLevel("ERROR")
        # fp32 means float32: TF uses TensorFloat-32 on GPUs that have it unless told not to.
        tf.config.experimental.enable_tensor_float_32_execution(cfg.precision == "tf32")
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(cfg.inter_threads or threads)
            gpus = tf.config.list_physical_devices("GPU")
            if cfg.device == "cpu":
                tf.config.set_visible_devices([], "GPU")
            else:
                for gpu in gpus:  # allocate as needed, so peak memory means something
                    tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # the runtime is initialized already (a second session in a
            pass  # process: launcher=inline, the parity check): it keeps its settings
        keras.utils.set_random_seed(cfg.seed)

    def environment(self) -> dict[str, str]:
        env = {
            "tensorflow_version": tf.__version__,
            "keras_version": keras.__version__,
            "intra_op_threads": str(tf.config.threading.get_intra_op_parallelism_threads()),
            "inter_op_threads": str(tf.config.threading.get_inter_op_parallelism_threads()),
            "tf32": str(tf.config.experimental.tensor_float_32_execution_enabled()),
            # oneDNN: TF's default on x86 Linux; TF_ENABLE_ONEDNN_OPTS, read at import, sets it.
            "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
        }
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:  # the CUDA and cuDNN TF was built with; CPU runs don't use them
            build = tf.sysconfig.get_build_info()
            for key in ("cuda_version", "cudnn_version"):
                if build.get(key):
                    env[key] = str(build[key])
            details = tf.config.experimental.get_device_details(gpus[0])
            env["gpu_name"] = str(details.get("device_name", ""))
        return env

    def prepare(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> TFSession:
        return TFSession(cfg, data)

    def is_oom(self, exc: BaseException, capped: bool = False) -> bool:
        return isinstance(exc, tf.errors.ResourceExhaustedError | MemoryError)
