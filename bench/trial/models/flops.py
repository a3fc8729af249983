"""Forward FLOPs per sample, counted by each framework on its own model.

Neither count needs the other framework (a TensorFlow-only container has no torch), and both
count the same thing: the multiply-accumulates of contractions, at 2 FLOPs each.

- PyTorch: ``torch.utils.flop_counter.FlopCounterMode`` over one eval-mode forward pass of a
  single sample (zeros; no gradient, nothing in the model changes).  It counts convolutions
  (grouped, depthwise and transposed included), matrix products (``mm``, ``addmm``, ``bmm``,
  and with them ``Linear`` and ``einsum``) and attention kernels.
- TensorFlow: the model's inference graph for one sample is traced (``tf.function``, nothing
  runs) and its contraction ops are counted from their static shapes: ``Conv2D``/``Conv3D``
  and ``DepthwiseConv2dNative`` (2 x output elements x kernel window x input channels per
  group), ``MatMul``/``BatchMatMul*`` (2 x output elements x inner dimension) and ``Einsum``
  (2 x output elements x the sizes of the summed indices; no summed index, no FLOPs).

- MXNet: the Gluon block is called on a symbol (nothing runs), the graph's shapes are
  inferred for one sample, and its ``Convolution`` (2 x output elements x the weight's
  in-channels-per-group x kernel window) and ``FullyConnected`` (2 x output elements x input
  features) nodes are counted, the same arithmetic as the other two.
- JAX (the Keras models on Keras' JAX backend, and the Flax NNX models): the inference
  forward of one sample is traced to a jaxpr (``jax.make_jaxpr``, nothing runs) and its
  ``conv_general_dilated`` (2 x output elements x the kernel's in-features per group x
  kernel window) and ``dot_general`` (2 x output elements x the contracted dimensions)
  equations are counted, nested jaxprs (``jit``, custom derivatives) included and a
  ``scan``'s body times its length.  XLA's own cost analysis is not used: it also counts
  element-wise work (activations, normalization, additions), which the zoo's count leaves
  out.  A jaxpr with a ``while`` or ``cond`` gets no count (None), as TF's control flow.

Not counted, in any of them: bias additions, normalization, activations, pooling, element-wise
products (squeeze-excitation gates, residual additions) and softmax -- a few percent of the
total for the vision models here.  A TensorFlow graph with control flow or function calls
(``tf.while_loop``, as in a Keras LSTM) gets no count (None): its loop bodies are out of
reach of a static count.  The one known difference between frameworks among
bench's models: Keras has no adaptive pooling, so VGG's (and LeNet's and AlexNet's at other
than their native 32x32 and 224x224) is a matrix product in TensorFlow and counted there --
under 0.1% more for VGG-16 and AlexNet, about 0.5% for LeNet-5.

Training FLOPs per sample are estimated as 3x the forward FLOPs (the backward pass costs about
twice the forward: gradients with respect to activations and to weights), the usual estimate;
it slightly overstates the first layer, whose input needs no gradient.
"""

from __future__ import annotations

import math
from typing import Any

TRAIN_FLOPS_PER_FORWARD = 3


def torch_forward_flops(model: Any, example: Any) -> int:
    """FLOPs of ``model(example)`` (PyTorch), evaluated in eval mode without gradients."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    # CPU attention runs as its own fused kernel, which the counter has no formula for: the
    # same count as the GPU kernels' (QK^T and the weighted sum, every position pair), as
    # TensorFlow's traced matmuls give it.
    cpu_attention = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _attention_flops}
    try:
        with (
            torch.no_grad(),
            FlopCounterMode(display=False, custom_mapping=cpu_attention) as counter,
        ):
            model(example)
    finally:
        model.train(was_training)
    return int(counter.get_total_flops())


def _attention_flops(
    query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any
) -> int:
    """FLOPs of one scaled-dot-product attention from its inputs' shapes."""
    from torch.utils.flop_counter import sdpa_flop_count

    return int(sdpa_flop_count(query, key, value))


def torch_flops_per_sample(model: Any, image_size: int) -> int:
    """Forward FLOPs of a PyTorch image model for one (3, image_size, image_size) sample."""
    import torch

    param = next((p for p in model.parameters() if p.is_floating_point()), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None else torch.float32
    example = torch.zeros((1, 3, image_size, image_size), device=device, dtype=dtype)
    return torch_forward_flops(model, example)


def _shape(tensor: Any) -> list[int]:
    dims = tensor.shape.as_list()
    if any(d is None for d in dims):
        raise ValueError(f"cannot count FLOPs of {tensor.name}: its shape {dims} is not static")
    return [int(d) for d in dims]


def _einsum_flops(op: Any) -> int:
    equation = op.get_attr("equation").decode().replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    operands = lhs.split(",")
    if len(operands) < 2:
        return 0
    letters = lhs.replace(",", "").replace(".", "")
    if not arrow:  # implicit output: the letters that appear once, in alphabetical order
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    sizes: dict[str, int] = {}
    for spec, tensor in zip(operands, op.inputs, strict=True):
        dims = _shape(tensor)
        head, _, tail = spec.partition("...")  # letters before and after an ellipsis
        named = list(zip(head, dims, strict=False))
        named += list(zip(tail, dims[len(dims) - len(tail) :], strict=True)) if tail else []
        for letter, dim in named:
            sizes[letter] = max(sizes.get(letter, 1), dim)
    summed = set(letters) - set(out)
    if not summed:
        return 0  # an element-wise or outer product, not a contraction
    return 2 * math.prod(_shape(op.outputs[0])) * math.prod(sizes[c] for c in summed)


def _op_flops(op: Any) -> int:
    kind = op.type
    if kind in ("Conv2D", "Conv3D"):
        # filter: (*window, in_channels / groups, out_channels)
        return 2 * math.prod(_shape(op.outputs[0])) * math.prod(_shape(op.inputs[1])[:-1])
    if kind == "DepthwiseConv2dNative":
        # filter: (kh, kw, in_channels, multiplier); one window per output element
        return 2 * math.prod(_shape(op.outputs[0])) * math.prod(_shape(op.inputs[1])[:2])
    if kind == "MatMul":
        a = _shape(op.inputs[0])
        inner = a[0] if op.get_attr("transpose_a") else a[1]
        return 2 * math.prod(_shape(op.outputs[0])) * inner
    if kind in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = _shape(op.inputs[0])
        inner = a[-2] if op.get_attr("adj_x") else a[-1]
        return 2 * math.prod(_shape(op.outputs[0])) * inner
    if kind == "Einsum":
        return _einsum_flops(op)
    return 0


# Ops whose work lives in other function bodies: a static count would miss it.
_OPAQUE = {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
           "PartitionedCall", "StatefulPartitionedCall"}  # fmt: skip


def keras_forward_flops(
    model: Any, sample_shape: tuple[int, ...] | None = None, dtype: Any = None
) -> int | None:
    """FLOPs of a Keras model (TensorFlow backend) on one sample.

    The sample's shape and dtype default to the model's first input's.  None when the graph
    has control flow or function calls (an LSTM's loop, say), whose work a static count of
    the traced graph cannot see.
    """
    import tensorflow as tf

    inputs = getattr(model, "inputs", None)
    if sample_shape is None:
        if not inputs:
            raise ValueError("the model has no symbolic inputs; pass sample_shape")
        sample_shape = tuple(int(d) for d in inputs[0].shape[1:])
    if dtype is None:
        dtype = inputs[0].dtype if inputs else "float32"
    spec = tf.TensorSpec((1, *sample_shape), tf.as_dtype(dtype))
    fn = tf.function(lambda x: model(x, training=False), autograph=False)
    ops = fn.get_concrete_function(spec).graph.get_operations()
    if any(op.type in _OPAQUE for op in ops):
        return None
    return sum(_op_flops(op) for op in ops)


def keras_flops_per_sample(model: Any, image_size: int) -> int | None:
    """Forward FLOPs of a Keras image model for one (image_size, image_size, 3) sample."""
    return keras_forward_flops(model, (image_size, image_size, 3), "float32")


def mxnet_flops_per_sample(model: Any, image_size: int) -> int:
    """Forward FLOPs of a Gluon HybridBlock for one (3, image_size, image_size) sample."""
    import json

    import mxnet as mx

    graph_out = model(mx.sym.var("data"))
    internals = graph_out.get_internals()
    _, out_shapes, _ = internals.infer_shape(data=(1, 3, image_size, image_size))
    shapes = dict(zip(internals.list_outputs(), out_shapes, strict=True))
    nodes = json.loads(graph_out.tojson())["nodes"]

    def shape_of(node: dict[str, Any]) -> tuple[int, ...]:
        name = node["name"]
        shape = shapes.get(name) or shapes.get(f"{name}_output") or ()
        return tuple(shape)

    total = 0
    for node in nodes:
        if node["op"] not in ("Convolution", "FullyConnected"):
            continue
        weight = shape_of(nodes[node["inputs"][1][0]])  # (out, in/groups, kh, kw) / (out, in)
        total += 2 * math.prod(shape_of(node)) * math.prod(weight[1:])
    return total


# jaxpr primitives whose work depends on values a static count cannot see.
_JAX_OPAQUE = {"while", "cond"}


def _jaxpr_flops(jaxpr: Any) -> int | None:
    """Contraction FLOPs of a (open) jaxpr and the jaxprs nested in its equations."""
    total = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _JAX_OPAQUE:
            return None
        if name == "conv_general_dilated":
            rhs = eqn.invars[1].aval.shape
            out_features = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
            # the kernel's in-features per group times its window, per output element
            per_output = math.prod(rhs) // out_features
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * per_output
            continue
        if name == "dot_general":
            (contracting, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            inner = math.prod(lhs[d] for d in contracting)
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * inner
            continue
        repeat = int(eqn.params["length"]) if name == "scan" else 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                inner_jaxpr = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr's own jaxpr
                if hasattr(inner_jaxpr, "eqns"):
                    count = _jaxpr_flops(inner_jaxpr)
                    if count is None:
                        return None
                    total += repeat * count
    return total


def jax_forward_flops(fn: Any, *args: Any) -> int | None:
    """FLOPs of the JAX function ``fn(*args)``, traced (not run) to a jaxpr; None where it
    has data-dependent control flow (``while``, ``cond``)."""
    import jax

    return _jaxpr_flops(jax.make_jaxpr(fn)(*args).jaxpr)


def flops_per_sample(framework: str, model: Any, image_size: int) -> int | None:
    """Forward FLOPs per sample of an image model built for ``framework``."""
    if framework == "torch":
        return torch_flops_per_sample(model, image_size)
    if framework == "mxnet":
        return mxnet_flops_per_sample(model, image_size)
    return keras_flops_per_sample(model, image_size)
