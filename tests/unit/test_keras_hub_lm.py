"""model=hf under framework=tf: keras-hub's backbone at transformers' sizes
(bench/trial/models/keras_hub_lm.py): the mapping's refusals, its record of transformers' defaults,
and equal parameter counts with transformers' model per family at two sizes."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from bench.trial.models import hf_lm, keras_hub_lm
from bench.trial.models.keras_hub_lm import FAMILIES, ConfigProblem, resolve

# bench's default size of model=hf (conf/model/hf.yaml, hf_lm.DEFAULT_SIZES) as the torch
# side passes it to transformers (hf_lm.config_fields), and a second size in transformers'
# spelling (gpt2 takes these names through its attribute_map; intermediate is its n_inner).
DEFAULT = "default"
OTHER = {
    "vocab_size": 1000, "hidden_size": 96, "num_hidden_layers": 3, "num_attention_heads": 6,
    "num_key_value_heads": 2, "intermediate_size": 200, "max_position_embeddings": 256,
    "rope_theta": 50000.0, "rms_norm_eps": 1e-5,
}  # fmt: skip


def _sizes(family: str, sizes: dict[str, object] | str) -> dict[str, object]:
    if sizes == DEFAULT:
        model = SimpleNamespace(name=family, config={}, **hf_lm.DEFAULT_SIZES)
        return hf_lm.config_fields(model)
    assert isinstance(sizes, dict)
    out = dict(sizes)
    if family == "gpt2":
        out["n_inner"] = out.pop("intermediate_size")
        for key in ("num_key_value_heads", "rope_theta", "rms_norm_eps"):
            out.pop(key, None)
    elif "num_key_value_heads" not in out:
        out["num_key_value_heads"] = out["num_attention_heads"]
    return out


def test_a_family_keras_hub_lacks_is_refused_naming_it() -> None:
    with pytest.raises(ConfigProblem, match=r"^model\.name: keras-hub has no 'falcon'"):
        resolve("falcon", {})
    assert keras_hub_lm.problems("lama", {})[0].startswith("model.name: keras-hub has no 'lama'")
    assert "nearest: llama" in keras_hub_lm.problems("lama", {})[0]


@pytest.mark.parametrize(
    ("family", "overrides", "field"),
    [
        ("llama", {"attention_bias": True}, "attention_bias"),
        ("llama", {"mlp_bias": True}, "mlp_bias"),
        ("llama", {"hidden_act": "gelu"}, "hidden_act"),
        ("llama", {"head_dim": 32}, "head_dim"),  # hidden 4096 / 32 heads = 128
        ("llama", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
        ("llama", {"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, "rope_parameters"),
        ("llama", {"attention_dropout": 0.1}, "attention_dropout"),
        ("llama", {"no_such_field": 1}, "no_such_field"),
        ("mistral", {"tie_word_embeddings": True}, "tie_word_embeddings"),
        ("qwen2", {"use_sliding_window": True}, "use_sliding_window"),
        ("gpt2", {"layer_norm_epsilon": 1e-6}, "layer_norm_epsilon"),
        ("gpt2", {"activation_function": "relu"}, "activation_function"),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
        ("gpt2", {"attn_pdrop": 0.0}, "attn_pdrop"),  # one rate in keras-hub, three in HF
        ("gpt2", {"rms_norm_eps": 1e-5}, "rms_norm_eps"),  # not a gpt2 field
    ],
)
def test_an_override_the_backbone_would_drop_is_refused_naming_it(
    family: str, overrides: dict[str, object], field: str
) -> None:
    problems = keras_hub_lm.problems(family, overrides)
    assert len(problems) == 1 and problems[0].startswith(f"model.config.{field}: keras-hub's ")
    assert FAMILIES[family].backbone in problems[0]


def test_the_mapping_carries_every_size_into_the_backbone() -> None:
    kwargs = keras_hub_lm.backbone_kwargs("llama", _sizes("llama", OTHER))
    assert kwargs == {
        "vocabulary_size": 1000, "num_layers": 3, "num_query_heads": 6, "hidden_dim": 96,
        "intermediate_dim": 200, "num_key_value_heads": 2, "rope_max_wavelength": 50000.0,
        "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False,
    }  # fmt: skip
    gpt2 = keras_hub_lm.backbone_kwargs("gpt2", {"hidden_size": 64, "n_inner": 100})
    assert gpt2["hidden_dim"] == 64 and gpt2["intermediate_dim"] == 100
    assert keras_hub_lm.backbone_kwargs("gpt2", {"n_embd": 64})["intermediate_dim"] == 256
    # what changes no forward pass is accepted: token ids, init scale, RoPE's positions
    assert not keras_hub_lm.problems("llama", {"bos_token_id": 3, "max_position_embeddings": 64})
    assert not keras_hub_lm.problems("llama", {"head_dim": 128, "attention_bias": False})


def test_the_recorded_defaults_are_transformers_own() -> None:
    """Every field of each family's config class is mapped, fixed or inert, and the
    recorded defaults are the installed transformers' (the TF side has no transformers)."""
    transformers = pytest.importorskip("transformers")
    for name, family in FAMILIES.items():
        config = transformers.AutoConfig.for_model(name).to_dict()
        if config.get("rope_parameters"):  # transformers 5 keeps rope_theta in there
            config["rope_theta"] = config["rope_parameters"]["rope_theta"]
        covered = {*family.defaults, *family.inert, *keras_hub_lm._INERT}
        unknown = {k for k in config if not k.startswith("_")} - covered
        unknown -= {"model_type", "transformers_version"}
        assert not unknown, f"{name}: fields neither mapped, fixed nor inert: {unknown}"
        derived = {"num_key_value_heads", "head_dim", "n_inner", "layer_types", "rope_parameters"}
        for key, value in family.defaults.items():
            if key in config and not (key in derived and value is None):
                assert config[key] == value, f"{name}.{key}: {config[key]!r} != {value!r}"


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("sizes", [DEFAULT, OTHER], ids=["default", "other"])
def test_keras_hub_has_transformers_parameter_count(family: str, sizes: dict[str, object]) -> None:
    pytest.importorskip("keras_hub")
    transformers = pytest.importorskip("transformers")
    import torch

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    overrides = _sizes(family, sizes)
    config = transformers.AutoConfig.for_model(family, **overrides)
    with torch.device("meta"):
        reference = transformers.AutoModelForCausalLM.from_config(config)
    expected = sum(p.numel() for p in reference.parameters())
    model = keras_hub_lm.build(family, overrides)
    assert keras_hub_lm.count_parameters(model) == expected
    logits = model(keras_hub_lm_tokens(int(overrides["vocab_size"])), training=False)
    assert tuple(logits.shape) == (2, 8, overrides["vocab_size"])


def keras_hub_lm_tokens(vocab: int) -> object:
    import numpy as np

    return np.random.default_rng(0).integers(0, vocab, size=(2, 8)).astype("int32")


def test_a_field_given_in_two_spellings_with_two_values_is_refused() -> None:
    problems = keras_hub_lm.problems("gpt2", {"hidden_size": 64, "n_embd": 128})
    assert problems == [
        "model.config.n_embd: gpt2's n_embd is also given as hidden_size with another value; "
        "give it once"
    ]
    assert not keras_hub_lm.problems("gpt2", {"hidden_size": 64, "n_embd": 64})
    assert keras_hub_lm.spelt("gpt2", {"hidden_size": 64, "n_embd": 32}) == {"n_embd": 32}


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "mistral"])
def test_cached_greedy_decoding_chooses_the_uncached_forward_tokens(family: str) -> None:
    """mode=generate's keras-hub loop (the prefill and each decode step through the KV
    cache) picks the tokens that the whole sequence's forward pass picks."""
    pytest.importorskip("keras_hub")
    import numpy as np
    import tensorflow as tf

    sizes = _sizes(family, {**OTHER, "num_hidden_layers": 2})
    model = keras_hub_lm.build(family, sizes)
    step = tf.function(keras_hub_lm.greedy_step(model))
    prompt = keras_hub_lm_tokens(int(sizes["vocab_size"]))  # (2, 8)
    new = 5
    cache = tf.zeros(keras_hub_lm.cache_shape(model, 2, prompt.shape[1] + new))
    token, cache = step(tf.constant(prompt), cache, tf.constant(0))
    chosen = [token]
    for i in range(new - 1):
        token, cache = step(token, cache, tf.constant(prompt.shape[1] + i))
        chosen.append(token)
    cached = np.concatenate([np.asarray(t) for t in chosen], axis=1)
    sequence = prompt
    for _ in range(new):
        logits = np.asarray(model(sequence, training=False))
        sequence = np.concatenate([sequence, logits[:, -1:].argmax(-1).astype("int32")], axis=1)
    assert cached.tolist() == sequence[:, prompt.shape[1] :].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_tf_generation_chooses_hugging_faces_tokens_from_the_same_weights(
    family: str, tmp_path: object
) -> None:
    """mode=generate under tf (the TF session's prefill and decode steps) with the weights of
    the torch side's model, read from its saved checkpoint: the greedy tokens of
    transformers' own generate() on the same prompts."""
    pytest.importorskip("keras_hub")
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import dataclasses

    import keras_hub
    import numpy as np

    from bench.core.config import BenchConfig, ModelConfig
    from bench.trial import generate
    from bench.trial.data import synthetic_sequences
    from bench.trial.frameworks import tf_adapter, torch_adapter

    # intermediate = 4 x hidden: keras-hub's gpt2 converter takes n_inner as that
    tiny = {"seq_len": 16, "vocab_size": 300, "layers": 2, "hidden": 64, "heads": 4,
            "intermediate": 256, "max_positions": 64}  # fmt: skip
    model = ModelConfig(name=family, source="hf", **tiny)
    cfg = dataclasses.replace(
        BenchConfig(), model=model, mode="generate", batch_size=3, prompt_len=7, new_tokens=6,
        device="cpu", telemetry=dataclasses.replace(BenchConfig().telemetry, enabled=False),
    )  # fmt: skip
    data = synthetic_sequences(cfg)
    reference = torch_adapter.Adapter().prepare(cfg, data).model.lm
    reference.save_pretrained(str(tmp_path), safe_serialization=True)
    adapter = tf_adapter.Adapter()
    adapter.configure(cfg, 1)
    session = adapter.prepare(cfg, data)
    loaded = keras_hub.models.Backbone.from_preset(str(tmp_path), dtype="float32")
    session.model.lm.backbone.set_weights(loaded.get_weights())
    assert session.num_parameters == sum(p.numel() for p in reference.parameters())
    generate.generation(session, cfg.new_tokens, events=False)
    ours = session.generated()
    prompt = torch.from_numpy(np.asarray(session._prompt))
    with torch.no_grad():
        theirs = reference.generate(
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
            max_new_tokens=6, min_new_tokens=6, use_cache=True, pad_token_id=0,
            eos_token_id=None,
        )  # fmt: skip
    np.testing.assert_array_equal(ours, theirs[:, 7:].numpy())
