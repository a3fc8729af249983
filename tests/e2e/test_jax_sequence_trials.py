"""framework=jax with a sequence model end to end (issue 35): the transformer through
``python -m bench`` on Keras' JAX backend, its run tagged with jax's version, torch's
parameter count and the zoo's FLOP count (model.source=flax runs the same session code:
tests/unit/test_jax_sequence_models.py), and under distributed=jax_dp on 2 host devices."""

from __future__ import annotations

import pytest

from bench.trial.models import transformer
from tests.conftest import TINY

pytestmark = pytest.mark.e2e

SIZES = {"seq_len": 8, "vocab_size": 50, "layers": 1, "hidden": 16, "heads": 2,
         "intermediate": 32, "max_positions": 8}  # fmt: skip


def test_transformer_trains_with_jax(bench) -> None:  # noqa: ANN001
    sizes = [f"model.{key}={value}" for key, value in SIZES.items()]
    result = bench.run("framework=jax", "model=transformer", *sizes, *TINY)
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
    assert child.data.tags["bench.jax_version"] == "0.10.2"
    assert child.data.tags["bench.model"] == "transformer"
    assert int(child.data.params["num_parameters"]) == transformer.param_count(50, 16, 1, 32, 8)
    assert child.data.metrics["final_loss"] > 0
    assert child.data.metrics["trial_samples_per_s"] > 0
    # One token's forward: per layer 4 projections and the FFN, the attention's two products
    # over 8 positions; the MLM head's dense layer and its product with the 50-token table.
    per_token = 2 * (4 * 16 * 16 + 2 * 16 * 32 + 2 * 8 * 16) + 2 * (16 * 16 + 16 * 50)
    assert child.data.metrics["flops_per_sample"] == 8 * per_token


def test_transformer_trains_under_jax_dp_on_two_host_devices(bench) -> None:  # noqa: ANN001
    """distributed=jax_dp with a sequence model: its batches (tokens, and the targets tuple)
    sharded over 2 host devices; the job's rate and each device's."""
    sizes = [f"model.{key}={value}" for key, value in SIZES.items()]
    result = bench.run(
        "framework=jax", "model=transformer", "distributed=jax_dp", "workers=2", *sizes, *TINY
    )
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
    assert child.data.params["distributed"] == "jax_dp"
    metrics = child.data.metrics
    assert metrics["final_loss"] > 0
    assert metrics["worker0_samples_per_s"] == metrics["worker1_samples_per_s"] > 0
    assert metrics["global_samples_per_s"] == metrics["trial_samples_per_s"] > 0
