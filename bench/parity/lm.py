"""``python -m bench.parity --lm FAMILY``: the logit parity of a Hugging Face causal LM
between transformers (torch) and keras-hub (tf).

transformers builds the family at the given sizes with PyTorch's seeded random weights and
saves it as a local Hugging Face checkpoint (``save_pretrained``: config.json and
model.safetensors in a temporary folder); keras-hub loads that folder with
``Backbone.from_preset(<folder>)`` (its transformers converter), and both compute the
logits of one batch of random tokens.  Before any logit is compared, the backbone keras-hub
made of the checkpoint must be the one bench's own mapping builds for framework=tf at those
sizes (:mod:`bench.trial.models.keras_hub_lm`): a field the converter drops (gpt2's ``n_inner``,
which it takes as 4 x ``n_embd``) is a refusal naming it, not a silent difference.

The reference's weights are rounded to values float16 holds (keras-hub's mistral converter
passes every weight through float16), the logits computed in float32.  The figure is the
largest absolute logit difference over the largest absolute reference logit (``rel``),
which passes at most ``tolerance``; the absolute difference is printed beside it.
``perturb`` scales one weight of the keras side (the first block's query projection) by
``1 + perturb`` after loading, which a passing check must fail.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.core.frameworks import TF, TORCH

# float32 logits of a random-initialised LM agree to ~3e-7 of their size (summation order);
# 1% more in one query projection moves them ~1e-4 of their size (attention at random
# initialisation is nearly uniform, so a query's scale shows little).
DEFAULT_TOLERANCE = 1e-5
# _FLOAT16: keras-hub's mistral converter rounds every weight through float16 (its
# convert_mistral hooks), ~4e-4 of the logits' size, above a 1% change of a query
# projection; so the reference's weights are rounded to float16's values first (every
# family alike), which the converter then carries exactly.
# Small sizes the check runs at by default (seconds on a CPU), in transformers' field names.
SIZES: dict[str, int] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 512,
    "max_position_embeddings": 128,
}
# gpt2 has neither grouped key/value heads nor a settable MLP width keras-hub's converter
# keeps (n_inner: 4 x n_embd).
_NOT_IN = {"gpt2": ("num_key_value_heads", "intermediate_size")}


def default_sizes(family: str) -> dict[str, int]:
    return {k: v for k, v in SIZES.items() if k not in _NOT_IN.get(family, ())}


@dataclass
class LMParity:
    family: str
    overrides: dict[str, Any]
    num_parameters: dict[str, int] = field(default_factory=dict)
    max_abs: float = float("nan")
    rel: float = float("nan")
    tolerance: float = DEFAULT_TOLERANCE
    problem: str = ""  # a refusal: nothing compared

    @property
    def passed(self) -> bool:
        return not self.problem and self.rel <= self.tolerance

    def line(self) -> str:
        if self.problem:
            return f"{self.family}: refused: {self.problem}"
        verdict = "passed" if self.passed else "FAILED"
        counts = ", ".join(f"{k} {v:,}" for k, v in self.num_parameters.items())
        return (
            f"{self.family}: {verdict}: max |logit diff| {self.max_abs:.3g}, relative "
            f"{self.rel:.3g} (tolerance {self.tolerance:g}); parameters {counts}"
        )


def torch_model(family: str, overrides: Mapping[str, Any], seed: int) -> Any:
    """transformers' causal LM of ``family`` at ``overrides``, seeded random weights, fp32."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    config = AutoConfig.for_model(family, **dict(overrides))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model.eval()


def _converter_difference(family: str, overrides: Mapping[str, Any], backbone: Any) -> str:
    """The field whose value keras-hub's converter did not carry into ``backbone`` ('')."""
    from bench.trial.models import keras_hub_lm

    wanted = keras_hub_lm.backbone_kwargs(family, overrides)
    got = backbone.get_config()
    for key, value in wanted.items():
        if key not in got or got[key] == value:
            continue
        if isinstance(value, float) and isinstance(got[key], int | float):
            if abs(float(got[key]) - value) <= 1e-12 * max(1.0, abs(value)):
                continue
        source = keras_hub_lm.FAMILIES[family].sources.get(key, key)
        return (
            f"model.config.{source}: keras-hub's converter (Backbone.from_preset) makes "
            f"{key}={got[key]!r} of the checkpoint, bench's mapping {value!r}: it drops "
            f"{family}'s {source}, so the logit parity cannot check it"
        )
    return ""


def check_lm(
    family: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    batch: int = 2,
    seq_len: int = 16,
    seed: int = 0,
    perturb: float = 0.0,
) -> LMParity:
    """The logit parity of ``family`` at ``overrides`` (default: :data:`SIZES`)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import numpy as np
    import torch

    from bench.trial.models import keras_hub_lm

    sizes = dict(default_sizes(family) if overrides is None else overrides)
    out = LMParity(family, sizes, tolerance=tolerance)
    problem = keras_hub_lm.problems(family, sizes) or [keras_hub_lm.keras_hub_missing()]
    if problem[0]:
        out.problem = problem[0]
        return out
    import keras_hub

    reference = torch_model(family, sizes, seed)
    with torch.no_grad():  # weights float16 can hold: see _FLOAT16
        for parameter in reference.parameters():
            parameter.copy_(parameter.half().float())
    out.num_parameters[TORCH] = int(sum(p.numel() for p in reference.parameters()))
    vocab = int(reference.config.vocab_size)
    tokens = np.random.default_rng(seed).integers(0, vocab, size=(batch, seq_len))
    with torch.no_grad():
        expected = reference(torch.from_numpy(tokens)).logits.float().numpy()
    with tempfile.TemporaryDirectory(prefix="bench-lm-parity-") as folder:
        reference.save_pretrained(folder, safe_serialization=True)
        load = keras_hub.models.Backbone.from_preset
        out.problem = _converter_difference(family, sizes, load(folder, load_weights=False))
        if out.problem:
            return out
        backbone = load(folder, dtype="float32")
    lm = getattr(keras_hub.models, keras_hub_lm.FAMILIES[family].causal_lm)(
        backbone, preprocessor=None
    )
    model = keras_hub_lm.token_model(lm)
    out.num_parameters[TF] = keras_hub_lm.count_parameters(model)
    if perturb:
        kernel = _first_query_kernel(backbone)
        kernel.assign(kernel.numpy() * (1.0 + perturb))
    got = np.asarray(model(tokens.astype("int32"), training=False), dtype=np.float32)
    diff = np.abs(got - expected)
    out.max_abs = float(diff.max())
    out.rel = out.max_abs / max(float(np.abs(expected).max()), 1e-30)
    return out


def _first_query_kernel(backbone: Any) -> Any:
    """The query projection's kernel of the first decoder block."""
    for weight in backbone.trainable_weights:
        path = weight.path
        if ("query" in path or "q_proj" in path) and "kernel" in path:
            return weight
    raise LookupError(f"no query kernel in {backbone.name}")
