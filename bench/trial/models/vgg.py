"""VGG-16 (configuration D, no batch norm) for PyTorch, Keras 3 and MXNet Gluon.

Both builders follow the torchvision layout layer for layer: 13 3x3 convs with bias and ReLU,
five 2x2 max-pools, adaptive average pooling to 7x7 and a 25088-4096-4096-classes MLP with
dropout. Keras has no adaptive pooling, so ``_keras_adaptive_avg_pool2d`` reproduces PyTorch's
binning exactly, and features are flattened in channels-first order so that weights map 1:1.
Parameter counts are identical at any input size >= 32 (138,357,544 at 224/1000 classes).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import keras
    import torch
    from mxnet import gluon

# Output channels per conv; "M" is a 2x2/2 max-pool.
_CFG: tuple[int | str, ...] = (
    64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M",
)  # fmt: skip
_POOL = 7
_HIDDEN = 4096


def _check_size(image_size: int) -> None:
    if image_size < 32:
        raise ValueError(f"VGG-16 needs image_size >= 32, got {image_size}")


def _pool_matrix(in_size: int, out_size: int) -> np.ndarray:
    """(out, in) averaging matrix with PyTorch's adaptive pooling bins."""
    from bench.trial.models import common

    matrix: np.ndarray = common.pool_matrix(in_size, out_size)
    return matrix


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """VGG-16 taking NCHW float32 input and returning logits."""
    from torch import nn

    _check_size(image_size)
    layers: list[nn.Module] = []
    in_ch = 3
    for v in _CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            layers += [nn.Conv2d(in_ch, int(v), kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            in_ch = int(v)
    model = nn.Sequential(
        nn.Sequential(*layers),
        nn.AdaptiveAvgPool2d((_POOL, _POOL)),
        nn.Flatten(),
        nn.Linear(512 * _POOL * _POOL, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(_HIDDEN, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(_HIDDEN, num_classes),
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            assert m.bias is not None
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)
    return model


@functools.cache
def _keras_pool_cls() -> type:
    import keras

    class AdaptiveAvgPool2D(keras.layers.Layer):
        """NHWC equivalent of torch.nn.AdaptiveAvgPool2d via two fixed pooling matrices."""

        def __init__(self, output_size: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.output_size = output_size

        def build(self, input_shape: tuple[int | None, ...]) -> None:
            _, h, w, _ = input_shape
            if h is None or w is None:
                raise ValueError("AdaptiveAvgPool2D needs static spatial dimensions")
            self._ph = _pool_matrix(h, self.output_size)
            self._pw = _pool_matrix(w, self.output_size)

        def call(self, x: Any) -> Any:
            ops = keras.ops
            x = ops.einsum("ih,nhwc->niwc", ops.convert_to_tensor(self._ph, x.dtype), x)
            return ops.einsum("jw,niwc->nijc", ops.convert_to_tensor(self._pw, x.dtype), x)

        def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple:
            return (input_shape[0], self.output_size, self.output_size, input_shape[3])

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "output_size": self.output_size}

    return AdaptiveAvgPool2D


def _keras_adaptive_avg_pool2d(output_size: int, **kwargs: Any) -> keras.layers.Layer:
    return _keras_pool_cls()(output_size, **kwargs)


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """VGG-16 taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    _check_size(image_size)
    conv_init = keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")
    dense_init = keras.initializers.RandomNormal(0.0, 0.01)
    inputs = keras.Input((image_size, image_size, 3))
    x = inputs
    for v in _CFG:
        if v == "M":
            x = layers.MaxPooling2D(2, strides=2)(x)
        else:
            x = layers.Conv2D(
                int(v), 3, padding="same", activation="relu", kernel_initializer=conv_init
            )(x)
    x = _keras_adaptive_avg_pool2d(_POOL, name="adaptive_avg_pool")(x)
    x = layers.Permute((3, 1, 2))(x)  # NHWC -> NCHW so Flatten matches torch's feature order
    x = layers.Flatten()(x)
    for _ in range(2):
        x = layers.Dense(_HIDDEN, activation="relu", kernel_initializer=dense_init)(x)
        x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(num_classes, kernel_initializer=dense_init)(x)
    return keras.Model(inputs, outputs, name="vgg16")


def build_mxnet(num_classes: int, image_size: int) -> gluon.HybridBlock:
    """VGG-16 as a Gluon HybridBlock taking NCHW float32 input and returning logits."""
    import mxnet as mx
    from mxnet.gluon import nn

    from bench.trial.models import common

    _check_size(image_size)
    conv_init = {"weight_initializer": common.mxnet_kaiming_fan_out(), "bias_initializer": "zeros"}
    dense_init = {"weight_initializer": mx.init.Normal(0.01), "bias_initializer": "zeros"}
    net = nn.HybridSequential(prefix="vgg16_")
    with net.name_scope():
        in_ch = 3
        for v in _CFG:
            if v == "M":
                net.add(nn.MaxPool2D(2, 2))
            else:
                net.add(nn.Conv2D(int(v), 3, padding=1, in_channels=in_ch, activation="relu",
                                  **conv_init))  # fmt: skip
                in_ch = int(v)
        net.add(common.mxnet_adaptive_avg_pool2d(_POOL), nn.Flatten())
        width = 512 * _POOL * _POOL
        for _ in range(2):
            net.add(nn.Dense(_HIDDEN, activation="relu", in_units=width, **dense_init))
            net.add(nn.Dropout(0.5))
            width = _HIDDEN
        net.add(nn.Dense(num_classes, in_units=width, **dense_init))
    net.initialize()
    return net
