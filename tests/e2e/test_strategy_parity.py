"""Strategy parity (``python -m bench.parity --distributed``): each synchronous strategy
that runs on the CPU, as a real trial at 2 workers x batch 16 (model_parallel: the split
model at batch 32), follows the undistributed run at batch 32 step for step, its workers'
weights stay identical, and a strategy trial whose arithmetic is off fails the check.  An
asynchronous strategy passes the looser check, and fails it with a wrong update scale."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from bench.cli import parity as cli
from bench.parity import check
from bench.parity import strategy as strategies
from bench.trial import parity as side

pytestmark = pytest.mark.e2e

SPEC = side.Spec(model="lenet5", batch_size=32, steps=10)


@pytest.fixture(scope="module", autouse=True)
def one_reference_per_framework() -> Iterator[None]:
    """The undistributed side a strategy is checked against (check.horizon: the session at
    the full batch, its rounding floor from shaken starts, the initial weights and batches)
    depends on the spec and the framework only, not on the strategy or on a fault injected
    into the strategy's trial: it is made once per framework in this module (15-25 s each on
    2 busy cores) and each check gets its own copy.  The strategies' trials stay real."""
    made: dict[tuple[str, str, float], Any] = {}
    original = strategies.horizon

    def horizon(spec: side.Spec, framework: str, tolerance: float) -> Any:
        key = (repr(spec), framework, tolerance)
        if key not in made:
            made[key] = original(spec, framework, tolerance)
        return copy.deepcopy(made[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(strategies, "horizon", horizon)
        yield


def _passes(framework: str, strategy: str) -> None:
    outcome = strategies.check_strategy(SPEC, framework, strategy, 2)
    text = check.format_outcome(outcome)
    assert outcome.passed, text
    assert outcome.spec.steps == SPEC.steps, text
    (deviation,) = outcome.deviations
    assert deviation.update < 1e-3 and deviation.loss < 1e-4, text
    if strategy in ("mirrored", "kvstore_device", "model_parallel", "jax_dp"):  # one process
        assert outcome.replicas_apart is None, text
    else:
        assert outcome.replicas_apart is not None and outcome.replicas_apart < 1e-6, text


@pytest.mark.parametrize(("framework", "strategy"), [("torch", "ddp"), ("tf", "mirrored"),
                                                     ("tf", "multiworker"),
                                                     ("mxnet", "kvstore_sync"),
                                                     ("mxnet", "kvstore_device"),
                                                     ("tf", "model_parallel"),
                                                     ("jax", "jax_dp"),
                                                     ("jax", "jax_distributed")])  # fmt: skip
def test_a_strategy_trains_like_the_undistributed_run(framework: str, strategy: str) -> None:
    _passes(framework, strategy)


@pytest.mark.horovod
@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.usefixtures("horovod_ready")
def test_horovod_trains_like_the_undistributed_run(framework: str) -> None:
    _passes(framework, "horovod")


@pytest.mark.parametrize(("framework", "strategy"), [("torch", "ddp"),
                                                     ("mxnet", "kvstore_device"),
                                                     ("tf", "model_parallel"),
                                                     ("jax", "jax_dp"),
                                                     ("jax", "jax_distributed")])  # fmt: skip
def test_a_strategy_trial_with_a_different_step_fails(
    framework: str, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The distributed trial's learning rate 0.9x the undistributed run's: a tenth off."""
    original = strategies.trial_overrides

    def off(spec: side.Spec, framework: str) -> list[str]:
        return [*original(spec, framework), f"optimizer.lr={spec.lr * 0.9}"]

    monkeypatch.setattr(strategies, "trial_overrides", off)
    outcome = strategies.check_strategy(SPEC, framework, strategy, 2)
    assert not outcome.passed
    assert outcome.deviations[0].update > 0.05


def test_an_asynchronous_strategy_passes_the_looser_check_and_a_wrong_scale_fails_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kvstore_async: staleness moves the update by about 0.1 (lenet5, 10 steps, no
    momentum); each push at half the learning rate moves it by 0.5."""
    spec = side.Spec(model="lenet5", batch_size=32, steps=10, momentum=0.0)
    outcome = strategies.check_async(spec, "mxnet", "kvstore_async", 2)
    assert outcome.passed, check.format_outcome(outcome)
    assert outcome.tolerance == strategies.ASYNC_TOLERANCE
    original = strategies.trial_overrides

    def half(spec: side.Spec, framework: str) -> list[str]:
        return [*original(spec, framework), f"optimizer.lr={spec.lr * 0.5}"]

    monkeypatch.setattr(strategies, "trial_overrides", half)
    outcome = strategies.check_async(spec, "mxnet", "kvstore_async", 2)
    assert not outcome.passed
    assert outcome.deviations[0].update > 0.4


def test_the_cli_runs_a_strategy_check(capsys: Any) -> None:
    code = cli.main(["--distributed", "ddp", "--workers", "2", "--steps", "3", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ddp at 2 workers x batch 16, run as a real trial" in out
    assert "ddp 2x16 vs torch 1x32" in out and "workers' weights apart" in out


def test_a_sweep_with_parity_true_checks_before_its_first_trial(bench: Any) -> None:
    got = bench.run(
        "-m", "framework=torch,tf", "model=lenet5", "parity=true", "batch_size=8",
        "epochs=1", "steps_per_epoch=2", "warmup_steps=1",
    )  # fmt: skip
    assert got.returncode == 0, got.output
    assert "bench: parity lenet5-sgd-b8-32px: passed" in got.stderr
    (parent,) = bench.parents()
    assert parent.data.tags["bench.parity"] == "passed"
    assert parent.data.tags["bench.parity.lenet5-sgd-b8-32px"] == "passed"
    table = bench.client().download_artifacts(
        parent.info.run_id, "parity/lenet5-sgd-b8-32px.txt", str(bench.root)
    )
    assert "tf vs torch" in open(table).read()
    assert {c.data.tags["bench.parity"] for c in bench.children()} == {"passed"}
