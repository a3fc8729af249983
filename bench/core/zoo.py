"""The zoo's registry: each model's name, the module of bench.trial.models that builds it, its
reference parameter count, its task and its stock twins.  Facts only: nothing here imports a
framework or a model module until a builder is asked for (:meth:`ModelSpec.builder`), so
the configuration's identity and the checks can read it anywhere."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.core.frameworks import FRAMEWORKS, JAX, TF, TORCH

# The builder function each model module has for a framework (MXNet's: Gluon, for the
# models listed by mxnet_models()).
BUILDERS = {name: spec.builder for name, spec in FRAMEWORKS.items()}


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

    def builder(self, framework: str, source: str = "bench") -> Any:
        module = importlib.import_module(f"bench.trial.models.{self.module}")
        fn = getattr(module, _builder_name(framework, source))
        return functools.partial(fn, **dict(self.options)) if self.options else fn

    def has_builder(self, framework: str, source: str = "bench") -> bool:
        """Whether bench builds this model for ``framework`` (from ``source``: bench's own
        builder, or a native source's) (imports no framework)."""
        module = importlib.import_module(f"bench.trial.models.{self.module}")
        return hasattr(module, _builder_name(framework, source))

    def stock_name(self, framework: str) -> str:
        """The library model model.source=stock builds for ``framework``; "" if none."""
        return {TORCH: self.stock_torch, TF: self.stock_keras}.get(framework, "")


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
        # Sequence models (bench/trial/models/lstm.py, transformer.py, deepspeech2.py).
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
# The zoo's architectures written in a framework's own library, layer for layer like bench's
# builders (equal parameter counts): the source, the one framework it builds for and the
# builder function each model module has for it.  "flax": Flax NNX, for framework=jax (whose
# model.source=bench builds the Keras models on Keras' JAX backend).
NATIVE_SOURCES = {"flax": (JAX, "build_flax")}
# Models that are not the zoo's (docs/your-model.md): your own builder ("py"), and a library's
# image model by its own name ("keras": keras.applications, framework=tf; "torchvision":
# torchvision.models, framework=torch; "timm": timm.create_model, framework=torch), and a
# Hugging Face causal LM by its family ("hf": built from its config class,
# bench.trial.models.hf_lm).  Their task is declared (model.task), not a fact, except hf's: a
# causal LM.
OWN_SOURCES = ("py", "keras", "torchvision", "timm", "hf")
ALL_SOURCES = (*SOURCES, *NATIVE_SOURCES, *OWN_SOURCES)
# The tasks a model of model=py may declare: "image" (logits (N, classes) from images) and
# "causal_lm" (token ids (N, seq) to logits (N, seq, vocab), next-token loss).
OWN_TASKS = ("image", "causal_lm")
# The one framework each library source builds for.
LIBRARY_FRAMEWORK = {"keras": TF, "torchvision": TORCH, "timm": TORCH}


def _builder_name(framework: str, source: str) -> str:
    native = NATIVE_SOURCES.get(source)
    return native[1] if native is not None and native[0] == framework else BUILDERS[framework]


def task_of(name: str, source: str, declared: str = "") -> str:
    """The task of model ``name`` from ``source``: the zoo's fact, or what a model of
    OWN_SOURCES declares (model.task; "image" where it declares none); "" for a name the zoo
    does not have."""
    if source == "hf":
        return "causal_lm"
    if source in OWN_SOURCES:
        return declared or "image"
    spec = MODELS.get(name)
    return spec.task if spec is not None else ""


# The builder keys of model=py, in the order a label names them.
_BUILDER_KEYS = ("model.builder", "model.torch", "model.tf")


def model_label(flat: Mapping[str, Any]) -> str:
    """A model as the report and the sweep's summary name it, from a flat config or a run's
    params: ``model.name`` for the zoo's own architecture, ``SOURCE:NAME`` for any other
    source (``stock:resnet50``, ``torchvision:resnet50``, ``hf:llama``), so that two networks
    never share one name.  model=py is named by its builders
    (``py:examples.custom_cnn:build``), or by its own ``model.name`` where one is given."""
    name = str(flat.get("model.name") or "?")
    source = str(flat.get("model.source") or "bench")
    if source == "bench":
        return name
    if source == "py" and name == "py":
        builders = [str(flat[k]) for k in _BUILDER_KEYS if flat.get(k)]
        name = ",".join(dict.fromkeys(builders)) or name
    return f"{source}:{name}"
