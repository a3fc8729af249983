"""bench.trial.frameworks.jax_optim: PyTorch's SGD (with momentum) and Adam in jax.numpy, the
Flax models' optimizers, step for step against torch.optim on the same gradients."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")

from bench.trial.frameworks import jax_optim  # noqa: E402


def _trajectories(make_torch: object, ours: jax_optim.Optimizer, steps: int = 6) -> None:
    rng = np.random.default_rng(0)
    start = {"w": rng.standard_normal((5, 3)).astype(np.float32),
             "b": rng.standard_normal(3).astype(np.float32)}  # fmt: skip
    grads = [
        {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in start.items()}
        for _ in range(steps)
    ]
    tensors = {k: torch.tensor(v, requires_grad=True) for k, v in start.items()}
    optimizer = make_torch(list(tensors.values()))  # type: ignore[operator]
    params = {k: jax.numpy.asarray(v) for k, v in start.items()}
    state = ours.init(params)
    update = jax.jit(ours.update)
    for g in grads:
        for k, t in tensors.items():
            t.grad = torch.tensor(g[k])
        optimizer.step()
        params, state = update(state, {k: jax.numpy.asarray(v) for k, v in g.items()}, params)
        for k, t in tensors.items():  # within a few float32 ulps of values near 1 (Adam's
            # bias corrections: torch's in float64 on the host, ours in float32)
            np.testing.assert_allclose(
                np.asarray(params[k]), t.detach().numpy(), rtol=2e-6, atol=5e-7
            )


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_is_torchs(momentum: float) -> None:
    _trajectories(
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=momentum), jax_optim.sgd(0.1, momentum)
    )


def test_adam_is_torchs() -> None:
    _trajectories(lambda p: torch.optim.Adam(p, lr=0.01), jax_optim.adam(0.01))


def test_a_wrong_learning_rate_is_caught() -> None:
    """The comparison can fail: 0.9x the learning rate is far outside its tolerance."""
    with pytest.raises(AssertionError):
        _trajectories(lambda p: torch.optim.Adam(p, lr=0.01), jax_optim.adam(0.009))


@pytest.mark.parametrize("make", [lambda: jax_optim.sgd(0.1, 0.9), lambda: jax_optim.adam(0.01)])
def test_the_state_can_be_donated(make: object) -> None:
    """The jitted step donates the optimizer's state: no buffer may appear in it twice."""
    ours = make()  # type: ignore[operator]
    params = {"w": jax.numpy.ones((4, 3)), "b": jax.numpy.zeros(3)}
    grads = {k: jax.numpy.full(v.shape, 0.5) for k, v in params.items()}
    step = jax.jit(ours.update, donate_argnums=(0, 2))
    params, state = step(ours.init(params), grads, params)
    params, state = step(state, grads, params)
    assert np.isfinite(np.asarray(params["w"])).all()
