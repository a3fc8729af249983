"""model.source=stock: each framework's own library model instead of bench's architecture.

PyTorch builds ``torchvision.models.<name>(weights=None, num_classes=...)`` and TensorFlow
``keras.applications.<Name>(weights=None, input_shape=..., classes=...,
classifier_activation=None)`` (logits, like bench's models).  The two libraries' versions of a
model are not the same architecture -- keras.applications' ResNets put the stride on the first
1x1 conv and give every conv a bias, its VGG16 flattens without adaptive pooling, its
EfficientNet uses BN eps 1e-3 and in-model input normalization -- so their parameter counts
and FLOPs differ from each other and from bench's; the trial logs them as usual, which is the
point of the option.

Which (framework, model) pairs exist is the static table in :data:`bench.models.MODELS`
(``stock_torch``/``stock_keras``), checked by config validation before any trial starts.
torchvision is an optional install (it must match the installed torch build); without it a
torch stock trial fails with a message saying so.  Inception-v3 is built without its
auxiliary classifier in both libraries, as bench's is.

``model=keras`` and ``model=torchvision`` (model.source=keras|torchvision) build any model of
the same two libraries by its own name, the same way (:func:`keras_model`,
:func:`torchvision_model`); :mod:`bench.models.custom` checks the name before any trial.
"""

from __future__ import annotations

from typing import Any, Protocol


class ModelSpec(Protocol):
    """What this module needs of a :class:`bench.models.ModelSpec` (not imported: the
    registry imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def stock_torch(self) -> str: ...

    @property
    def stock_keras(self) -> str: ...


TORCHVISION_MISSING = (
    "model.source=stock for torch needs torchvision, which is not installed here; install "
    "the torchvision release that matches this torch build, or use model.source=bench"
)


def torchvision_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torchvision") is not None


def torchvision_model(name: str, num_classes: int) -> Any:
    """``torchvision.models.<name>`` with random weights and ``num_classes`` logits."""
    try:
        import torchvision
    except ImportError as exc:
        raise RuntimeError(TORCHVISION_MISSING) from exc
    kwargs: dict[str, Any] = {"weights": None, "num_classes": num_classes}
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=True)
    return getattr(torchvision.models, name)(**kwargs)


def keras_model(name: str, num_classes: int, image_size: int) -> Any:
    """``keras.applications.<name>`` with random weights, logits for ``num_classes``."""
    import keras

    return getattr(keras.applications, name)(
        weights=None,
        input_shape=(image_size, image_size, 3),
        classes=num_classes,
        classifier_activation=None,
    )


def library_names(source: str) -> list[str]:
    """The models a library offers by name: keras.applications' model classes
    (``source="keras"``), torchvision.models' builders (``"torchvision"``: needs torchvision)."""
    if source == "keras":
        import keras

        return sorted(n for n in dir(keras.applications) if n[:1].isupper())
    try:
        import torchvision
    except ImportError as exc:
        raise RuntimeError(TORCHVISION_MISSING) from exc
    return sorted(torchvision.models.list_models(module=torchvision.models))


def build_torch(spec: ModelSpec, num_classes: int, image_size: int) -> Any:
    if not spec.stock_torch:
        raise ValueError(f"torchvision.models has no {spec.name}")
    return torchvision_model(spec.stock_torch, num_classes)


def build_keras(spec: ModelSpec, num_classes: int, image_size: int) -> Any:
    if not spec.stock_keras:
        raise ValueError(f"keras.applications has no {spec.name}")
    return keras_model(spec.stock_keras, num_classes, image_size)


def build(framework: str, spec: ModelSpec, num_classes: int, image_size: int) -> Any:
    """The library model for ``framework`` ("torch" or "tf")."""
    if framework == "torch":
        return build_torch(spec, num_classes, image_size)
    return build_keras(spec, num_classes, image_size)
