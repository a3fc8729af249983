"""PyTorch's SGD (with momentum) and Adam in ``jax.numpy``, for the Flax NNX models of
framework=jax (model.source=flax): pure functions over a parameter pytree, state in, state
out, so the jitted step carries them.  The operations are ``torch.optim``'s single-tensor
ones, in their order, so that the two frameworks round alike:

- SGD: ``buf = momentum * buf + g`` (the first step's buffer is ``g``, which a zero buffer
  gives exactly), ``p = p - lr * buf``; without momentum ``p = p - lr * g``.
- Adam: ``m = m + (g - m) * (1 - beta1)`` (``lerp``), ``v = v * beta2 + (1 - beta2) * g * g``,
  ``p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.

Weight decay is PyTorch's L2 term, added to the gradient by the step before the update (as
the Keras optimizers of :mod:`.keras_optim` take it).  JAX is imported when an optimizer is
made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.core.config import BenchConfig

BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-8  # torch.optim.Adam's defaults, as the other sides'


@dataclass(frozen=True)
class Optimizer:
    """``init(params) -> state``; ``update(state, grads, params) -> (params, state)``."""

    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], tuple[Any, Any]]


def make_optimizer(cfg: BenchConfig) -> Optimizer:
    opt = cfg.optimizer
    if opt.name == "adam":
        return adam(opt.lr)
    return sgd(opt.lr, opt.momentum)


def sgd(lr: float, momentum: float = 0.0) -> Optimizer:
    import jax
    import jax.numpy as jnp

    def init(params: Any) -> Any:
        return jax.tree.map(jnp.zeros_like, params) if momentum else ()

    def update(state: Any, grads: Any, params: Any) -> tuple[Any, Any]:
        if not momentum:
            return jax.tree.map(lambda p, g: p - lr * g, params, grads), state
        state = jax.tree.map(lambda b, g: momentum * b + g, state, grads)
        return jax.tree.map(lambda p, b: p - lr * b, params, state), state

    return Optimizer(init, update)


def adam(lr: float, beta1: float = BETA1, beta2: float = BETA2, eps: float = EPSILON) -> Optimizer:
    import jax
    import jax.numpy as jnp

    def init(params: Any) -> Any:
        # Two trees of their own: the step donates its state, and a buffer donated twice
        # (m and v the same zeros) is refused.
        m, v = (jax.tree.map(jnp.zeros_like, params) for _ in range(2))
        return {"step": jnp.zeros((), jnp.int32), "m": m, "v": v}

    def update(state: Any, grads: Any, params: Any) -> tuple[Any, Any]:
        step = state["step"] + 1
        t = step.astype(jnp.float32)
        m = jax.tree.map(lambda m, g: m + (g - m) * (1 - beta1), state["m"], grads)
        v = jax.tree.map(lambda v, g: v * beta2 + (1 - beta2) * g * g, state["v"], grads)
        step_size = lr / (1 - beta1**t)
        correction2 = jnp.sqrt(1 - beta2**t)

        def move(p: Any, m: Any, v: Any) -> Any:
            return p - step_size * (m / (jnp.sqrt(v) / correction2 + eps))

        return jax.tree.map(move, params, m, v), {"step": step, "m": m, "v": v}

    return Optimizer(init, update)
