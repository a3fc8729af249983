"""The Keras optimizers with PyTorch's arithmetic, shared by the adapters that train bench's
Keras models (tf, and jax on Keras' JAX backend): written in ``keras.ops`` only, so the
same code runs on either backend.  Keras is imported when an optimizer is made, by then
with the backend the adapter chose."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras

    from bench.core.config import BenchConfig


def make_optimizer(cfg: BenchConfig) -> keras.optimizers.Optimizer:
    """The optimizer of ``cfg`` with PyTorch's arithmetic (every strategy builds this one;
    weight decay is added to the gradients by the step, as an L2 term)."""
    import keras

    opt = cfg.optimizer
    if opt.name == "adam":
        return _torch_adam(opt.lr)
    return keras.optimizers.SGD(learning_rate=opt.lr, momentum=opt.momentum)


def _torch_adam(lr: float) -> keras.optimizers.Optimizer:
    """Keras' Adam with PyTorch's epsilon: added to the bias-corrected sqrt(v).  Keras adds
    it before the correction (in effect epsilon / sqrt(1 - beta2^t), 3e-7 at the first step
    instead of 1e-8), which moved lenet5's weights 26% off PyTorch's in 20 steps.  The
    same operations with epsilon scaled by sqrt(1 - beta2^t) are PyTorch's update."""
    import keras

    class TorchAdam(keras.optimizers.Adam):
        def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
            ops = keras.ops
            lr = ops.cast(learning_rate, variable.dtype)
            gradient = ops.cast(gradient, variable.dtype)
            step = ops.cast(self.iterations + 1, variable.dtype)
            beta_1_power = ops.power(ops.cast(self.beta_1, variable.dtype), step)
            beta_2_power = ops.power(ops.cast(self.beta_2, variable.dtype), step)
            m = self._momentums[self._get_variable_index(variable)]
            v = self._velocities[self._get_variable_index(variable)]
            correction = ops.sqrt(1 - beta_2_power)
            alpha = lr * correction / (1 - beta_1_power)
            self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
            self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
            denominator = ops.add(ops.sqrt(v), self.epsilon * correction)
            self.assign_sub(variable, ops.divide(ops.multiply(m, alpha), denominator))

    return TorchAdam(learning_rate=lr, epsilon=1e-8)
