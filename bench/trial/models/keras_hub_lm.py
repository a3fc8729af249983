"""``model=hf`` under ``framework=tf``: the Hugging Face family's network built with keras-hub
(Keras 3 on the TF backend) at the same sizes as transformers builds it under torch, random
initialisation, nothing downloaded.

A family's configuration is the transformers config class's defaults (:attr:`Family.defaults`,
recorded here, since the TF side's environment has no transformers; a test compares them with
the installed config classes) with ``model.config``'s overrides, spelt as transformers spells
them (``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
``intermediate_size``, ``vocab_size``, ``max_position_embeddings``, ``rope_theta``,
``rms_norm_eps``, ...; gpt2's own ``n_embd``/``n_layer``/``n_head``/``n_positions``/``n_inner``
and transformers' aliases of them).  Every field is one of three kinds:

- mapped: it becomes a keyword of the keras-hub backbone (:attr:`Family.kwargs`);
- fixed: keras-hub's backbone has no option for it and computes one value, the default:
  another value is refused (gpt2's ``layer_norm_epsilon``, llama's ``attention_bias``);
- inert: it changes neither side's forward pass (token ids, initialisation scale, RoPE's
  ``max_position_embeddings``, the cache flag).

A family keras-hub lacks, a field of none of the three kinds, and a fixed field set to another
value are each one line naming ``model.name`` or ``model.config.<field>`` (:func:`problems`),
never dropped.  :func:`build` returns a ``keras.Model`` from token ids ``(batch, seq)`` to
logits ``(batch, seq, vocab)``, whose trainable parameters are transformers' model's.
Nothing here imports keras or keras-hub until a model is built.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.trial.models.hf_lm import LMConfig  # the fields both sides read (model=hf)

EXTRA = "keras-hub"  # pyproject.toml's extra: keras-hub and tensorflow-text

_ROPE_DEFAULTS = {"rope_theta": 10000.0, "rope_type": "default"}


@dataclass(frozen=True)
class Family:
    """One transformers ``model_type`` and the keras-hub classes that build it."""

    name: str
    backbone: str  # keras_hub.models.<backbone>
    causal_lm: str  # keras_hub.models.<causal_lm>
    # transformers' config class defaults of every field that decides the network
    defaults: Mapping[str, Any]
    # field -> the backbone's keyword argument(s), from the resolved config
    kwargs: Callable[[Mapping[str, Any]], dict[str, Any]]
    # fields the backbone has no option for: the value it computes (the default) only
    fixed: tuple[str, ...] = ()
    # fields that change neither side's forward pass
    inert: tuple[str, ...] = ()
    # transformers' attribute_map: other spellings of a field
    aliases: Mapping[str, str] = field(default_factory=dict)
    # fields transformers derives from others when they are None
    derived: Callable[[dict[str, Any]], None] = lambda resolved: None
    # backbone keyword -> the field it comes from (what a converter's difference names)
    sources: Mapping[str, str] = field(default_factory=dict)


# Fields every family treats alike: they change no forward pass.
_INERT = (
    "initializer_range", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id",
    "output_attentions", "output_hidden_states", "return_dict", "dtype", "architectures",
    "id2label", "label2id", "problem_type", "chunk_size_feed_forward", "is_encoder_decoder",
)  # fmt: skip


def _rope_theta(resolved: Mapping[str, Any]) -> float:
    return float(resolved["rope_theta"])


def _llama_derived(resolved: dict[str, Any]) -> None:
    if resolved.get("num_key_value_heads") is None:
        resolved["num_key_value_heads"] = resolved["num_attention_heads"]
    if resolved.get("head_dim") is None:
        resolved["head_dim"] = resolved["hidden_size"] // resolved["num_attention_heads"]


def _mistral_derived(resolved: dict[str, Any]) -> None:
    if resolved.get("head_dim") is None:
        resolved["head_dim"] = resolved["hidden_size"] // resolved["num_attention_heads"]


def _gpt2_derived(resolved: dict[str, Any]) -> None:
    if resolved.get("n_inner") is None:
        resolved["n_inner"] = 4 * resolved["n_embd"]


_DECODER_SOURCES = {
    "vocabulary_size": "vocab_size",
    "num_layers": "num_hidden_layers",
    "num_query_heads": "num_attention_heads",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "num_key_value_heads": "num_key_value_heads",
    "rope_max_wavelength": "rope_theta",
    "layer_norm_epsilon": "rms_norm_eps",
}


def _decoder_kwargs(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """What llama, mistral and qwen2 share."""
    return {
        "vocabulary_size": int(resolved["vocab_size"]),
        "num_layers": int(resolved["num_hidden_layers"]),
        "num_query_heads": int(resolved["num_attention_heads"]),
        "hidden_dim": int(resolved["hidden_size"]),
        "intermediate_dim": int(resolved["intermediate_size"]),
        "num_key_value_heads": int(resolved["num_key_value_heads"]),
        "rope_max_wavelength": _rope_theta(resolved),
        "layer_norm_epsilon": float(resolved["rms_norm_eps"]),
    }


def _llama_kwargs(resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **_decoder_kwargs(resolved),
        "tie_word_embeddings": bool(resolved["tie_word_embeddings"]),
    }


def _mistral_kwargs(resolved: Mapping[str, Any]) -> dict[str, Any]:
    window = resolved["sliding_window"]
    return {
        **_decoder_kwargs(resolved),
        "sliding_window": None if window is None else int(window),
        "head_dim": int(resolved["head_dim"]),
    }


def _qwen2_kwargs(resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **_decoder_kwargs(resolved),
        "tie_word_embeddings": bool(resolved["tie_word_embeddings"]),
    }


def _gpt2_kwargs(resolved: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "vocabulary_size": int(resolved["vocab_size"]),
        "num_layers": int(resolved["n_layer"]),
        "num_heads": int(resolved["n_head"]),
        "hidden_dim": int(resolved["n_embd"]),
        "intermediate_dim": int(resolved["n_inner"]),
        "dropout": float(resolved["resid_pdrop"]),
        "max_sequence_length": int(resolved["n_positions"]),
    }


# transformers 5.x's config class defaults (the size of the published 7B models: bench's
# conf/model/hf.yaml sets small sizes).  Keys: the fields as the config's to_dict() has them;
# rope_theta stands for rope_parameters' rope_theta.
_LLAMA = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
    "hidden_act": "silu", "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
    "pretraining_tp": 1, "tie_word_embeddings": False, "rope_theta": 10000.0,
    "rope_parameters": None, "rope_scaling": None, "attention_bias": False,
    "attention_dropout": 0.0, "mlp_bias": False, "head_dim": None,
}  # fmt: skip
_MISTRAL = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": None, "hidden_act": "silu", "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "rope_theta": 10000.0,
    "rope_parameters": None, "rope_scaling": None, "sliding_window": 4096,
    "attention_dropout": 0.0,
}  # fmt: skip
_QWEN2 = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False, "rope_theta": 10000.0, "rope_parameters": None,
    "rope_scaling": None, "use_sliding_window": False, "sliding_window": None,
    "max_window_layers": 28, "layer_types": None, "attention_dropout": 0.0,
}  # fmt: skip
_GPT2 = {
    "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1,
    "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
    "summary_type": "cls_index", "summary_use_proj": True, "summary_activation": None,
    "summary_proj_to_labels": True, "summary_first_dropout": 0.1,
    "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False, "add_cross_attention": False,
    "tie_word_embeddings": True,
}  # fmt: skip

_ROPE_FIXED = ("hidden_act", "rope_parameters", "rope_scaling", "attention_dropout")

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "llama", "Llama3Backbone", "Llama3CausalLM", _LLAMA, _llama_kwargs,
            fixed=(*_ROPE_FIXED, "attention_bias", "mlp_bias", "pretraining_tp"),
            inert=("max_position_embeddings",), derived=_llama_derived,
            sources={**_DECODER_SOURCES, "tie_word_embeddings": "tie_word_embeddings"},
        ),
        Family(
            "mistral", "MistralBackbone", "MistralCausalLM", _MISTRAL, _mistral_kwargs,
            fixed=(*_ROPE_FIXED, "tie_word_embeddings"),
            inert=("max_position_embeddings",), derived=_mistral_derived,
            sources={**_DECODER_SOURCES, "sliding_window": "sliding_window",
                     "head_dim": "head_dim"},
        ),
        Family(
            "qwen2", "QwenBackbone", "QwenCausalLM", _QWEN2, _qwen2_kwargs,
            fixed=(*_ROPE_FIXED, "use_sliding_window", "layer_types"),
            # the window's fields act only with use_sliding_window
            inert=("max_position_embeddings", "sliding_window", "max_window_layers"),
            sources={**_DECODER_SOURCES, "tie_word_embeddings": "tie_word_embeddings"},
        ),
        Family(
            "gpt2", "GPT2Backbone", "GPT2CausalLM", _GPT2, _gpt2_kwargs,
            fixed=(
                "activation_function", "layer_norm_epsilon", "scale_attn_weights",
                "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                "add_cross_attention", "tie_word_embeddings",
            ),
            # the summary head is GPT2DoubleHeadsModel's, not the causal LM's
            inert=("summary_type", "summary_use_proj", "summary_activation",
                   "summary_proj_to_labels", "summary_first_dropout"),
            aliases={"hidden_size": "n_embd", "max_position_embeddings": "n_positions",
                     "num_attention_heads": "n_head", "num_hidden_layers": "n_layer"},
            derived=_gpt2_derived,
            sources={"vocabulary_size": "vocab_size", "num_layers": "n_layer",
                     "num_heads": "n_head", "hidden_dim": "n_embd", "intermediate_dim": "n_inner",
                     "dropout": "resid_pdrop", "max_sequence_length": "n_positions"},
        ),
    )
}  # fmt: skip


class ConfigProblem(ValueError):
    """An override or family the keras-hub side cannot build as transformers does; the
    message is one line naming its key."""


def family_of(name: str) -> Family:
    family = FAMILIES.get(name)
    if family is None:
        near = difflib.get_close_matches(name, list(FAMILIES), n=3, cutoff=0.5)
        hint = f" (nearest: {', '.join(near)})" if near else ""
        raise ConfigProblem(
            f"model.name: keras-hub has no {name!r} causal LM for framework=tf{hint}; "
            f"families it builds: {', '.join(sorted(FAMILIES))} (framework=torch builds "
            "every transformers family)"
        )
    return family


def _fixed_equal(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or default is None or isinstance(default, str):
        return bool(value == default)
    try:
        return float(value) == float(default)
    except (TypeError, ValueError):
        return False


def spelt(name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with transformers' aliases spelt the family's way (gpt2's ``hidden_size``
    as ``n_embd``); later keys win."""
    aliases = FAMILIES[name].aliases if name in FAMILIES else {}
    return {aliases.get(key, key): value for key, value in fields.items()}


def resolve(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The family's full configuration: its defaults with ``overrides`` (aliases spelt the
    family's way, derived fields filled in); raises :class:`ConfigProblem` for a field the
    keras-hub backbone would drop or cannot take at that value."""
    family = family_of(name)
    resolved = dict(family.defaults)
    seen: dict[str, str] = {}
    for key, value in overrides.items():
        target = family.aliases.get(key, key)
        if target in seen and overrides[seen[target]] != value:
            raise ConfigProblem(
                f"model.config.{key}: {name}'s {target} is also given as {seen[target]} "
                "with another value; give it once"
            )
        seen[target] = key
        if target == "rope_parameters" and isinstance(value, Mapping):
            extra = {k: v for k, v in value.items() if k not in ("rope_theta", "rope_type")}
            if extra or value.get("rope_type", "default") != "default":
                raise ConfigProblem(
                    f"model.config.rope_parameters: keras-hub's {family.backbone} "
                    f"(framework=tf) takes the default RoPE only; set model.config.rope_theta"
                )
            if "rope_theta" in value:
                resolved["rope_theta"] = value["rope_theta"]
            continue
        if target not in resolved and target not in family.inert and target not in _INERT:
            known = sorted({*family.defaults, *family.aliases} - set(family.fixed))
            near = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"nearest: {', '.join(near)}" if near else f"it maps: {', '.join(known)}"
            raise ConfigProblem(
                f"model.config.{key}: keras-hub's {family.backbone} (framework=tf) has no such "
                f"field of {name}, so it would drop it; {hint}"
            )
        if target in family.fixed and not _fixed_equal(family.defaults[target], value):
            raise ConfigProblem(
                f"model.config.{key}: keras-hub's {family.backbone} (framework=tf) builds "
                f"{name} with {target}={family.defaults[target]!r} only, got {value!r}"
            )
        resolved[target] = value
    family.derived(resolved)
    if name == "gpt2":
        rates = {k: float(resolved[k]) for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop")}
        if len(set(rates.values())) > 1:
            raise ConfigProblem(
                f"model.config.attn_pdrop: keras-hub's GPT2Backbone (framework=tf) has one "
                f"dropout rate; gpt2's resid_pdrop, embd_pdrop, attn_pdrop must be equal, got "
                f"{rates}"
            )
    if name == "llama":  # LlamaBackbone has no head_dim: it is hidden_size // heads
        per_head = resolved["hidden_size"] // resolved["num_attention_heads"]
        if resolved["head_dim"] != per_head:
            raise ConfigProblem(
                f"model.config.head_dim: keras-hub's {family.backbone} (framework=tf) uses "
                f"hidden_size // num_attention_heads = {per_head}, got {resolved['head_dim']}"
            )
    return resolved


def backbone_kwargs(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the family's keras-hub backbone (float32, no weights)."""
    return FAMILIES[name].kwargs(resolve(name, overrides)) if name in FAMILIES else {}


def problems(name: str, overrides: Mapping[str, Any]) -> list[str]:
    """Why the keras-hub side cannot build ``name`` with ``overrides`` ([] if it can)."""
    try:
        resolve(name, overrides)
    except ConfigProblem as exc:
        return [str(exc)]
    return []


def keras_hub_missing() -> str:
    """Why keras-hub cannot be imported here ('' if it can), naming the extra."""
    try:
        import keras_hub  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure to load it is the reason
        last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        return (
            f"model: model=hf under framework=tf needs keras-hub and tensorflow-text (the "
            f"'{EXTRA}' extra: pip install 'bench[{EXTRA}]'); here: {last}"
        )
    return ""


def build_backbone(name: str, overrides: Mapping[str, Any]) -> Any:
    """The family's keras-hub backbone at the configured sizes, randomly initialised."""
    import keras_hub

    kwargs = backbone_kwargs(name, overrides)
    return getattr(keras_hub.models, FAMILIES[name].backbone)(**kwargs)


def build_causal_lm(name: str, overrides: Mapping[str, Any]) -> Any:
    """keras-hub's CausalLM task around the backbone (no preprocessor: token ids in)."""
    import keras_hub

    backbone = build_backbone(name, overrides)
    return getattr(keras_hub.models, FAMILIES[name].causal_lm)(backbone, preprocessor=None)


def token_model(causal_lm: Any) -> Any:
    """A ``keras.Model`` from token ids ``(batch, seq)`` to logits ``(batch, seq, vocab)``,
    every position attended (no padding): the causal LM's own forward pass."""
    import keras

    class TokenLogits(keras.Model):
        def __init__(self, lm: Any) -> None:
            super().__init__(name=f"{lm.backbone.name}_logits")
            self.lm = lm

        def call(self, token_ids: Any, training: bool = False) -> Any:
            mask = keras.ops.ones_like(token_ids, dtype="bool")
            inputs = {"token_ids": token_ids, "padding_mask": mask}
            return self.lm(inputs, training=training)

    model = TokenLogits(causal_lm)
    model.build((None, None))
    return model


def build(name: str, overrides: Mapping[str, Any]) -> Any:
    """The keras.Model bench trains for ``model=hf model.name=<name>`` under framework=tf."""
    return token_model(build_causal_lm(name, overrides))


def build_tf(model: LMConfig) -> Any:
    """The keras.Model a trial of ``model`` (a :class:`bench.core.config.ModelConfig` of
    model=hf) trains under framework=tf: the fields transformers gets under torch
    (:func:`bench.trial.models.hf_lm.config_fields`), built with keras-hub."""
    from bench.trial.models.hf_lm import config_fields

    return build(model.name, config_fields(model))


def count_parameters(model: Any) -> int:
    import numpy as np

    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


def cache_shape(model: Any, batch: int, length: int) -> list[int]:
    """The shape of the KV cache keras-hub's ``call_with_cache`` takes for ``batch``
    sequences of up to ``length`` tokens: (batch, layers, 2, length, kv heads, head dim)."""
    backbone = model.lm.backbone
    queries = getattr(backbone, "num_query_heads", None) or backbone.num_heads
    heads = getattr(backbone, "num_key_value_heads", None) or backbone.num_heads
    head_dim = getattr(backbone, "head_dim", None) or backbone.hidden_dim // queries
    return [batch, backbone.num_layers, 2, length, heads, head_dim]


def greedy_step(model: Any) -> Callable[[Any, Any, Any], tuple[Any, Any]]:
    """``step(tokens, cache, index) -> (next tokens (batch, 1), cache)``: the tokens at
    positions ``index...`` through keras-hub's cached forward (``call_with_cache``), the next
    token the argmax of the last position's logits, which alone are computed (the prefill
    of transformers' ``generate()`` also computes the last position's logits only)."""
    import keras

    lm = model.lm

    def step(tokens: Any, cache: Any, index: Any) -> tuple[Any, Any]:
        _, hidden, cache = lm.call_with_cache(tokens, cache, index)
        logits = lm.backbone.token_embedding(hidden[:, -1:, :], reverse=True)
        chosen = keras.ops.argmax(logits, axis=-1)
        return keras.ops.cast(chosen, tokens.dtype), cache

    return step


def probe(model: LMConfig) -> dict[str, Any]:
    """What the host asks the trial's interpreter before a sweep (model=hf, framework=tf):
    ``{"problem": LINE}`` where keras-hub cannot be imported or the mapping refuses an
    override, else ``{}`` (nothing is built: the count is the trial's)."""
    from bench.trial.models.hf_lm import config_fields

    problem = keras_hub_missing() or "".join(problems(model.name, config_fields(model)))
    return {"problem": problem} if problem else {}


def main(argv: list[str]) -> int:
    import json

    from bench.trial.models.hf_lm import _Model

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    out = probe(_Model(json.loads(argv[0])))
    print("BENCH_PROBE " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
