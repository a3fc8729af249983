"""The logit parity of a Hugging Face causal LM between transformers (torch) and keras-hub
(tf), through a local checkpoint (bench/parity/lm.py, python -m bench.parity --lm)."""

from __future__ import annotations

import pytest

from bench.cli.parity import main
from bench.parity.lm import DEFAULT_TOLERANCE, check_lm


def test_bad_lm_input_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--lm", "llama,falcon", "--lm-config", "hidden_size"]) == 2
    err = capsys.readouterr().err
    assert (
        "--lm: keras-hub's families are gpt2, llama, mistral, qwen2 (or all); got 'falcon'" in err
    )
    assert "--lm-config: FIELD=VALUE, got 'hidden_size'" in err


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_logits_agree_and_a_perturbed_weight_fails(family: str) -> None:
    pytest.importorskip("keras_hub")
    pytest.importorskip("transformers")
    same = check_lm(family)
    assert same.passed, same.line()
    assert same.rel < DEFAULT_TOLERANCE / 10  # float32 rounding, far below the tolerance
    assert same.num_parameters["torch"] == same.num_parameters["tf"]
    perturbed = check_lm(family, perturb=0.01)  # one query projection 1% larger
    assert not perturbed.passed and not perturbed.problem
    assert perturbed.rel > 3 * DEFAULT_TOLERANCE, perturbed.line()


@pytest.mark.slow
def test_a_field_the_converter_drops_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("keras_hub")
    pytest.importorskip("transformers")
    args = ["--lm", "gpt2", "--lm-config", "n_inner=100", "--lm-config", "n_layer=1"]
    assert main(args) == 2
    out = capsys.readouterr().out
    assert out.startswith("gpt2: refused: model.config.n_inner: keras-hub's converter")
    assert "makes intermediate_dim=256 of the checkpoint, bench's mapping 100" in out
