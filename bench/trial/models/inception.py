"""Inception-v3 for PyTorch and Keras 3, without the auxiliary classifier.

Both builders follow torchvision's ``inception_v3`` layer for layer: the stem (3x3/2 conv 32,
3x3 conv 32, 3x3 conv 64 padded, 3x3/2 max-pool, 1x1 conv 80, 3x3 conv 192, 3x3/2 max-pool),
Mixed_5b-5d (InceptionA, pool features 32/64/64), Mixed_6a (InceptionB), Mixed_6b-6e
(InceptionC, 7x7 channels 128/160/160/192), Mixed_7a (InceptionD), Mixed_7b-7c (InceptionE),
global average pooling, dropout 0.5 and a linear head.  Every conv is bias-free with BN
(eps 1e-3, momentum 0.1; Keras 0.9) and ReLU; branch outputs are concatenated in torchvision's
order.  The 3x3/1 average pools of the branches count the zero padding in their divisor
(PyTorch's ``count_include_pad``), which Keras reproduces with ZeroPadding2D + "valid".  Init
as torchvision: convs and the head N(0, 0.1) (torchvision truncates at +-2, i.e. 20 sigma),
BN 1/0, the head's bias PyTorch's default.

The auxiliary classifier is left out: torchvision's default (``aux_logits=True``) adds a second
head on Mixed_6e whose loss is only used in training, and which needs a 17x17 Mixed_6e map
(inputs near 299x299) -- the studies train at small sizes and bench's loss takes one output.
The reference is therefore torchvision's ``inception_v3(aux_logits=False)``: 23,834,568
parameters at 1000 classes, 3,326,696 (the aux head) fewer than the 27,161,264 with it.
The smallest input is 75x75 (Mixed_7a's stride-2 convs need a 3x3 map).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench.trial.models import common

if TYPE_CHECKING:
    import keras
    import torch

_BN_EPS = 1e-3
_INIT_STD = 0.1
_DROPOUT = 0.5
_FEATURES = 2048
MIN_IMAGE_SIZE = 75

# A branch is a sequence of convs (out_channels, kernel, stride, padding), optionally preceded
# by a pool ("avg": 3x3/1 padded 1, "max": 3x3/2) or split at its end into parallel convs
# whose outputs are concatenated ("split").
Conv = tuple[int, tuple[int, int], int, tuple[int, int]]


def _c(out_ch: int, kernel: int | tuple[int, int], stride: int = 1,
       padding: int | tuple[int, int] = 0) -> Conv:  # fmt: skip
    return out_ch, common.pair(kernel), stride, common.pair(padding)


_STEM: tuple[Conv | str, ...] = (
    _c(32, 3, 2), _c(32, 3), _c(64, 3, padding=1), "max", _c(80, 1), _c(192, 3), "max",
)  # fmt: skip


def _inception_a(pool_features: int) -> list[tuple[str, list[Conv], list[Conv]]]:
    return [
        ("", [_c(64, 1)], []),
        ("", [_c(48, 1), _c(64, 5, padding=2)], []),
        ("", [_c(64, 1), _c(96, 3, padding=1), _c(96, 3, padding=1)], []),
        ("avg", [_c(pool_features, 1)], []),
    ]


def _inception_b() -> list[tuple[str, list[Conv], list[Conv]]]:
    return [
        ("", [_c(384, 3, 2)], []),
        ("", [_c(64, 1), _c(96, 3, padding=1), _c(96, 3, 2)], []),
        ("max", [], []),
    ]


def _inception_c(c7: int) -> list[tuple[str, list[Conv], list[Conv]]]:
    def row(out_ch: int) -> Conv:
        return _c(out_ch, (1, 7), padding=(0, 3))

    def col(out_ch: int) -> Conv:
        return _c(out_ch, (7, 1), padding=(3, 0))

    return [
        ("", [_c(192, 1)], []),
        ("", [_c(c7, 1), row(c7), col(192)], []),
        ("", [_c(c7, 1), col(c7), row(c7), col(c7), row(192)], []),
        ("avg", [_c(192, 1)], []),
    ]


def _inception_d() -> list[tuple[str, list[Conv], list[Conv]]]:
    return [
        ("", [_c(192, 1), _c(320, 3, 2)], []),
        (
            "",
            [
                _c(192, 1),
                _c(192, (1, 7), padding=(0, 3)),
                _c(192, (7, 1), padding=(3, 0)),
                _c(192, 3, 2),
            ],
            [],
        ),  # fmt: skip
        ("max", [], []),
    ]


def _inception_e() -> list[tuple[str, list[Conv], list[Conv]]]:
    split = [_c(384, (1, 3), padding=(0, 1)), _c(384, (3, 1), padding=(1, 0))]
    return [
        ("", [_c(320, 1)], []),
        ("", [_c(384, 1)], split),
        ("", [_c(448, 1), _c(384, 3, padding=1)], split),
        ("avg", [_c(192, 1)], []),
    ]


def _mixed() -> list[list[tuple[str, list[Conv], list[Conv]]]]:
    """Mixed_5b ... Mixed_7c: each a list of branches (pool, convs, split convs)."""
    return [
        _inception_a(32), _inception_a(64), _inception_a(64),
        _inception_b(),
        _inception_c(128), _inception_c(160), _inception_c(160), _inception_c(192),
        _inception_d(),
        _inception_e(), _inception_e(),
    ]  # fmt: skip


def _spatial(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1  # an unpadded window


def _check_size(image_size: int) -> None:
    size = _spatial(_spatial(_spatial(image_size, 3, 2), 3, 1), 3, 2)  # 1a, 2a, max-pool
    size = _spatial(_spatial(size, 3, 1), 3, 2)  # 4a, max-pool
    size = _spatial(_spatial(size, 3, 2), 3, 2)  # Mixed_6a, Mixed_7a (3x3/2, unpadded)
    if size < 1:
        raise ValueError(f"Inception-v3 needs image_size >= {MIN_IMAGE_SIZE}, got {image_size}")


def build_torch(num_classes: int, image_size: int) -> torch.nn.Module:
    """Inception-v3 taking NCHW float32 input and returning logits."""
    import torch
    from torch import nn

    _check_size(image_size)

    def basic_conv(in_ch: int, spec: Conv) -> nn.Sequential:
        out_ch, kernel, stride, padding = spec
        return nn.Sequential(
            nn.Conv2d(in_ch, out_ch, kernel, stride, padding, bias=False),
            nn.BatchNorm2d(out_ch, eps=_BN_EPS),
            nn.ReLU(inplace=True),
        )

    def pool(kind: str) -> nn.Module:
        if kind == "max":
            return nn.MaxPool2d(3, 2)
        return nn.AvgPool2d(3, 1, 1, count_include_pad=True)

    class Branch(nn.Module):
        def __init__(self, in_ch: int, kind: str, convs: list[Conv], split: list[Conv]) -> None:
            super().__init__()
            self.pool = pool(kind) if kind else nn.Identity()
            layers = []
            for spec in convs:
                layers.append(basic_conv(in_ch, spec))
                in_ch = spec[0]
            self.convs = nn.Sequential(*layers)
            self.split = nn.ModuleList(basic_conv(in_ch, spec) for spec in split)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.convs(self.pool(x))
            return torch.cat([s(x) for s in self.split], 1) if len(self.split) else x

    class Mixed(nn.Module):
        def __init__(self, in_ch: int, branches: list[tuple[str, list[Conv], list[Conv]]]):
            super().__init__()
            self.branches = nn.ModuleList(Branch(in_ch, *b) for b in branches)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([b(x) for b in self.branches], 1)

    layers: list[nn.Module] = []
    in_ch = 3
    for spec in _STEM:
        if isinstance(spec, str):
            layers.append(pool(spec))
        else:
            layers.append(basic_conv(in_ch, spec))
            in_ch = spec[0]
    for branches in _mixed():
        layers.append(Mixed(in_ch, branches))
        in_ch = _out_channels(in_ch, branches)
    model = nn.Sequential(
        *layers,
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(_DROPOUT),
        nn.Linear(_FEATURES, num_classes),
    )
    for m in model.modules():
        if isinstance(m, nn.Conv2d | nn.Linear):
            nn.init.trunc_normal_(m.weight, 0.0, _INIT_STD, a=-2.0, b=2.0)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def _out_channels(in_ch: int, branches: list[tuple[str, list[Conv], list[Conv]]]) -> int:
    total = 0
    for _, convs, split in branches:
        if split:
            total += sum(spec[0] for spec in split)
        elif convs:
            total += convs[-1][0]
        else:
            total += in_ch  # a bare pooling branch passes its input channels through
    return total


def build_keras(num_classes: int, image_size: int) -> keras.Model:
    """Inception-v3 taking NHWC float32 input and returning logits."""
    import keras
    from keras import layers

    _check_size(image_size)
    init = common.keras_normal(_INIT_STD)

    def basic_conv(x: Any, spec: Conv) -> Any:
        out_ch, kernel, stride, padding = spec
        x = common.keras_conv(x, out_ch, kernel, stride, padding, kernel_initializer=init)
        return layers.ReLU()(common.keras_bn(x, _BN_EPS))

    def pool(x: Any, kind: str) -> Any:
        if kind == "max":
            return layers.MaxPooling2D(3, strides=2)(x)
        # Zero padding + "valid": the divisor is always 9, as with count_include_pad.
        return layers.AveragePooling2D(3, strides=1)(layers.ZeroPadding2D(1)(x))

    inputs = keras.Input((image_size, image_size, 3))
    x = inputs
    for spec in _STEM:
        x = pool(x, spec) if isinstance(spec, str) else basic_conv(x, spec)
    for branches in _mixed():
        outputs = []
        for kind, convs, split in branches:
            y = pool(x, kind) if kind else x
            for spec in convs:
                y = basic_conv(y, spec)
            outputs += [basic_conv(y, spec) for spec in split] if split else [y]
        x = layers.Concatenate()(outputs)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(_DROPOUT)(x)
    bound = 1.0 / math.sqrt(_FEATURES)
    logits = layers.Dense(
        num_classes, kernel_initializer=init, bias_initializer=common.keras_uniform(bound)
    )(x)
    return keras.Model(inputs, logits, name="inception_v3")
