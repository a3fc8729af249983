"""LeNet-5 for PyTorch, Keras 3, MXNet Gluon and Flax NNX, on 3-channel input.

The classic layout (LeCun et al., 1998) with today's usual activation and pooling: a 5x5 valid
conv to 6 channels, ReLU, 2x2 max-pool, a 5x5 valid conv to 16 channels, ReLU, 2x2 max-pool,
then fully connected 400-120-84-classes with ReLU between them.  Convs and linears have biases
and PyTorch's default init (U(+-1/sqrt(fan_in)), mirrored in Keras).

At its native 32x32 input the last pool leaves 16x5x5 features.  Larger inputs get an
adaptive average pool to 5x5 (PyTorch's binning, as in VGG), so the parameter count does not
depend on image_size: 62,006 with 10 classes.  torchvision has no LeNet; the reference is this
count at 32x32 with 10 classes.  Features are flattened in channels-first order in both
frameworks so weights map 1:1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.trial.models import common

if TYPE_CHECKING:
    import keras
    import torch
    from mxnet import gluon

_CONVS = (6, 16)
_HIDDEN = (120, 84)
_FEATURES = 5  # spatial size of the last feature map at 32x32


def _feature_size(image_size: int) -> int:
    size = image_size
    for _ in _CONVS:
        size = (size - 4) // 2  # 5x5 valid conv, then 2x2/2 max-pool
    if size < 1:
        raise ValueError(f"LeNet-5 needs image_size >= 16, got {image_size}")
    return size


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """LeNet-5 taking NCHW float32 input and returning logits."""
    from torch import nn

    features = _feature_size(image_size)
    layers: list[nn.Module] = []
    in_ch = 3
    for out_ch in _CONVS:
        layers += [nn.Conv2d(in_ch, out_ch, 5), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2)]
        in_ch = out_ch
    if features != _FEATURES:
        layers.append(nn.AdaptiveAvgPool2d(_FEATURES))
    layers.append(nn.Flatten())
    width = in_ch * _FEATURES * _FEATURES
    for hidden in _HIDDEN:
        layers += [nn.Linear(width, hidden), nn.ReLU(inplace=True)]
        width = hidden
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """LeNet-5 taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    from bench.trial.models import vgg

    features = _feature_size(image_size)
    inputs = keras.Input((image_size, image_size, 3))
    x, in_ch = inputs, 3
    for out_ch in _CONVS:
        init = common.keras_torch_default_init(in_ch * 25)
        x = layers.Conv2D(out_ch, 5, activation="relu", **init)(x)
        x = layers.MaxPooling2D(2, strides=2)(x)
        in_ch = out_ch
    if features != _FEATURES:
        x = vgg._keras_adaptive_avg_pool2d(_FEATURES)(x)
    x = layers.Permute((3, 1, 2))(x)  # NHWC -> NCHW so Flatten matches torch's feature order
    x = layers.Flatten()(x)
    width = in_ch * _FEATURES * _FEATURES
    for hidden in _HIDDEN:
        x = layers.Dense(hidden, activation="relu", **common.keras_torch_default_init(width))(x)
        width = hidden
    outputs = layers.Dense(num_classes, **common.keras_torch_default_init(width))(x)
    return keras.Model(inputs, outputs, name="lenet5")


def build_mxnet(num_classes: int, image_size: int) -> gluon.HybridBlock:
    """LeNet-5 as a Gluon HybridBlock taking NCHW float32 input and returning logits
    (initialized on the CPU; Dense flattens in channels-first order, as PyTorch)."""
    from mxnet.gluon import nn

    features = _feature_size(image_size)
    net = nn.HybridSequential(prefix="lenet5_")
    with net.name_scope():
        in_ch = 3
        for out_ch in _CONVS:
            init = common.mxnet_torch_default_init(in_ch * 25)
            net.add(nn.Conv2D(out_ch, 5, in_channels=in_ch, activation="relu", **init))
            net.add(nn.MaxPool2D(2, 2))
            in_ch = out_ch
        if features != _FEATURES:
            net.add(common.mxnet_adaptive_avg_pool2d(_FEATURES))
        width = in_ch * _FEATURES * _FEATURES
        for hidden in _HIDDEN:
            init = common.mxnet_torch_default_init(width)
            net.add(nn.Dense(hidden, activation="relu", in_units=width, **init))
            width = hidden
        net.add(nn.Dense(num_classes, in_units=width, **common.mxnet_torch_default_init(width)))
    net.initialize()
    return net


def build_flax(num_classes: int, image_size: int, seed: int = 0) -> Any:
    """LeNet-5 as a Flax NNX module taking NHWC float32 input and returning logits, its
    weights drawn from ``seed``; features flattened in channels-first order, as PyTorch."""
    from flax import nnx

    features = _feature_size(image_size)
    rngs = nnx.Rngs(seed)

    def conv(in_ch: int, out_ch: int) -> nnx.Conv:
        init = common.flax_torch_default_init(in_ch * 25)
        return nnx.Conv(in_ch, out_ch, (5, 5), padding="VALID", rngs=rngs, **init)

    def linear(width: int, out: int) -> nnx.Linear:
        return nnx.Linear(width, out, rngs=rngs, **common.flax_torch_default_init(width))

    class LeNet5(nnx.Module):
        def __init__(self) -> None:
            self.conv1 = conv(3, _CONVS[0])
            self.conv2 = conv(_CONVS[0], _CONVS[1])
            width = _CONVS[1] * _FEATURES * _FEATURES
            self.fc1 = linear(width, _HIDDEN[0])
            self.fc2 = linear(_HIDDEN[0], _HIDDEN[1])
            self.fc3 = linear(_HIDDEN[1], num_classes)

        def __call__(self, x: Any) -> Any:
            for layer in (self.conv1, self.conv2):
                x = nnx.max_pool(nnx.relu(layer(x)), (2, 2), strides=(2, 2))
            if features != _FEATURES:
                x = common.flax_adaptive_avg_pool2d(x, _FEATURES)
            x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)  # NCHW order, as torch's
            x = nnx.relu(self.fc1(x))
            x = nnx.relu(self.fc2(x))
            return self.fc3(x)

        def layers(self) -> list[tuple[str, nnx.Module]]:
            """The weighted layers in PyTorch's registration order."""
            return [(n, getattr(self, n)) for n in ("conv1", "conv2", "fc1", "fc2", "fc3")]

    return LeNet5()
