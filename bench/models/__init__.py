"""The model zoo: one module per architecture, each with a PyTorch and a Keras builder.

Keeping both builders of an architecture side by side in one module makes parity easy to
audit; the tests check that both have the same parameter count.  Nothing here imports a
framework until a builder is called.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.config import ModelConfig


# The builder function each model module has for a framework ("mxnet": Gluon, for the
# models listed by mxnet_models()).
BUILDERS = {"torch": "build_torch", "tf": "build_keras", "mxnet": "build_mxnet"}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    module: str
    # torchvision's parameter count at the reference input with 1000 classes.
    reference_params: int
    reference_image_size: int = 224
    # Smallest image_size accepted: the architecture's own minimum, never below 32 (CIFAR,
    # the smallest size the studies and the parity tests use).
    min_image_size: int = 32
    # Classes of the reference count (not 1000 only where torchvision has no such model).
    reference_num_classes: int = 1000
    # Keyword arguments this model's builders take (e.g. a ResNet's depth).
    options: tuple[tuple[str, int], ...] = ()
    # The frameworks' own library versions, for model.source=stock: a torchvision.models
    # function and a keras.applications class; "" where the library has none.
    stock_torch: str = ""
    stock_keras: str = ""
    # What the model does, which decides its data and loss (see TASKS).  Models of any other
    # task than "image" are built from the sizes in ModelConfig (model.seq_len, ...), and
    # their reference_params is the count at the sizes in conf/model/<name>.yaml.
    task: str = "image"

    def builder(self, framework: str) -> Any:
        module = importlib.import_module(f"bench.models.{self.module}")
        fn = getattr(module, BUILDERS[framework])
        return functools.partial(fn, **dict(self.options)) if self.options else fn

    def has_builder(self, framework: str) -> bool:
        """Whether bench builds this model for ``framework`` (imports no framework)."""
        module = importlib.import_module(f"bench.models.{self.module}")
        return hasattr(module, BUILDERS[framework])

    def stock_name(self, framework: str) -> str:
        """The library model model.source=stock builds for ``framework``; "" if none."""
        return {"torch": self.stock_torch, "tf": self.stock_keras}.get(framework, "")


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("vgg16", "vgg", reference_params=138_357_544,
                  stock_torch="vgg16", stock_keras="VGG16"),
        ModelSpec("resnet50", "resnet", reference_params=25_557_032,
                  stock_torch="resnet50", stock_keras="ResNet50"),
        ModelSpec("lenet5", "lenet", reference_params=62_006, reference_image_size=32,
                  reference_num_classes=10),
        ModelSpec("alexnet", "alexnet", reference_params=61_100_840, min_image_size=63,
                  stock_torch="alexnet"),
        ModelSpec("resnet18", "resnet", reference_params=11_689_512, options=(("depth", 18),),
                  stock_torch="resnet18"),
        ModelSpec("resnet152", "resnet", reference_params=60_192_808,
                  options=(("depth", 152),), stock_torch="resnet152", stock_keras="ResNet152"),
        ModelSpec("mobilenet_v2", "mobilenet", reference_params=3_504_872,
                  stock_torch="mobilenet_v2", stock_keras="MobileNetV2"),
        ModelSpec("efficientnet_b4", "efficientnet", reference_params=19_341_616,
                  stock_torch="efficientnet_b4", stock_keras="EfficientNetB4"),
        # Without the auxiliary classifier: torchvision's inception_v3(aux_logits=False).
        ModelSpec("inception_v3", "inception", reference_params=23_834_568,
                  reference_image_size=299, min_image_size=75,
                  stock_torch="inception_v3", stock_keras="InceptionV3"),
        # Sequence models (bench/models/lstm.py, transformer.py, deepspeech2.py).
        ModelSpec("lstm", "lstm", reference_params=19_780_400, task="causal_lm"),
        ModelSpec("transformer", "transformer", reference_params=11_201_594,
                  task="masked_lm"),
        ModelSpec("bert_base", "transformer", reference_params=109_514_298,
                  task="masked_lm"),
        ModelSpec("deepspeech2", "deepspeech2", reference_params=5_042_941, task="ctc"),
    )
}  # fmt: skip

# "image": logits (N, classes) from images, cross-entropy.  "causal_lm": logits at every
# position of a token sequence, cross-entropy against the next token.  "masked_lm": the
# same, with the loss at masked positions only.  "ctc": per-frame character logits from a
# spectrogram, CTC loss against a label sequence.
TASKS = ("image", "causal_lm", "masked_lm", "ctc")
# The ModelConfig fields sequence models are sized by; each must be >= 1.
SEQUENCE_SIZES = (
    "seq_len", "vocab_size", "layers", "hidden", "heads", "intermediate", "max_positions",
    "freq_bins",
)  # fmt: skip

SOURCES = ("bench", "stock")


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


def build(
    framework: str, name: str, num_classes: int, image_size: int, source: str = "bench"
) -> Any:
    """Build model ``name`` for ``framework`` ("torch" or "tf"): bench's own architecture or,
    with ``source="stock"``, the framework library's model of that name."""
    if source == "stock":
        from bench.models import stock

        return stock.build(framework, MODELS[name], num_classes, image_size)
    return MODELS[name].builder(framework)(num_classes=num_classes, image_size=image_size)


def check_sequence_model(model: ModelConfig) -> list[str]:
    """Problems with the sizes in ``model`` (a model of a task other than "image")."""
    problems = [
        f"model.{key}: must be >= 1, got {getattr(model, key)}"
        for key in SEQUENCE_SIZES
        if getattr(model, key) < 1
    ]
    if problems:  # the architecture's own checks assume positive sizes
        return problems
    module = importlib.import_module(f"bench.models.{MODELS[model.name].module}")
    found: list[str] = module.check(model)
    return found


def build_sequence(framework: str, model: ModelConfig) -> Any:
    """Build sequence model ``model.name`` for ``framework`` from the sizes in ``model``."""
    return MODELS[model.name].builder(framework)(model)
