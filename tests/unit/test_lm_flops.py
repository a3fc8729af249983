"""The FLOPs of a causal LM of model=hf, counted the zoo's way (contractions only) on both
sides: transformers' model under torch (whose counter has no formula for the CPU's fused
attention kernel: bench adds one) and keras-hub's under tf (traced matmuls) give the same
count, linear layers and attention alike."""

from __future__ import annotations

import pytest

from bench.core.config import ModelConfig
from bench.trial import models
from bench.trial.models import flops

pytestmark = pytest.mark.slow

SIZES = {"hidden": 64, "layers": 2, "heads": 4, "intermediate": 256, "vocab_size": 256}


def counts(family: str, lengths: tuple[int, ...]) -> dict[str, list[int]]:
    import torch

    model = ModelConfig(name=family, source="hf", seq_len=max(lengths), **SIZES)
    torch_model = models.build_sequence("torch", model)
    keras_model = models.build_sequence("tf", model)
    return {
        "torch": [
            flops.torch_forward_flops(torch_model, torch.zeros((1, n), dtype=torch.int64))
            for n in lengths
        ],
        "tf": [flops.keras_forward_flops(keras_model, (n,), "int32") for n in lengths],
    }


@pytest.mark.parametrize("family", ["llama", "gpt2", "mistral", "qwen2"])
def test_torch_and_keras_hub_count_the_same_flops_attention_included(family: str) -> None:
    got = counts(family, (16, 32))
    assert got["torch"] == got["tf"], got
    short, long = got["torch"]
    # f(L) = a L + b L^2, b the attention's 4 x layers x hidden (QK^T and the weighted sum,
    # 2 FLOPs per multiply-add, every position pair): what is left after the linear part.
    attention = long - 2 * short
    assert attention == 4 * SIZES["layers"] * SIZES["hidden"] * (32 * 32 - 2 * 16 * 16)
