"""A sequence model through ``python -m bench``: a real trial, tracked in MLflow."""

from __future__ import annotations

import pytest

from bench.trial.models import lstm
from tests.conftest import TINY

pytestmark = pytest.mark.e2e

LSTM_TINY = ["model.seq_len=8", "model.vocab_size=50", "model.hidden=16", "model.layers=1"]


def test_lstm_trial_in_tensorflow_is_ok_and_logged(bench) -> None:  # noqa: ANN001
    result = bench.run("model=lstm", "framework=tf", *LSTM_TINY, *TINY)
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
    assert child.data.tags["bench.model"] == "lstm"
    params = child.data.params
    assert (params["model.seq_len"], params["model.hidden"]) == ("8", "16")
    assert int(params["num_parameters"]) == lstm.param_count(50, 16, 1)
    assert child.data.metrics["final_loss"] > 0
    assert child.data.metrics["trial_samples_per_s"] > 0
