"""MobileNet-V2 (width 1.0) for PyTorch and Keras 3.

Both builders follow the torchvision layout: a 3x3/2 stem conv to 32 channels, then inverted
residual blocks with settings (expansion t, channels c, repeats n, first stride s)
(1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,4,2) (6,96,3,1) (6,160,3,2) (6,320,1,1); each block is
a 1x1 expansion conv (absent when t == 1), a 3x3 depthwise conv carrying the stride, and a
linear 1x1 projection, with a residual connection when stride is 1 and channels are unchanged.
A 1x1 conv to 1280 channels, global average pooling, dropout 0.2 and a linear head follow.
Every conv is bias-free and followed by BN (eps 1e-5, momentum 0.1; Keras 0.9) and, except the
projections, ReLU6.

Init as torchvision: convs kaiming-normal (fan-out; a depthwise kernel's fan-out is
channels x 9 as PyTorch counts it, given explicitly in Keras), BN 1/0, the head N(0, 0.01) with
zero bias.  Keras pads the strided convs with ZeroPadding2D + "valid" like PyTorch.  Parameter
counts are identical: 3,504,872 at 1000 classes, torchvision's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench.trial.models import common

if TYPE_CHECKING:
    import keras
    import torch

_STEM = 32
_LAST = 1280
# (expansion, out_channels, repeats, first stride)
_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip
_BN_EPS = 1e-5
_DROPOUT = 0.2


def _blocks() -> list[tuple[int, int, int, int]]:
    """(in_channels, hidden_channels, out_channels, stride) for every inverted residual."""
    specs, in_ch = [], _STEM
    for t, c, n, s in _SETTINGS:
        for i in range(n):
            specs.append((in_ch, in_ch * t, c, s if i == 0 else 1))
            in_ch = c
    return specs


def _conv_std(in_ch: int, out_ch: int, kernel: int, groups: int = 1) -> float:
    """kaiming_normal_(mode="fan_out") as PyTorch computes it."""
    return math.sqrt(2.0 / common.torch_fans(in_ch, out_ch, kernel, groups)[1])


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """MobileNet-V2 taking NCHW float32 input and returning logits (image_size unused)."""
    from torch import nn

    def conv_bn(
        in_ch: int, out_ch: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True
    ) -> list[nn.Module]:
        layers: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch, eps=_BN_EPS),
        ]
        return layers + [nn.ReLU6(inplace=True)] if act else layers

    class InvertedResidual(nn.Module):
        def __init__(self, in_ch: int, hidden: int, out_ch: int, stride: int) -> None:
            super().__init__()
            self.use_residual = stride == 1 and in_ch == out_ch
            layers = conv_bn(in_ch, hidden, 1) if hidden != in_ch else []
            layers += conv_bn(hidden, hidden, 3, stride, groups=hidden)
            layers += conv_bn(hidden, out_ch, 1, act=False)
            self.conv = nn.Sequential(*layers)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.conv(x) if self.use_residual else self.conv(x)

    in_last = _SETTINGS[-1][1]
    model = nn.Sequential(
        *conv_bn(3, _STEM, 3, 2),
        *(InvertedResidual(*spec) for spec in _blocks()),
        *conv_bn(in_last, _LAST, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(_DROPOUT),
        nn.Linear(_LAST, num_classes),
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """MobileNet-V2 taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    def conv_bn(x: Any, in_ch: int, out_ch: int, kernel: int, stride: int = 1,
                act: bool = True) -> Any:  # fmt: skip
        init = common.keras_normal(_conv_std(in_ch, out_ch, kernel))
        x = common.keras_conv(x, out_ch, kernel, stride, (kernel - 1) // 2, kernel_initializer=init)
        x = common.keras_bn(x, _BN_EPS)
        return layers.ReLU(6.0)(x) if act else x

    def depthwise_bn(x: Any, channels: int, stride: int) -> Any:
        init = common.keras_normal(_conv_std(channels, channels, 3, groups=channels))
        x = common.keras_depthwise(x, 3, stride, 1, initializer=init)
        return layers.ReLU(6.0)(common.keras_bn(x, _BN_EPS))

    inputs = keras.Input((image_size, image_size, 3))
    x = conv_bn(inputs, 3, _STEM, 3, 2)
    for in_ch, hidden, out_ch, stride in _blocks():
        y = conv_bn(x, in_ch, hidden, 1) if hidden != in_ch else x
        y = depthwise_bn(y, hidden, stride)
        y = conv_bn(y, hidden, out_ch, 1, act=False)
        x = layers.Add()([x, y]) if stride == 1 and in_ch == out_ch else y
    x = conv_bn(x, _SETTINGS[-1][1], _LAST, 1)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(_DROPOUT)(x)
    outputs = layers.Dense(
        num_classes, kernel_initializer=common.keras_normal(0.01), bias_initializer="zeros"
    )(x)
    return keras.Model(inputs, outputs, name="mobilenet_v2")
