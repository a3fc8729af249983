"""AlexNet (torchvision's single-tower "one weird trick" variant) for PyTorch, Keras 3 and
MXNet Gluon.

Both builders follow the torchvision layout layer for layer: convs 11x11/4 (64, padding 2),
5x5 (192, padding 2), 3x3 (384, 256, 256, padding 1), each with bias and ReLU, 3x3/2
max-pools after the 1st, 2nd and 5th, adaptive average pooling to 6x6 and a
9216-4096-4096-classes MLP with dropout 0.5 before each of the first two linears.  No batch
norm; PyTorch's default init everywhere (mirrored in Keras).

The adaptive pool keeps the count at 61,100,840 (1000 classes) for any input size.  The
smallest input is 63x63: at 62 the third max-pool has a 2x2 map to pool.  Keras pads the
strided first conv with ZeroPadding2D + "valid" like PyTorch, and features are flattened in
channels-first order so that weights map 1:1.  The pool is left out where it would be the
identity (6x6 features, from 224x224 inputs) in both frameworks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.trial.models import common

if TYPE_CHECKING:
    import keras
    import torch
    from mxnet import gluon

# (out_channels, kernel, stride, padding, max-pool after)
_CONVS: tuple[tuple[int, int, int, int, bool], ...] = (
    (64, 11, 4, 2, True),
    (192, 5, 1, 2, True),
    (384, 3, 1, 1, False),
    (256, 3, 1, 1, False),
    (256, 3, 1, 1, True),
)
_POOL = 6
_HIDDEN = 4096
MIN_IMAGE_SIZE = 63


def _feature_size(image_size: int) -> int:
    size = image_size
    for _, kernel, stride, pad, pool in _CONVS:
        size = (size + 2 * pad - kernel) // stride + 1
        if pool:
            size = (size - 3) // 2 + 1
        if size < 1:
            raise ValueError(f"AlexNet needs image_size >= {MIN_IMAGE_SIZE}, got {image_size}")
    return size


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """AlexNet taking NCHW float32 input and returning logits."""
    from torch import nn

    features = _feature_size(image_size)
    layers: list[nn.Module] = []
    in_ch = 3
    for out_ch, kernel, stride, pad, pool in _CONVS:
        layers += [nn.Conv2d(in_ch, out_ch, kernel, stride, pad), nn.ReLU(inplace=True)]
        if pool:
            layers.append(nn.MaxPool2d(3, 2))
        in_ch = out_ch
    if features != _POOL:
        layers.append(nn.AdaptiveAvgPool2d(_POOL))
    return nn.Sequential(
        *layers,
        nn.Flatten(),
        nn.Dropout(0.5),
        nn.Linear(in_ch * _POOL * _POOL, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(_HIDDEN, _HIDDEN),
        nn.ReLU(inplace=True),
        nn.Linear(_HIDDEN, num_classes),
    )


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """AlexNet taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    from bench.trial.models import vgg

    features = _feature_size(image_size)
    inputs = keras.Input((image_size, image_size, 3))
    x, in_ch = inputs, 3
    for out_ch, kernel, stride, pad, pool in _CONVS:
        init = common.keras_torch_default_init(common.torch_fans(in_ch, out_ch, kernel)[0])
        x = layers.ReLU()(common.keras_conv(x, out_ch, kernel, stride, pad, use_bias=True, **init))
        if pool:
            x = layers.MaxPooling2D(3, strides=2)(x)
        in_ch = out_ch
    if features != _POOL:
        x = vgg._keras_adaptive_avg_pool2d(_POOL, name="adaptive_avg_pool")(x)
    x = layers.Permute((3, 1, 2))(x)  # NHWC -> NCHW so Flatten matches torch's feature order
    x = layers.Flatten()(x)
    width = in_ch * _POOL * _POOL
    for _ in range(2):
        x = layers.Dropout(0.5)(x)
        x = layers.Dense(_HIDDEN, activation="relu", **common.keras_torch_default_init(width))(x)
        width = _HIDDEN
    outputs = layers.Dense(num_classes, **common.keras_torch_default_init(width))(x)
    return keras.Model(inputs, outputs, name="alexnet")


def build_mxnet(num_classes: int, image_size: int) -> gluon.HybridBlock:
    """AlexNet as a Gluon HybridBlock taking NCHW float32 input and returning logits."""
    from mxnet.gluon import nn

    features = _feature_size(image_size)
    net = nn.HybridSequential(prefix="alexnet_")
    with net.name_scope():
        in_ch = 3
        for out_ch, kernel, stride, pad, pool in _CONVS:
            init = common.mxnet_torch_default_init(common.torch_fans(in_ch, out_ch, kernel)[0])
            net.add(
                nn.Conv2D(out_ch, kernel, stride, pad, in_channels=in_ch, activation="relu",
                          **init)
            )  # fmt: skip
            if pool:
                net.add(nn.MaxPool2D(3, 2))
            in_ch = out_ch
        if features != _POOL:
            net.add(common.mxnet_adaptive_avg_pool2d(_POOL))
        net.add(nn.Flatten())
        width = in_ch * _POOL * _POOL
        for _ in range(2):
            net.add(nn.Dropout(0.5))
            init = common.mxnet_torch_default_init(width)
            net.add(nn.Dense(_HIDDEN, activation="relu", in_units=width, **init))
            width = _HIDDEN
        net.add(nn.Dense(num_classes, in_units=width, **common.mxnet_torch_default_init(width)))
    net.initialize()
    return net
