"""Training parity (``python -m bench.parity``): the frameworks' trial sessions do the same
arithmetic from the same start, and the check can fail.

Real torch and TensorFlow in this process; MXNet in its own environment (.venv-mxnet).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.parity import __main__ as cli
from bench.parity import check, side

torch = pytest.importorskip("torch")

ALL = ["torch", "tf", "mxnet"]
OPTIMIZERS = {
    "sgd": dict(optimizer="sgd", lr=0.01, momentum=0.9),
    "sgd+wd": dict(optimizer="sgd", lr=0.01, momentum=0.9, weight_decay=5e-4),
    "adam": dict(optimizer="adam", lr=0.001, momentum=0.0),
}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_lenet5_trains_the_same_in_every_framework(optimizer: str) -> None:
    outcome = check.check(side.Spec(model="lenet5", **OPTIMIZERS[optimizer]), ALL)
    text = check.format_outcome(outcome)
    assert outcome.passed, text
    assert outcome.spec.steps == 20  # lenet5 is not chaotic: every step is compared
    for deviation in outcome.deviations:  # far inside the tolerance, not just under it
        assert deviation.update < 1e-3 and deviation.loss < 1e-4, text


@pytest.mark.e2e
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_resnet18_trains_the_same_in_every_framework(optimizer: str) -> None:
    outcome = check.check(side.Spec(model="resnet18", **OPTIMIZERS[optimizer]), ALL)
    text = check.format_outcome(outcome)
    assert outcome.passed, text
    # ResNet-18 on random data is chaotic: a one-ulp change of its initial weights moves its
    # own trajectory by over a hundredth of the tolerance within 2 steps, so the comparison
    # usually stops at the first step (momentum over 20 steps: the lenet5 test above).
    if outcome.spec.steps > 1:  # then over steps that rounding alone does not decide
        assert outcome.floor.passed(check.FLOOR_SHARE * outcome.tolerance), text
    if outcome.spec.steps < 20:
        assert f"compared over the first {outcome.spec.steps} of 20 steps" in text


def _scaled_gradients(monkeypatch: pytest.MonkeyPatch, optimizer: Any, factor: float) -> None:
    """PyTorch's optimizer steps with every gradient scaled by ``factor``: a wrong update."""
    original = optimizer.step

    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.mul_(factor)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(optimizer, "step", step)


def test_a_gradient_scaled_by_0_9_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    _scaled_gradients(monkeypatch, torch.optim.SGD, 0.9)
    outcome = check.check(side.Spec(model="lenet5", steps=5), ["tf", "torch"])
    assert not outcome.passed
    (deviation,) = outcome.deviations
    assert deviation.update == pytest.approx(0.1, rel=0.15)  # about a tenth of the update
    assert "FAILED" in check.format_outcome(outcome)


def test_a_learning_rate_off_by_0_9_fails_the_check_under_adam(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adam does not see a gradient's scale; a wrong step size it does."""
    original = torch.optim.Adam.__init__

    def init(self: Any, params: Any, lr: float = 1e-3, **kwargs: Any) -> None:
        original(self, params, lr=lr * 0.9, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "__init__", init)
    outcome = check.check(side.Spec(model="lenet5", steps=5, **OPTIMIZERS["adam"]), ["tf", "torch"])
    assert not outcome.passed
    assert outcome.deviations[0].update > 0.05


def test_the_cli_prints_the_table_and_exits_by_the_verdict(capsys: Any) -> None:
    assert cli.main(["--model", "lenet5", "--frameworks", "torch,tf", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "loss torch" in out and "loss tf" in out and "tf vs torch" in out
    assert "passed: every deviation must be at most 0.01" in out
    assert cli.main(["--frameworks", "torch,tf", "--steps", "3", "--tolerance", "1e-12"]) == 1


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--model", "resnet51"], "--model"),
        (["--model", "lstm"], "--model"),
        (["--frameworks", "torch"], "--frameworks"),
        (["--frameworks", "torch,jax"], "--frameworks"),
        (["--optimizer", "rmsprop"], "--optimizer"),
        (["--steps", "0"], "--steps"),
        (["--tolerance", "0"], "--tolerance"),
        (["--model", "alexnet", "--image-size", "32"], "--image-size"),
        (["--weight-decay", "-1"], "--weight-decay"),
    ],
)
def test_bad_input_is_exit_2_naming_the_option(argv: list[str], field: str, capsys: Any) -> None:
    assert cli.main(["--frameworks", "torch,tf", *argv]) == 2
    err = capsys.readouterr().err
    assert "nothing was run" in err and field in err


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--distributed", "dp"], "--distributed"),
        (["--distributed", "ps_async"], "--distributed"),
        (["--distributed", "ddp", "--frameworks", "tf"], "--frameworks"),
        (["--distributed", "ddp", "--workers", "3"], "--batch-size"),
        (["--distributed", "model_parallel", "--frameworks", "tf", "--workers", "3"], "--workers"),
        (["--distributed", "kvstore_async", "--workers", "1"], "--workers"),
    ],
)
def test_bad_strategy_input_is_exit_2_naming_the_option(
    argv: list[str], field: str, capsys: Any
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "nothing was run" in err and field in err


def test_weights_go_through_keras_and_back_unchanged() -> None:
    """The canonical form is PyTorch's: copied into Keras and read back, every tensor is
    bit for bit what went in (ResNet-18: convolutions, BatchNorm, a dense head)."""
    from bench import frameworks
    from bench.frameworks import weights

    spec = side.Spec(model="resnet18", steps=1)
    init = check.initial_weights(spec)
    adapter = frameworks.load("tf")
    session = adapter.prepare(spec.config("tf"), check.batches(spec))
    weights.load("tf", session, init)
    back = weights.export("tf", session)
    assert [t.value.shape for t in back] == [t.value.shape for t in init]
    assert all((a.value == b.value).all() for a, b in zip(back, init, strict=True))
    assert {t.kind for t in init} == {weights.PARAM, weights.BUFFER}
