"""A model's weights in one canonical form shared by every framework: PyTorch's layout and
order (each weighted module in registration order; its parameters, then its BatchNorm
running statistics), as a list of float32 arrays with a kind each.

Read and written through a framework's own session (:mod:`bench.trial.frameworks`), so the
parity check trains exactly the model a trial trains.  Each framework is imported only by
its own functions.  Which :class:`Form` a framework's sessions use is a fact of its spec
(``FrameworkSpec.weights``): TensorFlow's and JAX's sessions both hold a Keras model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.core.frameworks import FRAMEWORKS

PARAM, BUFFER = "param", "buffer"  # trained by the optimizer / running statistics


@dataclass
class Tensor:
    name: str
    kind: str
    value: np.ndarray


def _already_final(session: Any) -> None:
    """Nothing to settle: the session's copy of the weights is the job's final one."""


@dataclass(frozen=True)
class Form:
    """How one kind of session reads and writes its model's weights in canonical form."""

    export: Callable[[Any], list[Tensor]]
    load: Callable[[Any, list[np.ndarray]], None]  # the values, shapes already checked
    disable_dropout: Callable[[Any], int]
    settle: Callable[[Any], None] = _already_final


def form(framework: str) -> Form:
    """The form framework ``framework``'s sessions use (its spec's ``weights``)."""
    return FORMS[FRAMEWORKS[framework].weights]


def export(framework: str, session: Any) -> list[Tensor]:
    """The session's model's weights in canonical form."""
    return form(framework).export(session)


def load(framework: str, session: Any, tensors: list[Tensor]) -> None:
    """Give the session's model ``tensors`` (canonical form)."""
    found = export(framework, session)
    if [t.value.shape for t in found] != [t.value.shape for t in tensors]:
        mismatch = (
            next(
                (f"{a.name} {a.value.shape} vs {b.name} {b.value.shape}")
                for a, b in zip(found, tensors, strict=False)
                if a.value.shape != b.value.shape
            )
            if len(found) == len(tensors)
            else f"{len(found)} tensors vs {len(tensors)}"
        )
        raise ValueError(f"{framework}'s model does not have the reference's tensors: {mismatch}")
    form(framework).load(session, [t.value for t in tensors])


def settle(framework: str, session: Any) -> None:
    """After the last step, before :func:`export`: make the session's copy of the weights
    the job's final ones.  A worker of an MXNet parameter-server job waits for every worker
    to finish (a barrier) and pulls the servers' weights, which in dist_async may hold
    updates the worker's last pull preceded; elsewhere the session's copy is final."""
    form(framework).settle(session)


def disable_dropout(framework: str, session: Any) -> int:
    """Make every dropout layer the identity (before the first step); return how many."""
    return form(framework).disable_dropout(session)


# -- PyTorch ---------------------------------------------------------------------------------


def _torch_entries(model: Any) -> list[tuple[str, str, Any]]:
    entries = []
    for prefix, module in model.named_modules():
        for name, p in module.named_parameters(recurse=False):
            entries.append((f"{prefix}.{name}", PARAM, p))
        for name, b in module.named_buffers(recurse=False):
            if name != "num_batches_tracked":
                entries.append((f"{prefix}.{name}", BUFFER, b))
    return entries


def torch_model_weights(model: Any) -> list[Tensor]:
    """A ``torch.nn.Module``'s weights in canonical form (the canonical form is its own)."""
    return [
        Tensor(name, kind, t.detach().cpu().numpy().astype(np.float32).copy())
        for name, kind, t in _torch_entries(model)
    ]


def _torch_export(session: Any) -> list[Tensor]:
    return torch_model_weights(session.model)


def _torch_load(session: Any, values: list[np.ndarray]) -> None:
    import torch

    with torch.no_grad():
        for (_, _, t), value in zip(_torch_entries(session.model), values, strict=True):
            t.copy_(torch.from_numpy(value))


def _torch_dropout(session: Any) -> int:
    import torch

    found = [m for m in session.model.modules() if isinstance(m, torch.nn.Dropout)]
    for module in found:
        module.p = 0.0
    return len(found)


# -- Keras (TensorFlow) --------------------------------------------------------------------


def keras_order(model: Any) -> list[Any]:
    """Layers depth-first from the outputs, each layer's inputs in call order: the order in
    which the PyTorch build registers the same layers."""
    seen: set[int] = set()
    order: list[Any] = []
    stack = [(t, False) for t in reversed(model.outputs)]
    while stack:
        tensor, inputs_done = stack.pop()
        layer, node_index, _ = tensor._keras_history
        if id(layer) in seen:
            continue
        if inputs_done:
            seen.add(id(layer))
            order.append(layer)
            continue
        stack.append((tensor, True))
        stack += [(t, False) for t in reversed(layer._inbound_nodes[node_index].input_tensors)]
    return order


def _keras_layers(model: Any) -> list[Any]:
    return [layer for layer in keras_order(model) if layer.weights]


def _keras_kind(layer: Any) -> str:
    return type(layer).__name__


def _to_torch(layer: Any, values: list[np.ndarray]) -> list[Tensor]:
    kind = _keras_kind(layer)
    if kind == "BatchNormalization":  # gamma, beta, moving mean, moving variance
        names = ("weight", "bias", "running_mean", "running_var")
        kinds = (PARAM, PARAM, BUFFER, BUFFER)
        return [
            Tensor(f"{layer.name}.{n}", k, v) for n, k, v in zip(names, kinds, values, strict=True)
        ]
    w = values[0]
    if kind == "Dense":
        w = w.T
    elif kind == "DepthwiseConv2D":
        w = w.transpose(2, 3, 0, 1)  # (kh, kw, C, 1) -> (C, 1, kh, kw)
    elif kind == "Conv2D":
        w = w.transpose(3, 2, 0, 1)  # (kh, kw, in, out) -> (out, in, kh, kw)
    else:
        raise ValueError(f"parity: no canonical form for the Keras layer {kind} ({layer.name})")
    out = [Tensor(f"{layer.name}.weight", PARAM, np.ascontiguousarray(w))]
    out += [Tensor(f"{layer.name}.bias", PARAM, v) for v in values[1:]]
    return out


def _from_torch(layer: Any, values: list[np.ndarray]) -> list[np.ndarray]:
    kind = _keras_kind(layer)
    if kind == "BatchNormalization":
        return values
    w = values[0]
    if kind == "Dense":
        w = w.T
    elif kind == "DepthwiseConv2D":
        w = w.transpose(2, 3, 0, 1)  # (C, 1, kh, kw) -> (kh, kw, C, 1)
    else:
        w = w.transpose(2, 3, 1, 0)  # (out, in, kh, kw) -> (kh, kw, in, out)
    return [np.ascontiguousarray(w), *values[1:]]


def _keras_export(session: Any) -> list[Tensor]:
    out: list[Tensor] = []
    for layer in _keras_layers(session.model):
        values = [np.asarray(v, dtype=np.float32) for v in layer.get_weights()]
        out += _to_torch(layer, values)
    return out


def _keras_load(session: Any, values: list[np.ndarray]) -> None:
    at = 0
    for layer in _keras_layers(session.model):
        n = len(layer.get_weights())
        layer.set_weights(_from_torch(layer, values[at : at + n]))
        at += n


def _keras_dropout(session: Any) -> int:
    import keras

    found = [layer for layer in session.model.layers if isinstance(layer, keras.layers.Dropout)]
    for layer in found:
        layer.rate = 0.0  # read when the step is traced, at its first call
    return len(found)


# -- MXNet (Gluon) -------------------------------------------------------------------------


def _mxnet_params(session: Any) -> list[tuple[str, Any]]:
    return list(session.net.collect_params().items())


def _mxnet_export(session: Any) -> list[Tensor]:
    return [
        Tensor(
            name,
            BUFFER if name.endswith(("running_mean", "running_var")) else PARAM,
            p.data().asnumpy().astype(np.float32).copy(),
        )
        for name, p in _mxnet_params(session)
    ]


def _mxnet_load(session: Any, values: list[np.ndarray]) -> None:
    import mxnet as mx

    for (_, p), value in zip(_mxnet_params(session), values, strict=True):
        p.set_data(mx.nd.array(value))


def _mxnet_settle(session: Any) -> None:
    kvstore = getattr(session, "kvstore", None)
    if kvstore is None or session.trainer is None:
        return
    kvstore._barrier()
    for i, param in enumerate(session.trainer._params):  # the Trainer's keys
        if param.grad_req != "null":
            kvstore.pull(i, param.list_data(), priority=-i)
    session.sync()


def _mxnet_dropout(session: Any) -> int:
    from mxnet import gluon

    found: list[Any] = []

    def visit(block: Any) -> None:
        if isinstance(block, gluon.nn.Dropout):
            found.append(block)
        for child in block._children.values():
            visit(child() if callable(child) and not hasattr(child, "_children") else child)

    visit(session.net)
    for block in found:
        block._rate = 0.0  # read when the hybridized graph is built, at its first call
    return len(found)


# -- Flax NNX (JAX, model.source=flax) -------------------------------------------------------


def _flax_to_torch(name: str, layer: Any) -> list[Tensor]:
    from flax import nnx

    if isinstance(layer, nnx.BatchNorm):
        values: tuple[Any, ...] = (layer.scale, layer.bias, layer.mean, layer.var)
        names = ("weight", "bias", "running_mean", "running_var")
        kinds = (PARAM, PARAM, BUFFER, BUFFER)
        return [
            Tensor(f"{name}.{n}", k, np.asarray(v[...], dtype=np.float32).copy())
            for n, k, v in zip(names, kinds, values, strict=True)
        ]
    w = np.asarray(layer.kernel[...], dtype=np.float32)
    if isinstance(layer, nnx.Linear):
        w = w.T
    elif isinstance(layer, nnx.Conv) and layer.feature_group_count == 1:
        w = w.transpose(3, 2, 0, 1)  # (kh, kw, in, out) -> (out, in, kh, kw)
    else:
        raise ValueError(f"parity: no canonical form for the Flax layer {type(layer).__name__}")
    out = [Tensor(f"{name}.weight", PARAM, np.ascontiguousarray(w))]
    if getattr(layer, "bias", None) is not None:
        out.append(Tensor(f"{name}.bias", PARAM, np.asarray(layer.bias[...], np.float32).copy()))
    return out


def _flax_export(session: Any) -> list[Tensor]:
    """An NNX model's weights, its layers in the order its ``layers()`` lists them
    (PyTorch's registration order: NNX's own state is keyed by attribute name)."""
    session.to_model()
    out: list[Tensor] = []
    for name, layer in session.model.layers():
        out += _flax_to_torch(name, layer)
    return out


def _flax_load(session: Any, values: list[np.ndarray]) -> None:
    import jax.numpy as jnp
    from flax import nnx

    at = 0
    for _, layer in session.model.layers():
        if isinstance(layer, nnx.BatchNorm):
            variables: tuple[Any, ...] = (layer.scale, layer.bias, layer.mean, layer.var)
            for variable in variables:
                variable.value = jnp.asarray(values[at])
                at += 1
            continue
        w = values[at]
        w = w.T if isinstance(layer, nnx.Linear) else w.transpose(2, 3, 1, 0)
        layer.kernel.value = jnp.asarray(np.ascontiguousarray(w))
        at += 1
        if getattr(layer, "bias", None) is not None:
            layer.bias.value = jnp.asarray(values[at])
            at += 1
    session.from_model()


# -- Keras (JAX): the same Keras model, its weights held by the stateless step -------------
# (or, with model.source=flax, the zoo's Flax NNX model: the session says which, ``source``)


def _flax(session: Any) -> bool:
    return getattr(session, "source", "bench") == "flax"


def _jax_export(session: Any) -> list[Tensor]:
    if _flax(session):
        return _flax_export(session)
    session.to_model()
    return _keras_export(session)


def _jax_load(session: Any, values: list[np.ndarray]) -> None:
    if _flax(session):
        _flax_load(session, values)
        return
    _keras_load(session, values)
    session.from_model()


def _jax_dropout(session: Any) -> int:
    # The zoo's Flax models (lenet5, the ResNets) have no dropout.
    return 0 if _flax(session) else _keras_dropout(session)


# Each form by the name a framework's spec gives it.
FORMS = {
    "torch": Form(_torch_export, _torch_load, _torch_dropout),
    "keras": Form(_keras_export, _keras_load, _keras_dropout),
    "gluon": Form(_mxnet_export, _mxnet_load, _mxnet_dropout, _mxnet_settle),
    "keras_stateless": Form(_jax_export, _jax_load, _jax_dropout),
}
