"""Hugging Face causal language models by family (``model=hf model.name=llama``), built offline
from their config class: ``AutoConfig.for_model(family, **fields)`` then
``AutoModelForCausalLM.from_config`` (random weights; nothing is downloaded, no remote code).

One spelling of each size.  The sizes bench's own sequence models have are bench's keys
(``model.hidden``, ``layers``, ``heads``, ``intermediate``, ``vocab_size``,
``max_positions``), the same for every family and framework: :data:`FAMILIES` maps each to
the family's config field (``hidden`` is llama's ``hidden_size``, gpt2's ``n_embd``).
``model.config.<field>`` holds the config fields bench has no key for
(``model.config.num_key_value_heads=2``, ``rope_theta``...).  A size given in the config's
own spelling (``model.config.hidden_size=512``) keeps working: composition moves it onto
bench's key (:func:`canonical`), so both spellings are one configuration with one hash.

Family defaults bench changes, so that every size is the one asked for: the grouped-query
families (llama, mistral, qwen2) get ``num_key_value_heads = heads`` unless
``model.config`` sets it (their own defaults, 8 or 32, would not divide 4 heads), and a
special token id outside the vocabulary (gpt2's 50256 under a 4,096-token vocabulary) becomes
the last token.

This module's tables (:data:`FAMILIES`, :data:`DEFAULT_SIZES`) import nothing; the
functions that build import transformers (the ``hf`` extra) when called.
``python -m bench.trial.models.hf_lm JSON`` is the probe the host runs with the trial's
interpreter before a sweep (:mod:`bench.checks.own_models`): it checks the fields against
the config class and counts the parameters of a build on the meta device (no memory, any
size), or prints the one-line problem naming the key.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

EXTRA = "hf"  # pyproject.toml's extra that installs transformers
INSTALL = f"pip install 'bench[{EXTRA}]' (scripts/setup.sh installs it in .venv)"

# bench's size key -> the family config's field, then the other names the config accepts
# for it (its attribute_map); the first name is the one passed to AutoConfig.for_model.
_LLAMA_LIKE: dict[str, tuple[str, ...]] = {
    "vocab_size": ("vocab_size",),
    "hidden": ("hidden_size",),
    "layers": ("num_hidden_layers",),
    "heads": ("num_attention_heads",),
    "intermediate": ("intermediate_size",),
    "max_positions": ("max_position_embeddings",),
}
FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "gpt2": {
        "vocab_size": ("vocab_size",),
        "hidden": ("n_embd", "hidden_size"),
        "layers": ("n_layer", "num_hidden_layers"),
        "heads": ("n_head", "num_attention_heads"),
        "intermediate": ("n_inner",),
        "max_positions": ("n_positions", "max_position_embeddings"),
    },
    "llama": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
}
# Families whose key/value heads are a field of their own (grouped-query attention).
_KV_HEADS = {"llama", "mistral", "qwen2"}
# conf/model/hf.yaml's sizes (a test keeps them equal): a CPU trial takes seconds.
DEFAULT_SIZES = {
    "seq_len": 128,
    "vocab_size": 4096,
    "layers": 4,
    "hidden": 256,
    "heads": 4,
    "intermediate": 1024,
    "max_positions": 512,
}


class LMConfig(Protocol):
    """What this module reads of a :class:`bench.core.config.ModelConfig`."""

    name: str
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    config: dict[str, Any]


def family_problem(name: str) -> str:
    """Why ``name`` is not a family model=hf builds ('' if it is)."""
    if name in FAMILIES:
        return ""
    near = difflib.get_close_matches(name, list(FAMILIES), n=3, cutoff=0.4)
    hint = f"nearest: {', '.join(near)}; " if near else ""
    return (
        f"model.name: {name!r} is not a family model=hf builds; {hint}families: "
        f"{', '.join(sorted(FAMILIES))}"
    )


def canonical(model: LMConfig) -> list[str]:
    """Move sizes given in the config's own spelling (``model.config.hidden_size``) onto
    bench's keys (``model.hidden``), in place; a size given both ways with two values is a
    problem naming both keys."""
    keys = FAMILIES.get(model.name)
    if keys is None:
        return []
    problems = []
    for key, names in keys.items():
        for name in names:
            if name not in model.config:
                continue
            value = model.config.pop(name)
            current = getattr(model, key)
            if current not in (value, DEFAULT_SIZES[key]):
                problems.append(
                    f"model.config.{name}: model.{key} is {current}; give the size once, as "
                    f"model.{key} (its one spelling for every family)"
                )
            else:
                setattr(model, key, value)
    return problems


def config_fields(model: LMConfig) -> dict[str, Any]:
    """The keyword arguments of ``AutoConfig.for_model(model.name, ...)``: bench's sizes in
    the family's spelling, bench's defaults for the family (see the module docstring), then
    ``model.config`` (which wins)."""
    keys = FAMILIES[model.name]
    fields: dict[str, Any] = {names[0]: getattr(model, key) for key, names in keys.items()}
    if model.name in _KV_HEADS:
        fields["num_key_value_heads"] = model.heads
    fields.update(model.config)
    return fields


def _special_ids(config: Any, vocab_size: int) -> None:
    """Special token ids within the vocabulary (the last token where the family's is out)."""
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= vocab_size:
            setattr(config, name, vocab_size - 1)


def known_fields(config: Any) -> set[str]:
    """The fields a config class has: its defaults' keys, its constructor's parameters, the
    aliases of its attribute_map and the RoPE fields it takes at the top level."""
    known = set(config.to_dict()) | set(getattr(config, "attribute_map", {}))
    known |= {p for p in inspect.signature(type(config).__init__).parameters if p != "self"}
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict):  # transformers 5 folds rope_theta (and rope_scaling) into it
        known |= set(rope) | {"rope_scaling"}
    return known - {"kwargs", "args", "_name_or_path", "transformers_version"}


def fields_problem(model: LMConfig) -> str:
    """Why ``model.config`` names a field the family's config class does not have ('' if
    none does); imports transformers."""
    from transformers import AutoConfig

    known = known_fields(AutoConfig.for_model(model.name))
    for key in model.config:
        if key not in known:
            near = difflib.get_close_matches(str(key), sorted(known), n=3, cutoff=0.5)
            hint = f"nearest: {', '.join(near)}" if near else "see its config class's fields"
            return f"model.config.{key}: {model.name}'s config has no field {key!r}; {hint}"
    return ""


def hf_config(model: LMConfig) -> Any:
    """The family's config object at ``model``'s sizes (imports transformers)."""
    from transformers import AutoConfig

    problem = fields_problem(model)
    if problem:
        raise ValueError(problem)
    config = AutoConfig.for_model(model.name, **config_fields(model))
    _special_ids(config, int(config.vocab_size))
    return config


def _causal_lm(config: Any) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_config(config)


def build_torch(model: LMConfig) -> torch.nn.Module:
    """The family's causal LM as a module that maps int64 tokens (batch, seq_len) to logits
    (batch, seq_len, vocab), as bench's own sequence models do; the Hugging Face model is
    its ``lm`` (the generation loop calls it with its KV cache)."""
    import torch

    class CausalLM(torch.nn.Module):
        def __init__(self, lm: torch.nn.Module) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.lm(input_ids=tokens, use_cache=False).logits
            return logits

    return CausalLM(_causal_lm(hf_config(model)))


def takes_logits_to_keep(lm: Any) -> bool:
    """Whether the model's forward computes the logits of its last positions only when asked
    (``logits_to_keep``), as ``generate()`` asks in its prefill."""
    return "logits_to_keep" in inspect.signature(lm.forward).parameters


def missing() -> str:
    """'' where transformers imports here, else the line that says what to install."""
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        return (
            f"model.source: hf needs transformers, which {sys.executable} cannot import "
            f"({exc}); install the {EXTRA} extra: {INSTALL}"
        )
    return ""


def _last_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


class _Model:
    """A model config from the probe's JSON."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.name = str(fields["name"])
        self.vocab_size, self.hidden = int(fields["vocab_size"]), int(fields["hidden"])
        self.layers, self.heads = int(fields["layers"]), int(fields["heads"])
        self.intermediate = int(fields["intermediate"])
        self.max_positions = int(fields["max_positions"])
        self.config = dict(fields["config"])


def probe(model: LMConfig) -> dict[str, Any]:
    """Check and build ``model`` as a trial would, on the meta device:
    ``{"num_parameters": N}``, or ``{"problem": LINE}`` naming the key that refuses it."""
    problem = family_problem(model.name) or missing()
    if problem:
        return {"problem": problem}
    try:
        problem = fields_problem(model)
        if problem:
            return {"problem": problem}
        config = hf_config(model)
        import torch

        with torch.device("meta"):
            built = _causal_lm(config)
    except Exception as exc:  # noqa: BLE001 - the config class's own refusal, as one line
        keys = ", ".join(f"model.config.{k}" for k in model.config) or "model.name"
        return {"problem": f"{keys}: building {model.name} raised {_last_line(exc)}"}
    return {"num_parameters": int(sum(p.numel() for p in built.parameters()))}


def main(argv: list[str]) -> int:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = probe(_Model(json.loads(argv[0])))
    print("BENCH_PROBE " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
