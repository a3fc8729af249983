"""framework=jax end to end (issue 35): lenet5 on Keras' JAX backend learns the digits
through ``python -m bench``, its run tagged with jax's version and torch's parameter count."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_lenet5_learns_digits_with_jax(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "framework=jax",
        "model=lenet5",
        "data=digits",
        "optimizer.name=adam",
        "optimizer.lr=0.002",
        "batch_size=32",
        "epochs=3",
        "steps_per_epoch=0",
        "warmup_steps=1",
    )
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
    assert child.data.tags["bench.jax_version"] == "0.10.2"
    assert child.data.params["num_parameters"] == "62006"
    assert child.data.metrics["epochs_completed"] == 3
    assert child.data.metrics["trial_samples_per_s"] > 0
    history = bench.client().get_metric_history(child.info.run_id, "test_accuracy")
    assert [m.step for m in history] == [1, 2, 3]
    assert max(history, key=lambda m: m.step).value >= 0.85, [m.value for m in history]
