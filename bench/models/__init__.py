"""The model zoo: one module per architecture, each with a PyTorch and a Keras builder.

Keeping both builders of an architecture side by side in one module makes parity easy to
audit; the tests check that both have the same parameter count.  Nothing here imports a
framework until a builder is called.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    name: str
    module: str
    # torchvision's parameter count at the reference input with 1000 classes.
    reference_params: int
    reference_image_size: int = 224
    min_image_size: int = 32

    def builder(self, framework: str) -> Any:
        module = importlib.import_module(f"bench.models.{self.module}")
        return getattr(module, "build_torch" if framework == "torch" else "build_keras")


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("vgg16", "vgg", reference_params=138_357_544),
        ModelSpec("resnet50", "resnet", reference_params=25_557_032),
    )
}


def build(framework: str, name: str, num_classes: int, image_size: int) -> Any:
    """Build model ``name`` for ``framework`` ("torch" or "tf")."""
    return MODELS[name].builder(framework)(num_classes=num_classes, image_size=image_size)
