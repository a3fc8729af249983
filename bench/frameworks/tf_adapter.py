"""TensorFlow: a Keras 3 model on the TF backend, trained with a compiled ``tf.function`` step.

Optimizer semantics follow PyTorch's so both frameworks do the same arithmetic: weight decay
is an L2 term added to the gradient (as in ``torch.optim.SGD``/``Adam``), and Adam's epsilon
is 1e-8.
"""

from __future__ import annotations

import itertools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench import models  # noqa: E402
from bench.config import BenchConfig  # noqa: E402
from bench.data import HostBatches  # noqa: E402


def _device(requested: str) -> str:
    gpus = tf.config.list_logical_devices("GPU")
    if requested == "cuda" and not gpus:
        raise RuntimeError("device: 'cuda' was requested but TensorFlow sees no GPU")
    return "/GPU:0" if gpus and requested != "cpu" else "/CPU:0"


class TFSession:
    def __init__(self, cfg: BenchConfig, data: HostBatches) -> None:
        self.tf_device = _device(cfg.device)
        self.device = "cuda:0" if "GPU" in self.tf_device else "cpu"
        self.training = cfg.mode == "train"
        with tf.device(self.tf_device):
            self.model = models.build("tf", cfg.model.name, cfg.num_classes, cfg.image_size)
            self.num_parameters = int(sum(np.prod(w.shape) for w in self.model.trainable_weights))
            batches = [
                (tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1))), tf.constant(y))
                for x, y in zip(data.images, data.labels, strict=True)
            ]
            self._loss_sum = tf.Variable(0.0, trainable=False)
        self._batches = itertools.cycle(batches)
        self._loss_steps = 0
        if self.training:
            self._fn = self._make_train_step(cfg)
        else:
            model = self.model
            self._fn = tf.function(lambda x, y: model(x, training=False))

    def _make_train_step(self, cfg: BenchConfig) -> tf.types.experimental.GenericFunction:
        opt = cfg.optimizer
        optimizer: keras.optimizers.Optimizer
        if opt.name == "adam":
            optimizer = keras.optimizers.Adam(learning_rate=opt.lr, epsilon=1e-8)
        else:
            optimizer = keras.optimizers.SGD(learning_rate=opt.lr, momentum=opt.momentum)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model, loss_sum, decay = self.model, self._loss_sum, opt.weight_decay
        variables = model.trainable_variables

        @tf.function
        def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, variables)
            if decay:
                grads = [g + decay * v for g, v in zip(grads, variables, strict=True)]
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            loss_sum.assign_add(loss)

        return train_step

    def step(self) -> None:
        x, y = next(self._batches)
        with tf.device(self.tf_device):
            self._fn(x, y)
        if self.training:
            self._loss_steps += 1

    def sync(self) -> None:
        if self.device != "cpu":
            tf.test.experimental.sync_devices()

    def take_mean_loss(self) -> float | None:
        if not self._loss_steps:
            return None
        mean = float(self._loss_sum.numpy()) / self._loss_steps
        self._loss_sum.assign(0.0)
        self._loss_steps = 0
        return mean

    def peak_device_memory_mb(self) -> float | None:
        if self.device == "cpu":
            return None
        return float(tf.config.experimental.get_memory_info("GPU:0")["peak"]) / 2**20


class Adapter:
    name = "tf"

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        tf.get_logger().setLevel("ERROR")
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        gpus = tf.config.list_physical_devices("GPU")
        if cfg.device == "cpu":
            tf.config.set_visible_devices([], "GPU")
        else:
            for gpu in gpus:  # allocate as needed, so peak memory means something
                tf.config.experimental.set_memory_growth(gpu, True)
        keras.utils.set_random_seed(cfg.seed)

    def environment(self) -> dict[str, str]:
        env = {
            "tensorflow_version": tf.__version__,
            "keras_version": keras.__version__,
            "intra_op_threads": str(tf.config.threading.get_intra_op_parallelism_threads()),
            "inter_op_threads": str(tf.config.threading.get_inter_op_parallelism_threads()),
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

    def prepare(self, cfg: BenchConfig, data: HostBatches) -> TFSession:
        return TFSession(cfg, data)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, tf.errors.ResourceExhaustedError | MemoryError)
