"""A small CNN of your own, built in PyTorch and in Keras with equal parameter counts, to run
through bench's matrix (docs/your-model.md):

    python -m bench -m framework=torch,tf model=py model.builder=examples.custom_cnn:build

bench calls a builder as ``build(framework=..., num_classes=..., input_shape=...)``:
``input_shape`` is one sample in the framework's own layout, (3, H, W) for torch and
(H, W, 3) for tf, and the model returns logits.  ``build`` picks the framework's builder;
``model.torch=examples.custom_cnn:build_torch model.tf=examples.custom_cnn:build_keras``
names them one by one.  The frameworks are imported inside the builders, so that importing
this module costs nothing.

Two 3x3 convolutions (16 and 32 channels, same padding, ReLU, 2x2 max pooling after each),
global average pooling and a linear classifier: 3*16*9+16 + 16*32*9+32 + 32*C+C parameters
(5,418 for 10 classes) in both frameworks.
"""

from __future__ import annotations

from typing import Any

WIDTHS = (16, 32)


def build_torch(framework: str, num_classes: int, input_shape: tuple[int, ...]) -> Any:
    import torch
    from torch import nn

    channels = input_shape[0]
    layers: list[nn.Module] = []
    for width in WIDTHS:
        layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes)]
    torch.manual_seed(0)
    return nn.Sequential(*layers)


def build_keras(framework: str, num_classes: int, input_shape: tuple[int, ...]) -> Any:
    import keras
    from keras import layers

    inputs = keras.Input(shape=input_shape)
    x = inputs
    for width in WIDTHS:
        x = layers.Conv2D(width, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(num_classes)(x), name="custom_cnn")


def build(framework: str, num_classes: int, input_shape: tuple[int, ...]) -> Any:
    """One builder for both frameworks."""
    builders = {"torch": build_torch, "tf": build_keras}
    return builders[framework](framework, num_classes, input_shape)
