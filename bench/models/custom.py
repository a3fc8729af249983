"""Models that are not the zoo's (docs/your-model.md): your own builder (``model=py``) and a
library's image model by its own name (``model=keras``, ``model=torchvision``).

A builder is ``MODULE:FUNCTION`` (``model.builder``, or ``model.torch`` / ``model.tf`` for one
framework), imported from an installed package or from the working directory, which a
process trial shares with the host (the worker is ``python -m bench.trial.worker`` started
in the host's directory).  It is called as ``FUNCTION(framework=..., num_classes=...,
input_shape=...)``, ``input_shape`` being one sample in the framework's layout ((3, H, W)
for torch, (H, W, 3) for tf), and returns the framework's model (a ``torch.nn.Module``, a
``keras.Model``) whose output is the logits.  :func:`digest` hashes the builders' module
sources into ``model.digest`` at composition, so an edited builder is a new configuration;
the trial checks that the source it imports is still the one hashed.

``python -m bench.models.custom JSON`` is the probe the host runs before a sweep
(:mod:`bench.checks.own_models`) with the trial's interpreter: it imports and builds the
model as a trial would and prints its parameter count, or the one-line problem (naming the
key) that refuses it.  Nothing here imports a framework until a model is built.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Protocol

from bench.core.zoo import LIBRARY_FRAMEWORK

SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
# What each framework's builder must return.
MODEL_TYPES = {"torch": "torch.nn.Module", "tf": "keras.Model"}
LIBRARIES = {"keras": "keras.applications", "torchvision": "torchvision.models", "timm": "timm"}


class OwnModel(Protocol):
    """What this module reads of a :class:`bench.core.config.ModelConfig`."""

    name: str
    source: str
    builder: str
    torch: str
    tf: str
    digest: str


def builder_key(model: OwnModel, framework: str) -> tuple[str, str]:
    """The key that names ``framework``'s builder and its value: ``model.<framework>``
    where set, else ``model.builder``."""
    own = str(getattr(model, framework, "") or "") if framework in MODEL_TYPES else ""
    return (f"model.{framework}", own) if own else ("model.builder", model.builder)


def modules(model: OwnModel) -> list[str]:
    """The modules the builders of ``model`` live in, sorted, each once."""
    named = (model.builder, model.torch, model.tf)
    return sorted({text.partition(":")[0] for text in named if SPEC.fullmatch(text)})


def _working_directory_importable() -> None:
    """A module in the working directory imports as it does under ``python -m`` (the
    ``bench`` command's interpreter does not put it on ``sys.path``); installed ones first."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)


def module_source(module: str) -> bytes:
    """The source of ``module`` as an import would find it, without importing it (a
    package's ``__init__`` above it does run)."""
    _working_directory_importable()
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ModuleNotFoundError(f"No module named {module!r}")
    return Path(spec.origin).read_bytes()


def digest(model: OwnModel) -> str:
    """The SHA-256 (16 hex digits) of the builders' module sources; raises where a module
    cannot be found."""
    h = hashlib.sha256()
    for module in modules(model):
        h.update(module.encode() + b"\0" + module_source(module) + b"\0")
    return h.hexdigest()[:16]


def load(text: str) -> Any:
    """The function ``MODULE:FUNCTION`` names."""
    module, _, function = text.partition(":")
    _working_directory_importable()
    found = getattr(importlib.import_module(module), function, None)
    if not callable(found):
        raise AttributeError(f"module {module!r} has no function {function!r}")
    return found


def input_shape(framework: str, image_size: int) -> tuple[int, int, int]:
    """One sample's shape in the framework's own layout."""
    return (3, image_size, image_size) if framework == "torch" else (image_size, image_size, 3)


def is_model(framework: str, obj: Any) -> bool:
    if framework == "torch":
        import torch

        return isinstance(obj, torch.nn.Module)
    import keras

    return isinstance(obj, keras.Model)


def _build_own(framework: str, model: OwnModel, num_classes: int, image_size: int) -> Any:
    key, text = builder_key(model, framework)
    if model.digest and digest(model) != model.digest:
        raise RuntimeError(
            f"{key}: the source of {', '.join(modules(model))} changed after the sweep was "
            "composed (model.digest); run the sweep again"
        )
    shape = input_shape(framework, image_size)
    built = load(text)(framework=framework, num_classes=num_classes, input_shape=shape)
    if not is_model(framework, built):
        raise TypeError(
            f"{key}: {text} returned {type(built).__module__}.{type(built).__qualname__}, "
            f"not a {MODEL_TYPES[framework]} (framework={framework})"
        )
    if framework == "tf" and not built.built:
        built.build((None, *shape))
    return built


def build(framework: str, model: OwnModel, num_classes: int, image_size: int) -> Any:
    """The model ``model`` names for ``framework`` (model.source py, keras, torchvision or
    timm)."""
    if model.source == "py":
        return _build_own(framework, model, num_classes, image_size)
    from bench.models.stock import keras_model, timm_model, torchvision_model

    if model.source == "keras":
        return keras_model(model.name, num_classes, image_size)
    if model.source == "timm":
        return timm_model(model.name, num_classes)
    return torchvision_model(model.name, num_classes)


def count_parameters(framework: str, built: Any) -> int:
    """Trainable parameters, as the trial's session counts them."""
    if framework == "torch":
        return int(sum(p.numel() for p in built.parameters()))
    import numpy as np

    return int(sum(np.prod(w.shape) for w in built.trainable_weights))


def _last_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


def _name_problem(framework: str, model: OwnModel) -> str:
    """Why ``model.name`` is not a model of its library ('' if it is)."""
    from bench.models.stock import library_names

    names = library_names(model.source)
    if model.name in names:
        return ""
    near = difflib.get_close_matches(model.name, names, n=4, cutoff=0.5) or names[:6]
    return (
        f"model.name: {LIBRARIES[model.source]} has no {model.name!r}; nearest: {', '.join(near)}"
    )


def probe(framework: str, model: OwnModel, num_classes: int, image_size: int) -> dict[str, Any]:
    """Build ``model`` for ``framework`` as a trial would: ``{"num_parameters": N}``, or
    ``{"problem": LINE}`` naming the key that refuses it."""
    if model.source == "py":
        key, text = builder_key(model, framework)
        try:
            load(text)
        except Exception as exc:  # noqa: BLE001 - any import error is the user's to see
            return {"problem": f"{key}: cannot import {text}: {_last_line(exc)}"}
    else:
        if LIBRARY_FRAMEWORK.get(model.source) != framework:
            return {"problem": f"model.source: {model.source} builds for framework="
                               f"{LIBRARY_FRAMEWORK.get(model.source)} only"}  # fmt: skip
        try:
            problem = _name_problem(framework, model)
        except RuntimeError as exc:  # the library cannot load here
            return {"problem": f"model.source: {exc}"}
        if problem:
            return {"problem": problem}
        key, text = "model.name", model.name
    try:
        built = build(framework, model, num_classes, image_size)
    except TypeError as exc:
        if str(exc).startswith(f"{key}: "):
            return {"problem": str(exc)}
        return {"problem": f"{key}: {text} raised {_last_line(exc)}"}
    except Exception as exc:  # noqa: BLE001 - the builder's own failure, reported as its key's
        return {"problem": f"{key}: {text} raised {_last_line(exc)}"}
    return {"num_parameters": count_parameters(framework, built)}


class _Model:
    """A model config from the probe's JSON (the host sends the fields this module reads)."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.name, self.source = fields["name"], fields["source"]
        self.builder, self.torch, self.tf = fields["builder"], fields["torch"], fields["tf"]
        self.digest = ""


def main(argv: list[str]) -> int:
    request = json.loads(argv[0])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    out = probe(
        request["framework"], _Model(request["model"]), request["num_classes"],
        request["image_size"],
    )  # fmt: skip
    print("BENCH_PROBE " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
