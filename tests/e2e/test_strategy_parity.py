"""Strategy parity (``python -m bench.parity --distributed``): each synchronous strategy
that runs on the CPU, as a real trial at 2 workers x batch 16, follows the undistributed
run at batch 32 step for step, its workers' weights stay identical, and a strategy trial
whose arithmetic is off fails the check."""

from __future__ import annotations

from typing import Any

import pytest

from bench.parity import __main__ as cli
from bench.parity import check, side
from bench.parity import strategy as strategies

pytestmark = pytest.mark.e2e

SPEC = side.Spec(model="lenet5", batch_size=32, steps=10)


def _passes(framework: str, strategy: str) -> None:
    outcome = strategies.check_strategy(SPEC, framework, strategy, 2)
    text = check.format_outcome(outcome)
    assert outcome.passed, text
    assert outcome.spec.steps == SPEC.steps, text
    (deviation,) = outcome.deviations
    assert deviation.update < 1e-3 and deviation.loss < 1e-4, text
    assert outcome.replicas_apart < 1e-6, text


@pytest.mark.parametrize(("framework", "strategy"), [("torch", "ddp"), ("tf", "mirrored"),
                                                     ("tf", "multiworker"),
                                                     ("mxnet", "kvstore_sync")])  # fmt: skip
def test_a_strategy_trains_like_the_undistributed_run(framework: str, strategy: str) -> None:
    _passes(framework, strategy)


@pytest.mark.horovod
@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.usefixtures("horovod_ready")
def test_horovod_trains_like_the_undistributed_run(framework: str) -> None:
    _passes(framework, "horovod")


def test_a_strategy_trial_with_a_different_step_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The distributed trial's learning rate 0.9x the undistributed run's: a tenth off."""
    original = strategies.trial_overrides

    def off(spec: side.Spec, framework: str) -> list[str]:
        return [*original(spec, framework), f"optimizer.lr={spec.lr * 0.9}"]

    monkeypatch.setattr(strategies, "trial_overrides", off)
    outcome = strategies.check_strategy(SPEC, "torch", "ddp", 2)
    assert not outcome.passed
    assert outcome.deviations[0].update > 0.05


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
