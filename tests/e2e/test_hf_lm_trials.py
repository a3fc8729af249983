"""A Hugging Face causal LM through ``python -m bench`` (model=hf): a generate trial and a
training trial of a tiny llama in one sweep, tracked in MLflow with generation's figures."""

from __future__ import annotations

import statistics

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.e2e

HF_TINY = [
    "model=hf", "model.name=llama", "model.seq_len=16", "model.vocab_size=128",
    "model.hidden=32", "model.layers=2", "model.heads=2", "model.intermediate=64",
    "model.config.num_key_value_heads=1",
]  # fmt: skip
# Its forward FLOPs per sample of 16 tokens, counted on both sides: per token, the
# projections (2 x 32 x (32 + 16 + 16 + 32)), the MLP (3 x 2 x 32 x 64) in 2 layers and the
# head (2 x 32 x 128): 45,056 x 16; attention, 2 layers x 2 x 2 x 16 x 16 x 32 = 65,536.
HF_TINY_FLOPS = 45_056 * 16 + 65_536
WINDOW = [
    "time_to_first_token_ms", "time_per_output_token_p50_ms", "time_per_output_token_p90_ms",
    "decode_tokens_per_s", "prefill_tokens_per_s",
]  # fmt: skip
# each window's (the run's latest value: the last window's), and the trial's as trial_*
GENERATION = [*WINDOW, *(f"trial_{name}" for name in WINDOW), "peak_host_rss_mb",
              "prefill_achieved_flops_per_s", "decode_achieved_flops_per_s"]  # fmt: skip


def test_llama_generates_and_trains_through_the_cli(bench) -> None:  # noqa: ANN001
    result = bench.run("-m", "mode=generate,train", *HF_TINY, "prompt_len=8", "new_tokens=5", *TINY)
    assert result.returncode == 0, result.output
    children = {c.data.params["mode"]: c for c in bench.children()}
    assert sorted(children) == ["generate", "train"]
    for child in children.values():
        assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
        assert child.data.tags["bench.model"] == "llama"
        params = child.data.params
        assert (params["model.source"], params["model.hidden"]) == ("hf", "32")
        assert params["model.config.num_key_value_heads"] == "1"
        assert int(params["num_parameters"]) > 0
        assert child.data.metrics["flops_per_sample"] == HF_TINY_FLOPS
    gen = children["generate"]
    assert (gen.data.params["prompt_len"], gen.data.params["new_tokens"]) == ("8", "5")
    for name in GENERATION:
        assert gen.data.metrics[name] > 0, name
    # the trial's time to first token is the median of its windows', not the last window's
    windows = bench.client().get_metric_history(gen.info.run_id, "time_to_first_token_ms")
    assert len(windows) >= 2
    median = statistics.median(m.value for m in windows)
    assert gen.data.metrics["trial_time_to_first_token_ms"] == pytest.approx(median)
    assert "prompt_len" not in children["train"].data.params
    assert children["train"].data.metrics["final_loss"] > 0


def test_llama_trains_under_tf_with_keras_hub(bench) -> None:  # noqa: ANN001
    """framework=tf model=hf: keras-hub's llama (the keras-hub extra), one tiny training
    trial, with transformers' parameter count and the model named hf:llama."""
    result = bench.run("framework=tf", *HF_TINY, *TINY)
    assert result.returncode == 0, result.output
    (run,) = bench.children()
    assert run.data.tags["bench.status"] == "ok", run.data.tags.get("bench.error")
    assert run.data.tags["bench.framework"] == "tf"
    assert run.data.params["model.source"] == "hf"
    assert int(run.data.params["num_parameters"]) == 26_784  # transformers' count of it
    assert run.data.metrics["flops_per_sample"] == HF_TINY_FLOPS  # and torch's FLOPs
    assert run.data.metrics["final_loss"] > 0
    assert run.data.metrics["trial_samples_per_s"] > 0
