"""examples/tiny_lm.py, a causal LM of your own (model=py model.task=causal_lm,
docs/your-model.md): its torch and Keras builders are the same network at two sizes (equal
parameter counts, the module docstring's formula, a cached forward that agrees with the
forward pass, as bench's probe checks them), and bench's generation loop over its cached
forward picks the tokens the whole sequence's forward pass picks, in both frameworks."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from bench.core.config import BenchConfig, ModelConfig
from bench.trial import generate
from bench.trial.models import custom

SIZES = [
    {"vocab_size": 1000, "hidden": 64, "layers": 2, "heads": 4, "intermediate": 256,
     "max_positions": 512, "seq_len": 32},  # bench's defaults, 64 wide
    {"vocab_size": 301, "hidden": 24, "layers": 3, "heads": 3, "intermediate": 40,
     "max_positions": 40, "seq_len": 8},
]  # fmt: skip


def _model(sizes: dict[str, int]) -> ModelConfig:
    return ModelConfig(
        name="tiny_lm", source="py", task="causal_lm", builder="examples.tiny_lm:build", **sizes
    )


def _formula(s: dict[str, int]) -> int:
    v, h, p, n, i = s["vocab_size"], s["hidden"], s["max_positions"], s["layers"], s["intermediate"]
    block = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    return v * h + p * h + n * block + 2 * h + h * v


@pytest.mark.parametrize("sizes", SIZES, ids=["64-wide", "24-wide"])
def test_torch_and_keras_are_the_same_network(sizes: dict[str, int]) -> None:
    pytest.importorskip("keras")
    answers = {fw: custom.probe_lm(fw, _model(sizes)) for fw in ("torch", "tf")}
    expected = {"num_parameters": _formula(sizes), "generate": ""}
    assert answers == {"torch": expected, "tf": expected}
    if sizes is SIZES[0]:
        assert expected["num_parameters"] == 260_864  # the docstring's and the docs' figure


def _uncached_greedy(forward: object, prompt: np.ndarray, new: int) -> np.ndarray:
    sequence = prompt
    for _ in range(new):
        logits = np.asarray(forward(sequence), dtype=np.float32)  # type: ignore[operator]
        sequence = np.concatenate([sequence, logits[:, -1:].argmax(-1)], axis=1)
    return sequence[:, prompt.shape[1] :]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_bench_generation_picks_the_forward_passes_tokens(framework: str) -> None:
    """The adapter's session (mode=generate) runs the example's init_cache and
    cached_forward, greedily; its tokens are those of the uncached forward pass."""
    pytest.importorskip("keras")
    from bench.trial.data import synthetic_sequences

    cfg = dataclasses.replace(
        BenchConfig(), model=_model(SIZES[1]), mode="generate", batch_size=3, prompt_len=7,
        new_tokens=6, device="cpu",
        telemetry=dataclasses.replace(BenchConfig().telemetry, enabled=False),
    )  # fmt: skip
    adapter = importlib.import_module(f"bench.trial.frameworks.{framework}_adapter").Adapter()
    adapter.configure(cfg, 1)
    session = adapter.prepare(cfg, synthetic_sequences(cfg))
    assert session.num_parameters == _formula(SIZES[1])
    for _ in range(2):  # the second from an empty cache again, with the next prompt batch
        window = generate.generation(session, cfg.new_tokens, events=False)
        assert len(window.decode_s) == cfg.new_tokens - 1
        ours = session.generated()
        assert ours.shape == (3, 6)
        prompt = np.asarray(session._prompt)
        if framework == "torch":
            import torch

            def forward(tokens: np.ndarray) -> np.ndarray:
                with torch.no_grad():
                    return np.asarray(session.model(torch.from_numpy(tokens)))

        else:

            def forward(tokens: np.ndarray) -> np.ndarray:
                return np.asarray(session.model(tokens, training=False))

        np.testing.assert_array_equal(ours, _uncached_greedy(forward, prompt, cfg.new_tokens))
