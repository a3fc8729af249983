"""Tier 1: a causal LM of your own (model=py model.task=causal_lm, docs/your-model.md)
composes with bench's sequence sizes and its builder's digest in the identity, and each
kind of bad input is refused before any trial, exit status 2, one line naming the key (the
probe that builds and runs the model is a child process, as in a real sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR
from bench.core.identity import config_hash, identity
from bench.sweep.compose import to_bench_config
from tests.config.test_bad_input_table import refused

LM = ["model=py", "model.task=causal_lm"]
GEN = "mode=generate"
CASES = [
    ([*LM[:1], "model.task=seq2seq", "model.builder=examples.tiny_lm:build"],
     "model.task: 'seq2seq' is not allowed for model=py; choose one of image, causal_lm"),
    ([*LM, "model.builder=examples.tiny_lm:build", "model.hidden=0"],
     "model.hidden: must be >= 1, got 0"),
    # An image builder asked for a causal LM: it does not take the LM's sizes.
    ([*LM, "model.builder=examples.custom_cnn:build"],
     "model.builder: examples.custom_cnn:build raised TypeError: "),
    ([*LM, "model.builder=tests.lm_builders:returns_none"],
     "model.builder: tests.lm_builders:returns_none returned builtins.NoneType, not a torch.nn"),
    # The probe's forward pass: hidden states are not logits.
    ([*LM, "model.torch=tests.lm_builders:hidden_states"],
     "model.torch: tests.lm_builders:hidden_states's model maps token ids (2, 5) to shape "
     "(2, 5, 128), not logits (batch, seq, vocab_size) = (2, 5, 1000)"),
    # mode=generate: no cached forward, or one whose cache is not used.
    ([*LM, GEN, "model.builder=tests.lm_builders:no_cache"],
     "mode: generate runs a causal LM of model=py through its cached forward, and "
     "tests.lm_builders:no_cache's torch model has no init_cache nor cached_forward"),
    ([*LM, GEN, "model.builder=tests.lm_builders:forgets"],
     "model.builder: tests.lm_builders:forgets's cached_forward gives other logits than its "
     "forward pass"),
    ([*LM, GEN, "model.builder=tests.lm_builders:running_sum", "new_tokens=600"],
     "new_tokens: prompt_len + new_tokens = 728 exceeds the model's positions"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_refused_in_one_line_naming_its_key(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    err = refused(args, tmp_path, monkeypatch, capsys)
    lines = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert any(line.startswith(expected) for line in lines), err


def _compose(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return to_bench_config(compose("config", overrides=list(overrides)))


def test_an_lm_of_your_own_is_identified_by_its_sizes_and_its_builder_digest() -> None:
    cfg = _compose(*LM, "model.builder=examples.tiny_lm:build", "model.hidden=64")
    assert (cfg.model.source, cfg.model.task, cfg.model.hidden) == ("py", "causal_lm", 64)
    ident = identity(cfg)
    assert ident["model.digest"] == cfg.model.digest and len(cfg.model.digest) == 16
    assert ident["model.hidden"] == "64" and ident["model.seq_len"] == str(cfg.model.seq_len)
    wider = _compose(*LM, "model.builder=examples.tiny_lm:build", "model.hidden=128")
    assert config_hash(wider) != config_hash(cfg)
    # The image builder's digest is another module's: another configuration.
    other = _compose(*LM, "model.builder=examples.custom_cnn:build", "model.hidden=64")
    assert other.model.digest != cfg.model.digest
    assert config_hash(other) != config_hash(cfg)
