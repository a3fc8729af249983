"""ResNet-18, -50 and -152 (v1.5) for PyTorch, Keras 3, MXNet Gluon and Flax NNX.

Both builders follow the torchvision layout: a 7x7/2 stem conv, BN, ReLU and 3x3/2 max-pool,
then four stages of residual blocks (widths 64-512), global average pooling and a linear head.
ResNet-18 stacks [2, 2, 2, 2] basic blocks (two 3x3 convs, expansion 1); ResNet-50 and -152
stack [3, 4, 6, 3] and [3, 8, 36, 3] bottleneck blocks (1x1, 3x3, 1x1, expansion 4, stride on
the 3x3 conv).  A block whose stride or channel count changes gets a 1x1 conv + BN projection.
Convs have no bias and BN uses eps 1e-5 / momentum 0.1 (Keras 0.9). Keras pads stride-2 layers
symmetrically with ZeroPadding2D + "valid" to match PyTorch exactly, so trainable parameter
counts are identical: 11,689,512 / 25,557,032 / 60,192,808 at 1000 classes, torchvision's.
The builders take ``depth`` (default 50); the registry passes it for resnet18 and resnet152.
The Gluon build registers its layers in PyTorch's order (a block's projection last), so
weights map 1:1 in order and shape; Gluon BN momentum 0.9 is PyTorch's 0.1.  (Gluon's own
model zoo ResNet v1 puts the stride on the first 1x1 conv: not used here.)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras
    import torch
    from mxnet import gluon

_WIDTHS = (64, 128, 256, 512)
# depth -> (bottleneck blocks?, blocks per stage)
_DEPTHS: dict[int, tuple[bool, tuple[int, ...]]] = {
    18: (False, (2, 2, 2, 2)),
    50: (True, (3, 4, 6, 3)),
    152: (True, (3, 8, 36, 3)),
}
_BN_EPS = 1e-5


def _arch(depth: int) -> tuple[bool, int]:
    """(bottleneck?, expansion) for a supported depth."""
    if depth not in _DEPTHS:
        raise ValueError(f"ResNet depth must be one of {sorted(_DEPTHS)}, got {depth}")
    bottleneck = _DEPTHS[depth][0]
    return bottleneck, 4 if bottleneck else 1


def _blocks(depth: int) -> list[tuple[int, int, int]]:
    """(in_channels, width, stride) for every residual block, in order."""
    _, expansion = _arch(depth)
    specs, in_ch = [], 64
    for stage, (width, n) in enumerate(zip(_WIDTHS, _DEPTHS[depth][1], strict=True)):
        for b in range(n):
            specs.append((in_ch, width, 2 if stage > 0 and b == 0 else 1))
            in_ch = width * expansion
    return specs


def build_torch(num_classes: int, image_size: int, depth: int = 50) -> torch.nn.Module:
    """ResNet-``depth`` taking NCHW float32 input and returning logits (image_size unused)."""
    from torch import nn

    bottleneck, expansion = _arch(depth)

    def projection(in_ch: int, out_ch: int, stride: int) -> nn.Module | None:
        if stride == 1 and in_ch == out_ch:
            return None
        return nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
            nn.BatchNorm2d(out_ch, eps=_BN_EPS),
        )

    class BasicBlock(nn.Module):
        def __init__(self, in_ch: int, width: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(in_ch, width, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width, eps=_BN_EPS)
            self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width, eps=_BN_EPS)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = projection(in_ch, width, stride)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class Bottleneck(nn.Module):
        def __init__(self, in_ch: int, width: int, stride: int) -> None:
            super().__init__()
            out_ch = width * expansion
            self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width, eps=_BN_EPS)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width, eps=_BN_EPS)
            self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out_ch, eps=_BN_EPS)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = projection(in_ch, out_ch, stride)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            return self.relu(self.bn3(self.conv3(out)) + identity)

    block = Bottleneck if bottleneck else BasicBlock
    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64, eps=_BN_EPS),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
        *(block(*spec) for spec in _blocks(depth)),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(_WIDTHS[-1] * expansion, num_classes),  # default torch init
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def build_keras(num_classes: int, image_size: int, depth: int = 50) -> keras.Model:
    """ResNet-``depth`` taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    bottleneck, expansion = _arch(depth)
    conv_init = keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")

    def conv(x: Any, filters: int, kernel: int, stride: int = 1) -> Any:
        pad = kernel // 2
        if stride > 1 and pad:  # torch-style symmetric padding
            x = layers.ZeroPadding2D(pad)(x)
        padding = "valid" if stride > 1 or not pad else "same"
        return layers.Conv2D(
            filters, kernel, strides=stride, padding=padding, use_bias=False,
            kernel_initializer=conv_init,
        )(x)  # fmt: skip

    def bn(x: Any) -> Any:
        return layers.BatchNormalization(epsilon=_BN_EPS, momentum=0.9)(x)

    inputs = keras.Input((image_size, image_size, 3))
    x = layers.ReLU()(bn(conv(inputs, 64, 7, 2)))
    x = layers.MaxPooling2D(3, strides=2)(layers.ZeroPadding2D(1)(x))  # zeros are safe after ReLU
    for in_ch, width, stride in _blocks(depth):
        out_ch = width * expansion
        identity = x
        if stride != 1 or in_ch != out_ch:
            identity = bn(conv(x, out_ch, 1, stride))
        if bottleneck:
            y = layers.ReLU()(bn(conv(x, width, 1)))
            y = layers.ReLU()(bn(conv(y, width, 3, stride)))
            y = bn(conv(y, out_ch, 1))
        else:
            y = layers.ReLU()(bn(conv(x, width, 3, stride)))
            y = bn(conv(y, width, 3))
        x = layers.ReLU()(layers.Add()([y, identity]))
    x = layers.GlobalAveragePooling2D()(x)
    # Same U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as torch's default Linear init.
    bound = 1.0 / math.sqrt(_WIDTHS[-1] * expansion)
    outputs = layers.Dense(
        num_classes,
        kernel_initializer=keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform"),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")


def build_mxnet(num_classes: int, image_size: int, depth: int = 50) -> gluon.HybridBlock:
    """ResNet-``depth`` as a Gluon HybridBlock taking NCHW float32 input, returning logits."""
    from mxnet.gluon import nn

    from bench.trial.models import common

    bottleneck, expansion = _arch(depth)
    conv_init = {"weight_initializer": common.mxnet_kaiming_fan_out()}

    def conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1) -> nn.Conv2D:
        return nn.Conv2D(out_ch, kernel, stride, kernel // 2, use_bias=False, in_channels=in_ch,
                         **conv_init)  # fmt: skip

    def bn(channels: int) -> nn.BatchNorm:
        return nn.BatchNorm(momentum=0.9, epsilon=_BN_EPS, in_channels=channels)

    class Block(nn.HybridBlock):
        def __init__(self, in_ch: int, width: int, stride: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            out_ch = width * expansion
            with self.name_scope():
                self.body = nn.HybridSequential()
                if bottleneck:
                    self.body.add(conv(in_ch, width, 1), bn(width), nn.Activation("relu"))
                    self.body.add(conv(width, width, 3, stride), bn(width), nn.Activation("relu"))
                    self.body.add(conv(width, out_ch, 1), bn(out_ch))
                else:
                    self.body.add(conv(in_ch, width, 3, stride), bn(width), nn.Activation("relu"))
                    self.body.add(conv(width, width, 3), bn(width))
                self.downsample: nn.HybridSequential | None = None
                if stride != 1 or in_ch != out_ch:
                    self.downsample = nn.HybridSequential()
                    self.downsample.add(conv(in_ch, out_ch, 1, stride), bn(out_ch))

        def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803 - Gluon's signature
            identity = x if self.downsample is None else self.downsample(x)
            return F.Activation(self.body(x) + identity, act_type="relu")

    net = nn.HybridSequential(prefix=f"resnet{depth}_")
    with net.name_scope():
        net.add(conv(3, 64, 7, 2), bn(64), nn.Activation("relu"), nn.MaxPool2D(3, 2, 1))
        for spec in _blocks(depth):
            net.add(Block(*spec))
        width = _WIDTHS[-1] * expansion
        net.add(nn.GlobalAvgPool2D(), nn.Flatten())
        net.add(nn.Dense(num_classes, in_units=width, **common.mxnet_torch_default_init(width)))
    net.initialize()
    return net


def build_flax(num_classes: int, image_size: int, depth: int = 50, seed: int = 0) -> Any:
    """ResNet-``depth`` as a Flax NNX module taking NHWC float32 input and returning logits
    (image_size unused), its weights drawn from ``seed``.  Its blocks hold their layers as
    torchvision's do (``conv1``, ``bn1``, ..., ``downsample``)."""
    from flax import nnx

    from bench.trial.models import common

    bottleneck, expansion = _arch(depth)
    rngs = nnx.Rngs(seed)
    conv_init = common.flax_kaiming_fan_out()

    def conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1) -> nnx.Conv:
        pad = kernel // 2  # torch's symmetric padding
        return nnx.Conv(
            in_ch, out_ch, (kernel, kernel), strides=stride, padding=((pad, pad), (pad, pad)),
            use_bias=False, kernel_init=conv_init, rngs=rngs,
        )  # fmt: skip

    def bn(channels: int) -> nnx.BatchNorm:
        return common.flax_bn(channels, _BN_EPS, rngs)

    class Downsample(nnx.Module):
        def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
            self.conv = conv(in_ch, out_ch, 1, stride)
            self.bn = bn(out_ch)

        def __call__(self, x: Any) -> Any:
            return self.bn(self.conv(x))

        def layers(self) -> list[tuple[str, nnx.Module]]:
            return [("conv", self.conv), ("bn", self.bn)]

    class Block(nnx.Module):
        def __init__(self, in_ch: int, width: int, stride: int) -> None:
            out_ch = width * expansion
            self.names: tuple[str, ...]
            if bottleneck:
                self.conv1, self.bn1 = conv(in_ch, width, 1), bn(width)
                self.conv2, self.bn2 = conv(width, width, 3, stride), bn(width)
                self.conv3, self.bn3 = conv(width, out_ch, 1), bn(out_ch)
                self.names = ("conv1", "bn1", "conv2", "bn2", "conv3", "bn3")
            else:
                self.conv1, self.bn1 = conv(in_ch, width, 3, stride), bn(width)
                self.conv2, self.bn2 = conv(width, width, 3), bn(width)
                self.names = ("conv1", "bn1", "conv2", "bn2")
            projects = stride != 1 or in_ch != out_ch
            self.downsample = Downsample(in_ch, out_ch, stride) if projects else None

        def __call__(self, x: Any) -> Any:
            identity = x if self.downsample is None else self.downsample(x)
            out = nnx.relu(self.bn1(self.conv1(x)))
            if bottleneck:
                out = nnx.relu(self.bn2(self.conv2(out)))
                out = self.bn3(self.conv3(out))
            else:
                out = self.bn2(self.conv2(out))
            return nnx.relu(out + identity)

        def layers(self) -> list[tuple[str, nnx.Module]]:
            found = [(n, getattr(self, n)) for n in self.names]
            if self.downsample is not None:
                found += [(f"downsample.{n}", m) for n, m in self.downsample.layers()]
            return found

    class ResNet(nnx.Module):
        def __init__(self) -> None:
            self.conv1, self.bn1 = conv(3, 64, 7, 2), bn(64)
            self.blocks = nnx.List([Block(*spec) for spec in _blocks(depth)])
            width = _WIDTHS[-1] * expansion
            self.fc = nnx.Linear(width, num_classes, rngs=rngs,
                                 **common.flax_torch_default_init(width))  # fmt: skip

        def __call__(self, x: Any) -> Any:
            x = nnx.relu(self.bn1(self.conv1(x)))
            x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
            for block in self.blocks:
                x = block(x)
            return self.fc(x.mean(axis=(1, 2)))

        def layers(self) -> list[tuple[str, nnx.Module]]:
            found: list[tuple[str, nnx.Module]] = [("conv1", self.conv1), ("bn1", self.bn1)]
            for i, block in enumerate(self.blocks):
                found += [(f"blocks.{i}.{n}", m) for n, m in block.layers()]
            return [*found, ("fc", self.fc)]

    return ResNet()
