"""Real data through each framework's own pipeline: the models learn, the loaders work."""

from __future__ import annotations

import pytest

from tests.cifar_fixture import write_cifar_archive

pytestmark = pytest.mark.e2e


def test_lenet5_learns_digits_in_every_framework_with_the_default_optimizer(bench) -> None:  # noqa: ANN001
    """The default SGD (lr 0.01, momentum 0.9) learns in all three: MXNet's once divided
    the gradient by the batch twice and ended at 0.23.  The same sweep is the one over all
    three frameworks in one experiment (it was a sweep of its own in test_mxnet_trials.py):
    one parent, a child of each framework under it, the same model everywhere."""
    result = bench.run(
        "-m",
        "framework=mxnet,torch,tf",
        "model=lenet5",
        "data=digits",
        "batch_size=32",
        "epochs=6",
        "steps_per_epoch=0",
        "warmup_steps=1",
        "tracking.experiment=three",
    )
    assert result.returncode == 0, result.output
    client = bench.client()
    parents, children = bench.parents("three"), bench.children("three")
    assert len(parents) == 1 and len(children) == 3
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert {c.data.tags["bench.framework"] for c in children} == {"torch", "tf", "mxnet"}
    assert {c.data.tags["bench.status"] for c in children} == {"ok"}
    assert {c.data.params["num_parameters"] for c in children} == {"62006"}
    assert len({c.data.metrics["flops_per_sample"] for c in children}) == 1
    assert "3 trials: 3 ok" in result.stdout
    for child in children:
        assert child.data.params["optimizer.name"] == "sgd"
        history = client.get_metric_history(child.info.run_id, "test_accuracy")
        assert [m.step for m in history] == [1, 2, 3, 4, 5, 6]
        final = max(history, key=lambda m: m.step).value
        assert final >= 0.90, (child.data.tags["bench.framework"], [m.value for m in history])
        # a full pass over the 1437 training images at batch 32
        assert child.data.metrics["epochs_completed"] == 6
        assert len(client.get_metric_history(child.info.run_id, "test_loss")) == 6


def test_cifar_pipelines_with_and_without_cache(bench) -> None:  # noqa: ANN001
    write_cifar_archive(bench.root / "data", "cifar10", per_member=32)
    result = bench.run(
        "-m",
        "framework=torch,tf",
        "data.cache=false,true",
        "model=lenet5",
        "data=cifar10",
        f"data.root={bench.root / 'data'}",
        "batch_size=16",
        "epochs=2",
        "steps_per_epoch=0",
        "warmup_steps=1",
        "data.workers=1",
    )
    assert result.returncode == 0, result.output
    children = bench.children()
    assert len(children) == 4
    for child in children:
        assert child.data.tags["bench.status"] == "ok"
        # 5 batch files x 32 images = 160 training images = 10 steps of 16
        assert child.data.metrics["samples_per_s"] > 0
        assert 0 <= child.data.metrics["data_wait_pct"] < 100
        assert 0 <= child.data.metrics["test_accuracy"] <= 1
        assert child.data.params["data.cache"] in ("True", "False")
    steps = {
        m.value
        for c in children
        for m in bench.client().get_metric_history(c.info.run_id, "epoch_time_s")
    }
    assert len(steps) == 8
