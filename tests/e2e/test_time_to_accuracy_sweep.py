"""goal=accuracy through the CLI: lenet5 on digits in torch and tf trains until its held-out
accuracy reaches the target, and the run holds the time to it and the evaluations' history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_lenet5_trains_to_a_target_on_digits(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m",
        "framework=torch,tf",
        "model=lenet5",
        "data=digits",
        "data.workers=0",
        "batch_size=32",
        "warmup_steps=1",
        "goal=accuracy",
        "goal.target=0.5",
        "goal.max_epochs=4",
        "goal.eval_every=0.5",
        "optimizer.lr=0.05",
    )
    assert result.returncode == 0, result.output
    client = bench.client()
    children = bench.children()
    assert {c.data.tags["bench.framework"] for c in children} == {"torch", "tf"}
    for child in children:
        m, run = child.data.metrics, child.info.run_id
        assert child.data.tags["bench.status"] == "ok"
        assert child.data.params["goal.target"] == "0.5"
        assert m["target_reached"] == 1.0, m
        history = client.get_metric_history(run, "test_accuracy")
        epochs = client.get_metric_history(run, "eval_epoch")
        assert len(history) == len(epochs) == m["evals_to_target"]
        # an evaluation every half pass; the last one reached the target, none before it
        assert [e.value for e in sorted(epochs, key=lambda e: e.step)][:2] == [0.5, 1.0]
        values = [h.value for h in sorted(history, key=lambda h: h.step)]
        assert values[-1] >= 0.5 > max(values[:-1], default=0.0)
        assert m["epochs_to_target"] == len(history) * 0.5
        # the clock: every window and every evaluation up to the one that reached it
        assert m["time_to_target_s"] >= m["train_time_to_target_s"] + m["eval_time_to_target_s"]
        assert m["best_test_accuracy"] == values[-1]
        # MLPerf's log of the run, written on the host with mlperf-logging's mllog
        log = Path(client.download_artifacts(run, "mllog.txt", str(bench.root))).read_text()
        lines = [json.loads(x.removeprefix(":::MLLOG ")) for x in log.splitlines()]
        accuracy = [x["value"] for x in lines if x["key"] == "eval_accuracy"]
        assert accuracy == values and lines[-1]["key"] == "run_stop"
        assert lines[-1]["metadata"]["status"] == "success"
