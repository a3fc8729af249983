"""The model zoo: one module per architecture, each with a PyTorch and a Keras builder (and,
for some, a Gluon and a Flax NNX one).

Keeping both builders of an architecture side by side in one module makes parity easy to
audit; the tests check that both have the same parameter count.  Nothing here imports a
framework until a builder is called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bench.core.zoo import (  # the registry, re-exported: bench.trial.models is its public face
    BUILDERS,
    MODELS,
    NATIVE_SOURCES,
    OWN_SOURCES,
    SEQUENCE_SIZES,
    SOURCES,
    TASKS,
    ModelSpec,
)

if TYPE_CHECKING:
    from bench.core.config import ModelConfig

__all__ = [
    "BUILDERS",
    "MODELS",
    "NATIVE_SOURCES",
    "OWN_SOURCES",
    "SEQUENCE_SIZES",
    "SOURCES",
    "TASKS",
    "ModelSpec",
]


def mxnet_models() -> list[str]:
    """The models bench builds with Gluon (framework=mxnet)."""
    return [name for name, spec in MODELS.items() if spec.has_builder("mxnet")]


def framework_problem(framework: str, name: str) -> str:
    """Why bench cannot build model ``name`` for ``framework`` ('' if it can)."""
    if framework not in BUILDERS or MODELS[name].has_builder(framework):
        return ""
    return (
        f"model: {name} has no {framework} build; models for framework={framework}: "
        f"{', '.join(mxnet_models() if framework == 'mxnet' else [])}"
    )


def stock_problem(framework: str, name: str) -> str:
    """Why model.source=stock cannot build ``name`` for ``framework`` ('' if it can)."""
    if MODELS[name].stock_name(framework):
        return ""
    if framework == "mxnet":
        return (
            "model.source: stock models are not wired for framework=mxnet; use model.source=bench"
        )
    library = "torchvision.models" if framework == "torch" else "keras.applications"
    have = ", ".join(n for n, spec in MODELS.items() if spec.stock_name(framework))
    return (
        f"model.source: {library} has no {name}, so model.source=stock cannot run it with "
        f"framework={framework}; stock models for {framework}: {have} (or use model.source=bench)"
    )


def native_problem(framework: str, name: str, source: str) -> str:
    """Why model.source=``source`` (one of NATIVE_SOURCES: flax) cannot build ``name`` for
    ``framework`` ('' if it can)."""
    owner = NATIVE_SOURCES[source][0]
    if framework != owner:
        return (
            f"model.source: {source} builds its models for framework={owner} only, not "
            f"framework={framework}; allowed with framework={framework}: bench, stock"
        )
    if MODELS[name].has_builder(framework, source):
        return ""
    have = ", ".join(n for n, spec in MODELS.items() if spec.has_builder(framework, source))
    return (
        f"model.source: {source} has no {name}; {source} models: {have} (or use model.source=bench)"
    )


def build(
    framework: str,
    name: str,
    num_classes: int,
    image_size: int,
    source: str = "bench",
    seed: int = 0,
) -> Any:
    """Build model ``name`` for ``framework`` ("torch" or "tf"): bench's own architecture or,
    with ``source="stock"``, the framework library's model of that name; with a native
    source (``"flax"``), the architecture in that library, its weights drawn from ``seed``
    (the other frameworks draw theirs from their global seed)."""
    if source == "stock":
        from bench.trial.models import stock

        return stock.build(framework, MODELS[name], num_classes, image_size)
    builder = MODELS[name].builder(framework, source)
    if source in NATIVE_SOURCES:
        return builder(num_classes=num_classes, image_size=image_size, seed=seed)
    return builder(num_classes=num_classes, image_size=image_size)


def task(model: ModelConfig) -> str:
    """The task of the model ``model`` configures ("image" for a name the zoo lacks)."""
    from bench.core.zoo import task_of

    return task_of(model.name, model.source, model.task) or "image"


def own_causal_lm(model: ModelConfig) -> bool:
    """Whether ``model`` is a causal LM of model=hf or model=py: one bench can generate with
    (mode=generate) and whose forward it counts on a sample of tokens."""
    return model.source in ("hf", "py") and task(model) == "causal_lm"


def build_image(
    framework: str, model: ModelConfig, num_classes: int, image_size: int, seed: int = 0
) -> Any:
    """Build the image model ``model`` configures for ``framework``: the zoo's (or its stock
    or Flax twin), your own builder's (model=py), or a library's by name (model=keras,
    torchvision)."""
    if model.source in OWN_SOURCES:
        from bench.trial.models import custom

        return custom.build(framework, model, num_classes, image_size)
    return build(framework, model.name, num_classes, image_size, model.source, seed)


def check_sequence_model(model: ModelConfig) -> list[str]:
    """Problems with the sizes in ``model`` (a model of a task other than "image")."""
    problems = [
        f"model.{key}: must be >= 1, got {getattr(model, key)}"
        for key in SEQUENCE_SIZES
        if getattr(model, key) < 1
    ]
    if problems:  # the architecture's own checks assume positive sizes
        return problems
    module = importlib.import_module(f"bench.trial.models.{MODELS[model.name].module}")
    found: list[str] = module.check(model)
    return found


def build_sequence(framework: str, model: ModelConfig, seed: int = 0) -> Any:
    """Build sequence model ``model.name`` for ``framework`` from the sizes in ``model``
    (model=hf: the Hugging Face family's causal LM, :mod:`bench.trial.models.hf_lm`; under tf,
    keras-hub's at the same sizes, :mod:`bench.trial.models.keras_hub_lm`; model=py: your builder's
    causal LM, :mod:`bench.trial.models.custom`; a native source (model.source=flax): the zoo's
    model in that library, its weights drawn from ``seed``)."""
    if model.source == "py":
        from bench.trial.models import custom

        return custom.build_lm(framework, model)
    if model.source == "hf":
        from bench.trial.models import hf_lm

        if framework == "tf":
            from bench.trial.models import keras_hub_lm

            return keras_hub_lm.build_tf(model)
        if framework != "torch":
            raise ValueError(f"model=hf builds for framework=torch and tf, not {framework}")
        return hf_lm.build_torch(model)
    if model.source in NATIVE_SOURCES:
        return MODELS[model.name].builder(framework, model.source)(model, seed=seed)
    return MODELS[model.name].builder(framework)(model)
