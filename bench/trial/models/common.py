"""Building blocks shared by several architectures, for PyTorch, Keras 3, MXNet Gluon and
Flax NNX.

PyTorch pads a convolution or pooling window symmetrically (``padding=p`` on every side);
Keras' "same" pads asymmetrically once the stride is above 1.  :func:`keras_conv` and
:func:`keras_pad` reproduce PyTorch's arithmetic (``ZeroPadding2D`` + "valid" wherever "same"
would differ), so output sizes, and with them parameter counts and FLOPs, are identical.

Keras computes fans differently from PyTorch for some kernels (a depthwise kernel's fan-out,
for one), so Keras initializers are given here as explicit distributions whose scale is
computed with PyTorch's fan rules (:func:`torch_fans`).

Stochastic depth (per-sample dropping of a residual branch, torchvision's ``"row"`` mode) has
no parameters and is not in either library's core, so both versions live here.

MXNet Gluon blocks (``mxnet_*``) take channels-first input like PyTorch and pad
symmetrically like it, so they need no padding helpers; their weights have PyTorch's layouts
(a Dense weight is (out, in), a Conv2D weight (out, in, kh, kw)).

Flax NNX modules (``flax_*``, model.source=flax) take NHWC input like Keras and get
PyTorch's padding from explicit ``((p, p), (p, p))`` pads; their kernels have Keras' layouts
(a Linear kernel (in, out), a Conv kernel (kh, kw, in, out)).  Each Flax model lists its
weighted layers in PyTorch's registration order (``layers()``), which the canonical form of
:mod:`bench.trial.frameworks.weights` reads: NNX's own state is keyed by attribute name.

Nothing here imports a framework until it is called.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras
    import torch
    from mxnet import gluon

Size2 = int | tuple[int, int]


def pair(value: Size2) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def torch_fans(in_ch: int, out_ch: int, kernel: Size2 = 1, groups: int = 1) -> tuple[int, int]:
    """(fan_in, fan_out) as PyTorch computes them for a conv (kernel 1: a linear layer)."""
    kh, kw = pair(kernel)
    receptive = kh * kw
    return in_ch // groups * receptive, out_ch * receptive


def pool_matrix(in_size: int, out_size: int) -> Any:
    """(out, in) averaging matrix with PyTorch's adaptive pooling bins (a numpy array)."""
    import numpy as np

    mat = np.zeros((out_size, in_size), dtype=np.float32)
    for i in range(out_size):
        start = (i * in_size) // out_size
        end = math.ceil((i + 1) * in_size / out_size)
        mat[i, start:end] = 1.0 / (end - start)
    return mat


# --- Keras -------------------------------------------------------------------------------


def keras_uniform(bound: float) -> keras.initializers.Initializer:
    import keras

    return keras.initializers.RandomUniform(-bound, bound)


def keras_normal(std: float) -> keras.initializers.Initializer:
    import keras

    return keras.initializers.RandomNormal(0.0, std)


def keras_torch_default_init(fan_in: int) -> dict[str, keras.initializers.Initializer]:
    """PyTorch's default Conv/Linear init, U(+-1/sqrt(fan_in)) for weight and bias."""
    bound = 1.0 / math.sqrt(fan_in)
    return {"kernel_initializer": keras_uniform(bound), "bias_initializer": keras_uniform(bound)}


def keras_pad(x: Any, kernel: Size2, stride: Size2, padding: Size2) -> tuple[Any, str]:
    """Pad ``x`` as PyTorch would; return it with the Keras padding mode to use next."""
    from keras import layers

    (kh, kw), (sh, sw), (ph, pw) = pair(kernel), pair(stride), pair(padding)
    if (ph, pw) == (0, 0):
        return x, "valid"
    if (sh, sw) == (1, 1) and (kh - 1, kw - 1) == (2 * ph, 2 * pw):
        return x, "same"  # symmetric at stride 1 with odd kernels
    return layers.ZeroPadding2D((ph, pw))(x), "valid"


def keras_conv(
    x: Any,
    filters: int,
    kernel: Size2,
    stride: Size2 = 1,
    padding: Size2 = 0,
    *,
    use_bias: bool = False,
    kernel_initializer: Any = "glorot_uniform",
    bias_initializer: Any = "zeros",
) -> Any:
    """A Conv2D with PyTorch's padding arithmetic (``padding`` as in ``torch.nn.Conv2d``)."""
    from keras import layers

    x, mode = keras_pad(x, kernel, stride, padding)
    return layers.Conv2D(
        filters, pair(kernel), strides=pair(stride), padding=mode, use_bias=use_bias,
        kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
    )(x)  # fmt: skip


def keras_depthwise(
    x: Any, kernel: Size2, stride: Size2 = 1, padding: Size2 = 0, *, initializer: Any
) -> Any:
    """A bias-free depthwise conv (multiplier 1) with PyTorch's padding arithmetic."""
    from keras import layers

    x, mode = keras_pad(x, kernel, stride, padding)
    return layers.DepthwiseConv2D(
        pair(kernel), strides=pair(stride), padding=mode, use_bias=False,
        depthwise_initializer=initializer,
    )(x)  # fmt: skip


def keras_bn(x: Any, eps: float, torch_momentum: float = 0.1) -> Any:
    """BatchNorm with PyTorch's eps; Keras' momentum is the complement of PyTorch's."""
    from keras import layers

    return layers.BatchNormalization(epsilon=eps, momentum=1.0 - torch_momentum)(x)


@functools.cache
def _keras_stochastic_depth_cls() -> type:
    import keras

    class StochasticDepth(keras.layers.Layer):
        """In training, zero the whole input of a sample with probability ``rate`` and scale
        the survivors by 1/(1-rate); the identity at inference."""

        def __init__(self, rate: float, seed: int | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.rate = float(rate)
            self.seed = seed
            self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None

        def call(self, x: Any, training: bool = False) -> Any:
            if not training or self.seed_generator is None:
                return x
            keep = 1.0 - self.rate
            shape = (keras.ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
            noise = keras.random.uniform(shape, seed=self.seed_generator, dtype=x.dtype)
            return x * keras.ops.floor(keep + noise) / keep

        def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple:
            return input_shape

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "rate": self.rate, "seed": self.seed}

    return StochasticDepth


def keras_stochastic_depth(rate: float, **kwargs: Any) -> keras.layers.Layer:
    return _keras_stochastic_depth_cls()(rate, **kwargs)


# --- PyTorch -----------------------------------------------------------------------------


@functools.cache
def _torch_stochastic_depth_cls() -> type:
    import torch
    from torch import nn

    class StochasticDepth(nn.Module):
        """In training, zero the whole input of a sample with probability ``p`` and scale
        the survivors by 1/(1-p); the identity at inference."""

        def __init__(self, p: float) -> None:
            super().__init__()
            self.p = float(p)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not self.training or self.p == 0.0:
                return x
            keep = 1.0 - self.p
            shape = (x.shape[0],) + (1,) * (x.ndim - 1)
            mask = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep)
            return x * mask.div_(keep)

        def extra_repr(self) -> str:
            return f"p={self.p}"

    return StochasticDepth


def torch_stochastic_depth(p: float) -> torch.nn.Module:
    module: torch.nn.Module = _torch_stochastic_depth_cls()(p)
    return module


# --- Flax NNX ------------------------------------------------------------------------------


def flax_uniform(bound: float) -> Any:
    """U(-bound, bound), a JAX initializer (jax.nn.initializers.uniform starts at 0)."""
    import jax

    def init(key: Any, shape: Any, dtype: Any = None) -> Any:
        return jax.random.uniform(key, shape, dtype or "float32", -bound, bound)

    return init


def flax_torch_default_init(fan_in: int) -> dict[str, Any]:
    """PyTorch's default Conv/Linear init, U(+-1/sqrt(fan_in)) for weight and bias, as NNX
    ``kernel_init`` / ``bias_init`` arguments."""
    bound = 1.0 / math.sqrt(fan_in)
    return {"kernel_init": flax_uniform(bound), "bias_init": flax_uniform(bound)}


def flax_kaiming_fan_out() -> Any:
    """PyTorch's ``kaiming_normal_(mode="fan_out", nonlinearity="relu")``: N(0, 2/fan_out),
    fan_out = out x kh x kw (JAX's fans of an HWIO kernel are PyTorch's)."""
    import jax

    return jax.nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def flax_bn(channels: int, eps: float, rngs: Any, torch_momentum: float = 0.1) -> Any:
    """NNX BatchNorm with PyTorch's eps; NNX's momentum (the running statistics' share kept)
    is the complement of PyTorch's; the batch variance in two passes, as PyTorch computes it
    (NNX's default E[x^2] - E[x]^2 loses digits).  Its running variance takes the biased
    batch variance, as Keras' and MXNet's do (PyTorch's the unbiased one: docs/parity.md)."""
    from flax import nnx

    return nnx.BatchNorm(
        channels, momentum=1.0 - torch_momentum, epsilon=eps, use_fast_variance=False,
        rngs=rngs,
    )  # fmt: skip


def flax_adaptive_avg_pool2d(x: Any, output_size: int) -> Any:
    """PyTorch's AdaptiveAvgPool2d (same bins) on NHWC input, as two averaging matrices."""
    import jax.numpy as jnp

    _, h, w, _ = x.shape
    ph = jnp.asarray(pool_matrix(h, output_size), x.dtype)
    pw = jnp.asarray(pool_matrix(w, output_size), x.dtype)
    x = jnp.einsum("ih,nhwc->niwc", ph, x)
    return jnp.einsum("jw,niwc->nijc", pw, x)


def flax_params(model: Any) -> int:
    """Parameters that train (NNX's ``nnx.Param``; BatchNorm's running statistics excluded)."""
    from flax import nnx

    leaves = [v for v in nnx.state(model, nnx.Param).flat_state()]
    return sum(math.prod(value.shape) for _, value in leaves)


# --- MXNet Gluon ---------------------------------------------------------------------------


def mxnet_torch_default_init(fan_in: int) -> dict[str, Any]:
    """PyTorch's default Conv/Linear init, U(+-1/sqrt(fan_in)) for weight and bias, as Gluon
    ``weight_initializer`` / ``bias_initializer`` arguments."""
    import mxnet as mx

    bound = 1.0 / math.sqrt(fan_in)
    return {
        "weight_initializer": mx.init.Uniform(bound),
        "bias_initializer": mx.init.Uniform(bound),
    }


def mxnet_kaiming_fan_out() -> Any:
    """PyTorch's ``kaiming_normal_(mode="fan_out", nonlinearity="relu")``: N(0, 2/fan_out)."""
    import mxnet as mx

    return mx.init.MSRAPrelu(factor_type="out", slope=0.0)


@functools.cache
def _mxnet_adaptive_pool_cls() -> type:
    from mxnet.gluon import nn

    class AdaptiveAvgPool2D(nn.HybridBlock):
        """PyTorch's AdaptiveAvgPool2d (same bins), MXNet's contrib operator."""

        def __init__(self, output_size: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.output_size = output_size

        def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803 - Gluon's signature
            return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.output_size)

    return AdaptiveAvgPool2D


def mxnet_adaptive_avg_pool2d(output_size: int) -> gluon.HybridBlock:
    block: gluon.HybridBlock = _mxnet_adaptive_pool_cls()(output_size)
    return block


def mxnet_trainable_params(net: gluon.Block) -> int:
    """Parameters that train (PyTorch's ``parameters()``; BN running stats excluded)."""
    return sum(math.prod(p.shape) for p in net.collect_params().values() if p.grad_req != "null")
