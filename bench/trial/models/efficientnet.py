"""EfficientNet-B4 for PyTorch and Keras 3.

Both builders follow torchvision's ``efficientnet_b4``: the B0 stages (expansion, kernel,
stride, channels, repeats) (1,3,1,16,1) (6,3,2,24,2) (6,5,2,40,2) (6,3,2,80,3) (6,5,1,112,3)
(6,5,2,192,4) (6,3,1,320,1) scaled by width 1.4 (channels rounded to multiples of 8, never
below 90% of the exact value) and depth 1.8 (repeats rounded up): a 3x3/2 stem conv to 48
channels, 32 MBConv blocks, a 1x1 conv to 1792 channels, global average pooling, dropout 0.4
and a linear head.

An MBConv block is a 1x1 expansion conv (absent at expansion 1), a depthwise conv carrying the
stride, squeeze-and-excitation (global average pool, 1x1 conv with bias to max(1, in/4)
channels, SiLU, 1x1 conv with bias back, sigmoid gate) and a linear 1x1 projection; where
stride is 1 and channels are unchanged, the branch goes through stochastic depth (row mode,
rate 0.2 x block index / 32, so 0 for the first block) and is added to the input.  Convs
outside SE are bias-free and followed by BN and SiLU (none after the projection).

BatchNorm: torchvision gives B0-B4 PyTorch's defaults, eps 1e-5 and momentum 0.1 (only B5-B7,
ported from TensorFlow weights, use eps 1e-3 / momentum 0.01), so this is eps 1e-5 and Keras
momentum 0.9 -- not keras.applications' 1e-3 / 0.99.  Init as torchvision: convs kaiming-normal
(fan-out as PyTorch counts it, explicit in Keras), BN 1/0, the head U(+-1/sqrt(classes)) with
zero bias.  Keras pads every conv like PyTorch (symmetric k//2; ZeroPadding2D + "valid" where
strided).  Parameter counts are identical: 19,341,616 at 1000 classes, torchvision's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench.trial.models import common

if TYPE_CHECKING:
    import keras
    import torch

_WIDTH, _DEPTH = 1.4, 1.8
# B0: (expansion, kernel, stride, in_channels, out_channels, repeats)
_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
       (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))  # fmt: skip
_BN_EPS = 1e-5
_DROPOUT = 0.4
_STOCHASTIC_DEPTH = 0.2


def _round_channels(value: float, divisor: int = 8) -> int:
    """Nearest multiple of ``divisor`` (at least ``divisor``), raised if 10% below ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _stem() -> int:
    return _round_channels(_B0[0][3] * _WIDTH)


def _last() -> int:
    return 4 * _round_channels(_B0[-1][4] * _WIDTH)


def _blocks() -> list[tuple[int, int, int, int, int, int, float]]:
    """(in, expanded, squeeze, out, kernel, stride, stochastic-depth rate) for every block."""
    stages = [
        (t, k, s, _round_channels(i * _WIDTH), _round_channels(o * _WIDTH), math.ceil(n * _DEPTH))
        for t, k, s, i, o, n in _B0
    ]
    total = sum(stage[-1] for stage in stages)
    specs: list[tuple[int, int, int, int, int, int, float]] = []
    for t, k, s, in_ch, out_ch, n in stages:
        for i in range(n):
            cin = in_ch if i == 0 else out_ch
            rate = _STOCHASTIC_DEPTH * len(specs) / total
            specs.append((cin, _round_channels(cin * t), max(1, cin // 4), out_ch, k,
                          s if i == 0 else 1, rate))  # fmt: skip
    return specs


def _conv_std(in_ch: int, out_ch: int, kernel: int, groups: int = 1) -> float:
    """kaiming_normal_(mode="fan_out") as PyTorch computes it."""
    return math.sqrt(2.0 / common.torch_fans(in_ch, out_ch, kernel, groups)[1])


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """EfficientNet-B4 taking NCHW float32 input and returning logits (image_size unused)."""
    import torch
    from torch import nn

    def conv_bn(in_ch: int, out_ch: int, kernel: int, stride: int = 1, groups: int = 1,
                act: bool = True) -> list[nn.Module]:  # fmt: skip
        layers: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch, eps=_BN_EPS),
        ]
        return layers + [nn.SiLU(inplace=True)] if act else layers

    class SqueezeExcitation(nn.Module):
        def __init__(self, channels: int, squeeze: int) -> None:
            super().__init__()
            self.fc1 = nn.Conv2d(channels, squeeze, 1)
            self.fc2 = nn.Conv2d(squeeze, channels, 1)
            self.act = nn.SiLU(inplace=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scale = self.fc2(self.act(self.fc1(torch.mean(x, dim=(2, 3), keepdim=True))))
            return x * torch.sigmoid(scale)

    class MBConv(nn.Module):
        def __init__(self, in_ch: int, expanded: int, squeeze: int, out_ch: int, kernel: int,
                     stride: int, rate: float) -> None:  # fmt: skip
            super().__init__()
            self.use_residual = stride == 1 and in_ch == out_ch
            layers = conv_bn(in_ch, expanded, 1) if expanded != in_ch else []
            layers += conv_bn(expanded, expanded, kernel, stride, groups=expanded)
            layers.append(SqueezeExcitation(expanded, squeeze))
            layers += conv_bn(expanded, out_ch, 1, act=False)
            self.block = nn.Sequential(*layers)
            self.stochastic_depth = common.torch_stochastic_depth(rate)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.block(x)
            return x + self.stochastic_depth(out) if self.use_residual else out

    last_in = _round_channels(_B0[-1][4] * _WIDTH)
    model = nn.Sequential(
        *conv_bn(3, _stem(), 3, 2),
        *(MBConv(*spec) for spec in _blocks()),
        *conv_bn(last_in, _last(), 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(_DROPOUT),
        nn.Linear(_last(), num_classes),
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.out_features)
            nn.init.uniform_(m.weight, -bound, bound)
            nn.init.zeros_(m.bias)
    return model


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """EfficientNet-B4 taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    def conv_bn(x: Any, in_ch: int, out_ch: int, kernel: int, stride: int = 1,
                act: bool = True) -> Any:  # fmt: skip
        init = common.keras_normal(_conv_std(in_ch, out_ch, kernel))
        x = common.keras_conv(x, out_ch, kernel, stride, (kernel - 1) // 2, kernel_initializer=init)
        x = common.keras_bn(x, _BN_EPS)
        return layers.Activation("silu")(x) if act else x

    def squeeze_excitation(x: Any, channels: int, squeeze: int) -> Any:
        s = layers.GlobalAveragePooling2D(keepdims=True)(x)
        for out_ch, act in ((squeeze, "silu"), (channels, "sigmoid")):
            init = common.keras_normal(_conv_std(int(s.shape[-1]), out_ch, 1))
            s = layers.Conv2D(out_ch, 1, activation=act, kernel_initializer=init)(s)
        return layers.Multiply()([x, s])

    inputs = keras.Input((image_size, image_size, 3))
    x = conv_bn(inputs, 3, _stem(), 3, 2)
    for in_ch, expanded, squeeze, out_ch, kernel, stride, rate in _blocks():
        y = conv_bn(x, in_ch, expanded, 1) if expanded != in_ch else x
        init = common.keras_normal(_conv_std(expanded, expanded, kernel, groups=expanded))
        y = common.keras_depthwise(y, kernel, stride, (kernel - 1) // 2, initializer=init)
        y = layers.Activation("silu")(common.keras_bn(y, _BN_EPS))
        y = squeeze_excitation(y, expanded, squeeze)
        y = conv_bn(y, expanded, out_ch, 1, act=False)
        if stride == 1 and in_ch == out_ch:
            x = layers.Add()([x, common.keras_stochastic_depth(rate)(y)])
        else:
            x = y
    x = conv_bn(x, int(x.shape[-1]), _last(), 1)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(_DROPOUT)(x)
    bound = 1.0 / math.sqrt(num_classes)
    outputs = layers.Dense(
        num_classes, kernel_initializer=common.keras_uniform(bound), bias_initializer="zeros"
    )(x)
    return keras.Model(inputs, outputs, name="efficientnet_b4")
