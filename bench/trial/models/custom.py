"""Models that are not the zoo's (docs/your-model.md): your own builder (``model=py``) and a
library's image model by its own name (``model=keras``, ``model=torchvision``).

A builder is ``MODULE:FUNCTION`` (``model.builder``, or ``model.torch`` / ``model.tf`` for one
framework), imported from an installed package or from the working directory, which a
process trial shares with the host (the worker is ``python -m bench.trial.worker`` started
in the host's directory).  It is called as ``FUNCTION(framework=..., num_classes=...,
input_shape=...)``, ``input_shape`` being one sample in the framework's layout ((3, H, W)
for torch, (H, W, 3) for tf), and returns the framework's model (a ``torch.nn.Module``, a
``keras.Model``) whose output is the logits.  A causal LM of your own (``model.task=
causal_lm``) is called as ``FUNCTION(framework=..., vocab_size=..., hidden=..., layers=...,
heads=..., intermediate=..., max_positions=..., seq_len=...)`` (bench's sequence sizes,
:data:`LM_SIZES`) and maps token ids (batch, seq) to logits (batch, seq, vocab_size); it
runs under ``mode=generate`` where it has the cached forward of :data:`CACHE_METHODS`
(``init_cache(batch_size, max_length)``, ``cached_forward(token_ids, cache, index)`` ->
``(logits, cache)``).  :func:`digest` hashes the builders' module
sources into ``model.digest`` at composition, so an edited builder is a new configuration;
the trial checks that the source it imports is still the one hashed.

``python -m bench.trial.models.custom JSON`` is the probe the host runs before a sweep
(:mod:`bench.checks.own_models`) with the trial's interpreter: it imports and builds the
model as a trial would and prints its parameter count, or the one-line problem (naming the
key) that refuses it.  Nothing here imports a framework until a model is built.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench.core.zoo import LIBRARY_FRAMEWORK

SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
# What each framework's builder must return.
MODEL_TYPES = {"torch": "torch.nn.Module", "tf": "keras.Model"}
LIBRARIES = {"keras": "keras.applications", "torchvision": "torchvision.models", "timm": "timm"}
# The sizes a causal LM's builder receives, as keyword arguments (bench's sequence keys).
LM_SIZES = ("vocab_size", "hidden", "layers", "heads", "intermediate", "max_positions", "seq_len")
# What a causal LM of your own has for mode=generate: init_cache(batch_size, max_length) ->
# cache; cached_forward(token_ids, cache, index) -> (logits (batch, n, vocab), cache).
CACHE_METHODS = ("init_cache", "cached_forward")
# The probe's batch: 2 sequences of up to 5 tokens (3 of prompt, then one cached step).
_PROBE_BATCH, _PROBE_TOKENS = 2, 5


class OwnModel(Protocol):
    """What this module reads of a :class:`bench.core.config.ModelConfig`."""

    name: str
    source: str
    builder: str
    torch: str
    tf: str
    digest: str
    task: str
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    seq_len: int


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


def _check_digest(model: OwnModel, key: str) -> None:
    """Raise where the builders' modules changed since the sweep was composed."""
    if model.digest and digest(model) != model.digest:
        raise RuntimeError(
            f"{key}: the source of {', '.join(modules(model))} changed after the sweep was "
            "composed (model.digest); run the sweep again"
        )


def _build_own(framework: str, model: OwnModel, num_classes: int, image_size: int) -> Any:
    key, text = builder_key(model, framework)
    _check_digest(model, key)
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


def build_lm(framework: str, model: OwnModel) -> Any:
    """The causal LM your builder returns for ``framework`` (model=py model.task=causal_lm),
    from bench's sequence sizes; a keras.Model that is not built yet is built by a forward
    pass of one sequence of ``seq_len`` tokens."""
    key, text = builder_key(model, framework)
    _check_digest(model, key)
    sizes = {size: int(getattr(model, size)) for size in LM_SIZES}
    built = load(text)(framework=framework, **sizes)
    if not is_model(framework, built):
        raise TypeError(
            f"{key}: {text} returned {type(built).__module__}.{type(built).__qualname__}, "
            f"not a {MODEL_TYPES[framework]} (framework={framework})"
        )
    if framework == "tf" and not built.built:
        import numpy as np

        built(np.zeros((1, min(model.seq_len, model.max_positions)), dtype=np.int64))
    return built


def greedy_step(built: Any) -> Callable[[Any, Any, Any], tuple[Any, Any]]:
    """``step(tokens, cache, index) -> (next tokens (batch, 1), cache)`` of your Keras causal
    LM (the TF adapter's generation loop, in a ``tf.function``): its ``cached_forward`` of the
    tokens at positions ``index...``, the next token the argmax of the last position's logits."""
    import keras

    def step(tokens: Any, cache: Any, index: Any) -> tuple[Any, Any]:
        logits, cache = built.cached_forward(tokens, cache, index)
        chosen = keras.ops.argmax(logits[:, -1:, :], axis=-1)
        return keras.ops.cast(chosen, tokens.dtype), cache

    return step


def build(framework: str, model: OwnModel, num_classes: int, image_size: int) -> Any:
    """The model ``model`` names for ``framework`` (model.source py, keras, torchvision or
    timm)."""
    if model.source == "py":
        return _build_own(framework, model, num_classes, image_size)
    from bench.trial.models.stock import keras_model, timm_model, torchvision_model

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
    from bench.trial.models.stock import library_names

    names = library_names(model.source)
    if model.name in names:
        return ""
    near = difflib.get_close_matches(model.name, names, n=4, cutoff=0.5) or names[:6]
    return (
        f"model.name: {LIBRARIES[model.source]} has no {model.name!r}; nearest: {', '.join(near)}"
    )


def _built(key: str, text: str, make: Callable[[], Any]) -> tuple[Any, str]:
    """``(model, '')`` from ``make()``, or ``(None, LINE)`` naming ``key`` where the builder
    ``text`` raises (a TypeError that already names the key is said as it is)."""
    try:
        return make(), ""
    except TypeError as exc:
        if str(exc).startswith(f"{key}: "):
            return None, str(exc)
        return None, f"{key}: {text} raised {_last_line(exc)}"
    except Exception as exc:  # noqa: BLE001 - the builder's own failure, reported as its key's
        return None, f"{key}: {text} raised {_last_line(exc)}"


def _unimportable(key: str, text: str) -> str:
    """Why builder ``text`` (given as ``key``) cannot be imported; '' if it can."""
    try:
        load(text)
    except Exception as exc:  # noqa: BLE001 - any import error is the user's to see
        return f"{key}: cannot import {text}: {_last_line(exc)}"
    return ""


def probe(framework: str, model: OwnModel, num_classes: int, image_size: int) -> dict[str, Any]:
    """Build ``model`` for ``framework`` as a trial would: ``{"num_parameters": N}``, or
    ``{"problem": LINE}`` naming the key that refuses it."""
    if model.source == "py":
        key, text = builder_key(model, framework)
        problem = _unimportable(key, text)
        if problem:
            return {"problem": problem}
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
    built, problem = _built(key, text, lambda: build(framework, model, num_classes, image_size))
    if problem:
        return {"problem": problem}
    return {"num_parameters": count_parameters(framework, built)}


def _tensor(framework: str, array: Any) -> Any:
    if framework == "torch":
        import torch

        return torch.from_numpy(array)
    import keras

    return keras.ops.convert_to_tensor(array)


def _shape(out: Any) -> tuple[int, ...] | None:
    shape = getattr(out, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def _described(out: Any) -> str:
    shape = _shape(out)
    return f"shape {shape}" if shape is not None else f"a {type(out).__qualname__}"


def _numpy(out: Any) -> Any:
    import numpy as np

    detach = getattr(out, "detach", None)  # a torch tensor
    return np.asarray((detach().float().cpu() if detach else out), dtype=np.float32)


def _cache_problem(framework: str, built: Any, model: OwnModel, tokens: Any) -> str:
    """Why ``built`` cannot run mode=generate ('' if it can): no cached forward
    (:data:`CACHE_METHODS`), one that fails or returns the wrong shapes, or logits that are
    not the forward pass's (a prefill of all but the last token, then one cached step)."""
    key, text = builder_key(model, framework)
    lacking = [name for name in CACHE_METHODS if not callable(getattr(built, name, None))]
    if lacking:
        return (
            f"mode: generate runs a causal LM of model=py through its cached forward, and "
            f"{text}'s {framework} model has no {' nor '.join(lacking)}; add init_cache("
            "batch_size, max_length) and cached_forward(token_ids, cache, index) -> (logits, "
            "cache) (docs/your-model.md), or use mode=train"
        )
    batch, length = tokens.shape
    if length < 2:
        return ""
    import numpy as np

    vocab = model.vocab_size
    try:
        with _inference(framework, built):
            cache = built.init_cache(batch, length)
            steps = []
            for start, stop in ((0, length - 1), (length - 1, length)):
                index = start if framework == "torch" else _tensor(framework, np.int32(start))
                part = _tensor(framework, tokens[:, start:stop])
                logits, cache = built.cached_forward(part, cache, index)
                if _shape(logits) != (batch, stop - start, vocab):
                    return (
                        f"{key}: {text}'s cached_forward of token ids ({batch}, {stop - start})"
                        f" returned logits of {_described(logits)}, not (batch, n, vocab_size)"
                        f" = ({batch}, {stop - start}, {vocab})"
                    )
                steps.append(_numpy(logits)[:, -1])
    except Exception as exc:  # noqa: BLE001 - the user's cached forward failing
        return f"{key}: {text}'s init_cache/cached_forward raised {_last_line(exc)}"
    full = _numpy(_forward(framework, built, tokens))
    expected = np.stack([full[:, length - 2], full[:, -1]])
    worst = float(np.abs(np.stack(steps) - expected).max())
    if not worst <= 1e-3 * (1.0 + float(np.abs(expected).max())):
        return (
            f"{key}: {text}'s cached_forward gives other logits than its forward pass on the "
            f"same tokens (largest difference {worst:.3g}); the cache must hold every "
            "position given before index"
        )
    return ""


def _inference(framework: str, built: Any) -> Any:
    """A context without gradients, ``built`` in eval mode (torch); nothing for Keras."""
    if framework != "torch":
        return contextlib.nullcontext()
    import torch

    built.eval()
    return torch.no_grad()


def _forward(framework: str, built: Any, tokens: Any) -> Any:
    """One forward pass of ``built`` (eval mode, no gradients) on numpy ``tokens``."""
    with _inference(framework, built):
        if framework == "torch":
            return built(_tensor(framework, tokens))
        return built(_tensor(framework, tokens), training=False)


def probe_lm(framework: str, model: OwnModel) -> dict[str, Any]:
    """Build your causal LM for ``framework`` as a trial would and run it on two short random
    sequences: ``{"num_parameters": N, "generate": LINE}`` (``LINE``: why mode=generate
    cannot run it, '' if it can), or ``{"problem": LINE}`` naming the key that refuses it."""
    import numpy as np

    key, text = builder_key(model, framework)
    problem = _unimportable(key, text)
    if problem:
        return {"problem": problem}
    built, problem = _built(key, text, lambda: build_lm(framework, model))
    if problem:
        return {"problem": problem}
    length = min(_PROBE_TOKENS, model.seq_len, model.max_positions)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, model.vocab_size, size=(_PROBE_BATCH, length), dtype=np.int64)
    want = (_PROBE_BATCH, length, model.vocab_size)
    try:
        out = _forward(framework, built, tokens)
    except Exception as exc:  # noqa: BLE001 - the model's own failure on token ids
        return {"problem": f"{key}: {text}'s model raised {_last_line(exc)} on token ids of "
                           f"shape {want[:2]}"}  # fmt: skip
    if _shape(out) != want:
        return {
            "problem": f"{key}: {text}'s model maps token ids {want[:2]} to {_described(out)}, "
            f"not logits (batch, seq, vocab_size) = {want}"
        }
    prompt = (_PROBE_BATCH, min(_PROBE_TOKENS, model.max_positions))
    cache_tokens = rng.integers(0, model.vocab_size, size=prompt, dtype=np.int64)
    return {
        "num_parameters": count_parameters(framework, built),
        "generate": _cache_problem(framework, built, model, cache_tokens),
    }


class _Model:
    """A model config from the probe's JSON (the host sends the fields this module reads)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.name, self.source = fields["name"], fields["source"]
        self.builder, self.torch, self.tf = fields["builder"], fields["torch"], fields["tf"]
        self.digest = ""
        self.task = str(fields.get("task") or "image")
        size = {key: int(fields.get(key, 1)) for key in LM_SIZES}  # a causal LM's only
        self.vocab_size, self.hidden = size["vocab_size"], size["hidden"]
        self.layers, self.heads = size["layers"], size["heads"]
        self.intermediate, self.max_positions = size["intermediate"], size["max_positions"]
        self.seq_len = size["seq_len"]


def main(argv: list[str]) -> int:
    request = json.loads(argv[0])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    model = _Model(request["model"])
    if model.task == "causal_lm":
        out = probe_lm(request["framework"], model)
    else:
        out = probe(request["framework"], model, request["num_classes"], request["image_size"])
    print("BENCH_PROBE " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
