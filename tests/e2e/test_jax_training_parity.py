"""Training parity of framework=jax (issue 35): ``python -m bench.parity --frameworks
torch,tf,jax,jax[source=flax]``, the Keras models on Keras' JAX backend and the zoo's Flax
NNX models, each through the jax adapter's own trial session in a child process (jax picks
Keras' backend before Keras loads), weights carried in the canonical form.  lenet5, SGD and
Adam, at the same tolerance as the other frameworks (resnet18: with every framework, in
tests/e2e/test_resnet18_training_parity.py); and a 0.9x gradient on the jax side fails it.

The jax side is a child process, so the fault cannot be monkeypatched into it from here:
the test puts a ``sitecustomize`` module on the child's ``PYTHONPATH`` that wraps
``jax.value_and_grad`` (which both of the adapter's steps call) to scale every gradient by
0.9.  Each case builds and compiles the model in a child (seconds to a minute on 2 idle
cores; more on a loaded machine): the e2e tier.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from bench.parity import check
from bench.trial import parity as side

torch = pytest.importorskip("torch")
pytest.importorskip("flax")

pytestmark = pytest.mark.e2e

OPTIMIZERS = {
    "sgd": dict(optimizer="sgd", lr=0.01, momentum=0.9),
    "adam": dict(optimizer="adam", lr=0.001, momentum=0.0),
}
FLAX = "jax[source=flax]"
SIDES = ["torch", "tf", "jax", FLAX]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_lenet5_trains_the_same_on_jax_keras_and_flax(optimizer: str) -> None:
    outcome = check.check(side.Spec(model="lenet5", **OPTIMIZERS[optimizer]), SIDES)
    text = check.format_outcome(outcome)
    assert outcome.passed, text
    assert outcome.spec.steps == 20 and not outcome.rounding_dominates, text
    assert [d.framework for d in outcome.deviations] == SIDES[1:]
    for deviation in outcome.deviations:  # rounding, far inside the tolerance
        assert deviation.update < 1e-3 and deviation.loss < 1e-4, text
        assert deviation.scale < 1e-4 and deviation.weights < 1e-4, text


# ResNet-18 on both jax sides is checked with torch, tf and mxnet in one check per optimizer
# (tests/e2e/test_resnet18_training_parity.py): one reference and one rounding floor for all.


SCALED_GRADIENTS = textwrap.dedent(
    """
    # A fault for tests/e2e/test_jax_training_parity.py: every gradient jax computes through
    # jax.value_and_grad, scaled by 0.9.
    import functools

    import jax

    _value_and_grad = jax.value_and_grad


    def value_and_grad(fun, *args, **kwargs):
        inner = _value_and_grad(fun, *args, **kwargs)

        @functools.wraps(inner)
        def scaled(*a, **k):
            value, grads = inner(*a, **k)
            return value, jax.tree.map(lambda g: 0.9 * g, grads)

        return scaled


    jax.value_and_grad = value_and_grad
    """
)


@pytest.mark.parametrize("jax_side", ["jax", FLAX])
def test_a_gradient_scaled_by_0_9_on_the_jax_side_fails(
    jax_side: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sitecustomize.py").write_text(SCALED_GRADIENTS)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    )
    outcome = check.check(side.Spec(model="lenet5", steps=5), ["torch", jax_side])
    text = check.format_outcome(outcome)
    assert not outcome.passed and "FAILED" in text, text
    (deviation,) = outcome.deviations
    # The jax side's update is 0.9 of the reference's: 0.1 off, all of it in its length.
    assert deviation.scale == pytest.approx(0.1, rel=0.15), text
    assert deviation.update == pytest.approx(0.1, rel=0.15), text
    assert deviation.scale > 5 * outcome.limits["scale"], text
