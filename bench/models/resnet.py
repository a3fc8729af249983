"""ResNet-50 (v1.5) for PyTorch and Keras 3.

Both builders follow the torchvision layout: a 7x7/2 stem conv, BN, ReLU and 3x3/2 max-pool,
then [3, 4, 6, 3] bottleneck blocks (widths 64-512, expansion 4, stride on the 3x3 conv, 1x1
conv + BN projection on each stage's first block), global average pooling and a linear head.
Convs have no bias and BN uses eps 1e-5 / momentum 0.1 (Keras 0.9). Keras pads stride-2 layers
symmetrically with ZeroPadding2D + "valid" to match PyTorch exactly, so trainable parameter
counts are identical (25,557,032 at 1000 classes).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras
    import torch

_STAGES: tuple[tuple[int, int], ...] = ((64, 3), (128, 4), (256, 6), (512, 3))  # (width, blocks)
_EXPANSION = 4
_BN_EPS = 1e-5


def _blocks() -> list[tuple[int, int, int]]:
    """(in_channels, width, stride) for every bottleneck block, in order."""
    specs, in_ch = [], 64
    for stage, (width, n) in enumerate(_STAGES):
        for b in range(n):
            specs.append((in_ch, width, 2 if stage > 0 and b == 0 else 1))
            in_ch = width * _EXPANSION
    return specs


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """ResNet-50 taking NCHW float32 input and returning logits (image_size is unused)."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, in_ch: int, width: int, stride: int) -> None:
            super().__init__()
            out_ch = width * _EXPANSION
            self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width, eps=_BN_EPS)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width, eps=_BN_EPS)
            self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out_ch, eps=_BN_EPS)
            self.relu = nn.ReLU(inplace=True)
            self.downsample: nn.Module | None = None
            if stride != 1 or in_ch != out_ch:
                self.downsample = nn.Sequential(
                    nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(out_ch, eps=_BN_EPS),
                )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            return self.relu(self.bn3(self.conv3(out)) + identity)

    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64, eps=_BN_EPS),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
        *(Bottleneck(*spec) for spec in _blocks()),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(_STAGES[-1][0] * _EXPANSION, num_classes),  # default torch init
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """ResNet-50 taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

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
    for in_ch, width, stride in _blocks():
        out_ch = width * _EXPANSION
        identity = x
        if stride != 1 or in_ch != out_ch:
            identity = bn(conv(x, out_ch, 1, stride))
        y = layers.ReLU()(bn(conv(x, width, 1)))
        y = layers.ReLU()(bn(conv(y, width, 3, stride)))
        y = bn(conv(y, out_ch, 1))
        x = layers.ReLU()(layers.Add()([y, identity]))
    x = layers.GlobalAveragePooling2D()(x)
    # Same U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as torch's default Linear init.
    bound = 1.0 / math.sqrt(_STAGES[-1][0] * _EXPANSION)
    outputs = layers.Dense(
        num_classes,
        kernel_initializer=keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform"),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
    )(x)
    return keras.Model(inputs, outputs, name="resnet50")
