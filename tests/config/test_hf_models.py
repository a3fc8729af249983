"""Tier 1: model=hf (Hugging Face causal LMs by family) and mode=generate compose, keep one
spelling of each size in the identity, and each kind of bad input is refused before any
trial, exit status 2, one line naming the key (the probe that checks the config class runs in
a child process with the trial's interpreter, as it does for a real sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR, _mapping_overrides
from bench.core.identity import config_hash, identity
from bench.sweep.compose import to_bench_config
from bench.trial.models import hf_lm
from tests.config.test_bad_input_table import refused

HF = "model=hf"
GEN = "mode=generate"
CASES = [
    # The family and the framework.
    ([HF, "model.name=lama"],
     "model.name: 'lama' is not a family model=hf builds; nearest: llama; families: gpt2, "),
    ([HF, "framework=mxnet"],
     "model.name: model=hf builds llama with transformers for framework=torch; framework=mxnet"),
    ([HF, "model.builder=examples.custom_cnn:build"], "model.builder: only model=py uses it"),
    ([HF, "distributed=ddp", "workers=2"], "distributed: model=hf trains undistributed"),
    # A config field the class does not have (checked by the config class, in a child).
    ([HF, "model.config.num_key_value_head=2"],
     "model.config.num_key_value_head: llama's config has no field 'num_key_value_head'; "
     "nearest: num_key_value_heads"),
    ([HF, "model.name=gpt2", "model.config.n_embed=64"],
     "model.config.n_embed: gpt2's config has no field 'n_embed'; nearest: n_embd"),
    # One size in two spellings with two values.
    ([HF, "model.hidden=128", "model.config.hidden_size=512"],
     "model.config.hidden_size: model.hidden is 128; give the size once"),
    # model.config belongs to model=hf.
    (["model=lenet5", "model.config.hidden_size=64"], "model.config: only model=hf"),
    # mode=generate: a causal LM of model=hf, sizes positive, within the positions.
    (["model=lenet5", GEN], "mode: generate runs the causal LMs of model=hf"),
    (["model=lstm", GEN], "mode: generate runs the causal LMs of model=hf (model=hf model.nam"),
    ([HF, GEN, "prompt_len=0"], "prompt_len: must be >= 1, got 0"),
    ([HF, GEN, "new_tokens=1"], "new_tokens: must be >= 2"),
    ([HF, GEN, "batch_size=0"], "batch_size: must be >= 1, got 0"),
    ([HF, GEN, "prompt_len=500", "new_tokens=100"],
     "new_tokens: prompt_len + new_tokens = 600 exceeds the model's positions"),
    ([HF, GEN, "prompt_len=abc"], "prompt_len"),
    ([HF, GEN, "compile=true"], "compile: not wired for mode=generate"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_refused_in_one_line_naming_its_key(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    err = refused(args, tmp_path, monkeypatch, capsys)
    assert expected in err, err


def _compose(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return to_bench_config(compose("config", overrides=_mapping_overrides(list(overrides))))


def test_the_group_composes_at_the_documented_small_sizes() -> None:
    cfg = _compose(HF)
    assert (cfg.model.name, cfg.model.source, cfg.model.config) == ("llama", "hf", {})
    sizes = {key: getattr(cfg.model, key) for key in hf_lm.DEFAULT_SIZES}
    assert sizes == hf_lm.DEFAULT_SIZES
    raw = yaml.safe_load((Path(CONF_DIR) / "model" / "hf.yaml").read_text())
    assert {key: raw[key] for key in hf_lm.DEFAULT_SIZES} == hf_lm.DEFAULT_SIZES


def test_a_size_in_the_config_classes_spelling_is_bench_keys_one_configuration() -> None:
    by_config = _compose(HF, "model.name=gpt2", "model.config.n_embd=512")
    by_alias = _compose(HF, "model.name=gpt2", "model.config.hidden_size=512")
    by_key = _compose(HF, "model.name=gpt2", "model.hidden=512")
    assert by_config.model.hidden == 512 and by_config.model.config == {}
    assert config_hash(by_config) == config_hash(by_alias) == config_hash(by_key)
    assert config_hash(by_key) != config_hash(_compose(HF, "model.name=gpt2"))


def test_family_and_other_config_fields_are_part_of_the_identity() -> None:
    llama, gpt2 = _compose(HF), _compose(HF, "model.name=gpt2")
    assert config_hash(llama) != config_hash(gpt2)
    grouped = _compose(HF, "model.config.num_key_value_heads=2")
    assert identity(grouped)["model.config.num_key_value_heads"] == "2"
    assert config_hash(grouped) != config_hash(llama)
    # a float field, and the same field again: the same configuration
    a = _compose(HF, "model.config.rope_theta=500000.0")
    assert config_hash(a) == config_hash(_compose(HF, "model.config.rope_theta=500000.0"))


def test_generate_axes_count_only_in_mode_generate() -> None:
    train = _compose(HF)
    assert config_hash(train) == config_hash(_compose(HF, "prompt_len=64", "new_tokens=8"))
    gen = _compose(HF, GEN)
    assert config_hash(gen) != config_hash(train)
    assert config_hash(_compose(HF, GEN, "prompt_len=64")) != config_hash(gen)
    assert identity(_compose(HF, GEN, "new_tokens=8"))["new_tokens"] == "8"
    assert "prompt_len" not in identity(train)


def test_missing_transformers_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import raises ImportError
    problem = hf_lm.probe(hf_lm._Model({
        "name": "llama", "vocab_size": 64, "hidden": 32, "layers": 1, "heads": 2,
        "intermediate": 64, "max_positions": 64, "config": {},
    }))["problem"]  # fmt: skip
    assert problem.startswith("model.source: hf needs transformers")
    assert "install the hf extra: pip install 'bench[hf]'" in problem
