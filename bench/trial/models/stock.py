"""model.source=stock: each framework's own library model instead of bench's architecture.

PyTorch builds ``torchvision.models.<name>(weights=None, num_classes=...)`` and TensorFlow
``keras.applications.<Name>(weights=None, input_shape=..., classes=...,
classifier_activation=None)`` (logits, like bench's models).  The two libraries' versions of a
model are not the same architecture -- keras.applications' ResNets put the stride on the first
1x1 conv and give every conv a bias, its VGG16 flattens without adaptive pooling, its
EfficientNet uses BN eps 1e-3 and in-model input normalization -- so their parameter counts
and FLOPs differ from each other and from bench's; the trial logs them as usual, which is the
point of the option.

Which (framework, model) pairs exist is the static table in :data:`bench.trial.models.MODELS`
(``stock_torch``/``stock_keras``), checked by config validation before any trial starts.
torchvision is an optional install (it must match the installed torch build); without it a
torch stock trial fails with a message saying so.  Inception-v3 is built without its
auxiliary classifier in both libraries, as bench's is.

``model=keras`` and ``model=torchvision`` (model.source=keras|torchvision) build any model of
the same two libraries by its own name, the same way (:func:`keras_model`,
:func:`torchvision_model`), and ``model=timm`` any of timm's (:func:`timm_model`:
``timm.create_model(name, pretrained=False, num_classes=...)``, torch only; timm needs
torchvision too); :mod:`bench.trial.models.custom` checks the name before any trial.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol


class ModelSpec(Protocol):
    """What this module needs of a :class:`bench.trial.models.ModelSpec` (not imported: the
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


def timm_missing() -> str:
    """Why ``model=timm`` cannot load here: timm or torchvision (which timm imports) is not
    installed ('' if both are; whether they import is the probe's to find)."""
    import importlib.util

    absent = [n for n in ("timm", "torchvision") if importlib.util.find_spec(n) is None]
    if not absent:
        return ""
    return (
        f"timm needs {' and '.join(absent)}, not installed for {sys.executable}; install the "
        "timm extra where torchvision matches the torch build (pip install 'bench[timm]' "
        "beside pip's torch), or run in a framework.version environment that has them"
    )


def _timm() -> Any:
    """timm, imported; RuntimeError with the reason where it (or torchvision) cannot load."""
    missing = timm_missing()
    if missing:
        raise RuntimeError(missing)
    try:
        import timm
    except Exception as exc:  # noqa: BLE001 - a torchvision built for another torch raises anything
        last = (str(exc).strip().splitlines() or [""])[-1]
        raise RuntimeError(
            f"timm cannot be imported by {sys.executable}: {type(exc).__name__}: {last} "
            "(torchvision must match this torch build)"
        ) from exc
    return timm


def timm_model(name: str, num_classes: int) -> Any:
    """``timm.create_model(name)`` with random weights and ``num_classes`` logits."""
    return _timm().create_model(name, pretrained=False, num_classes=num_classes)


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
    (``source="keras"``), torchvision.models' builders (``"torchvision"``: needs torchvision),
    timm's architectures (``"timm"``: needs timm and torchvision)."""
    if source == "keras":
        import keras

        return sorted(n for n in dir(keras.applications) if n[:1].isupper())
    if source == "timm":
        return sorted(_timm().list_models())
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
