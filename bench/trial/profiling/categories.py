"""Operator names from either framework mapped to common categories, by one table.

The same work has different names in each framework (PyTorch's ``aten::mkldnn_convolution``
is TensorFlow's ``_MklNativeConv2D`` or ``Conv2D``; Keras on TensorFlow even splits batch
norm into ``Mean``, ``Rsqrt``, ``Mul``... inside a ``batch_normalization`` name scope), so a
category is decided from the operator's name and from its *scope*: for TensorFlow the op's
name path (``gradient_tape/model/batch_normalization_3/mul``), for PyTorch the chain of
profiler events around it (``autograd::engine::evaluate_function: ConvolutionBackward0/...``
or ``Optimizer.step#SGD.step``), for JAX the instruction's ``op_name`` (Keras' layer scopes)
and the Python functions it was traced in (``Conv/__call__``: Flax has no layer scopes).
The first rule whose pattern matches either wins; work
in the backward pass (a gradient op or scope) gets the category's backward variant.  What
matches no rule is ``other`` (``other backward`` in the backward pass).
"""

from __future__ import annotations

import re

from bench.core.metrics import OP_MS

# (category, pattern matched case-insensitively against the operator and its scope); order
# matters: the optimizer's own arithmetic (plain adds and muls) is known by its scope only.
RULES: tuple[tuple[str, str], ...] = (
    (
        "communication",
        r"nccl|gloo|c10d|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|collective"
        r"|(^|[^a-z])(send|recv)([^a-z]|$)",
    ),
    (
        "optimizer update",
        r"optimizer\.(step|zero_grad)|_foreach_|resourceapply|applygradient|fused_(sgd|adam)"
        r"|(^|/)(torch_)?(sgd|adam|adamw|loss_scale_optimizer)(_\d+)?(/|$)",
    ),
    ("convolution", r"conv(?!ert)"),
    ("batch norm", r"batch_?norm"),
    ("matmul", r"addmm|(^|[^a-z])b?mm([^a-z]|$|backward)|matmul|linear|gemm|einsum|dense"),
    ("loss", r"cross_?entropy|nll_?loss|log_?softmax|softmax"),
    (
        "activation",
        r"relu|re_lu|threshold|tanh|sigmoid|gelu|silu|swish|hardtanh|(^|[^a-z])s?elu|activation",
    ),
    ("pooling", r"pool|reduce[-_]window"),
    (
        "data copy",
        r"copy|memcpy|memset|^aten::to$|contiguous|transpose|permute|identity|(^|[^a-z])cast"
        r"|(^|[^a-z])pad|zero_padding|slice|tile|reshape|clone|concat|(^|::)cat$|reverse",
    ),
)
BACKWARD = r"backward|backprop|grad|gradient_tape"
# Categories that are split into forward and backward work.
SPLIT = ("convolution", "batch norm", "matmul", "loss", "activation", "pooling", "other")

CATEGORIES: tuple[str, ...] = tuple(
    name
    for category, _ in (*RULES, ("other", ""))
    for name in ((category, f"{category} backward") if category in SPLIT else (category,))
)

_COMPILED = tuple((category, re.compile(pattern, re.IGNORECASE)) for category, pattern in RULES)
_BACKWARD = re.compile(BACKWARD, re.IGNORECASE)


def categorize(operator: str, scope: str = "") -> str:
    """The common category of ``operator`` running inside ``scope``."""
    category = "other"
    for name, pattern in _COMPILED:
        if pattern.search(operator) or pattern.search(scope):
            category = name
            break
    if category in SPLIT and (_BACKWARD.search(operator) or _BACKWARD.search(scope)):
        return f"{category} backward"
    return category


def metric_name(category: str) -> str:
    """``op_<category>_ms``, e.g. ``op_convolution_backward_ms``."""
    return OP_MS.of(category.replace(" ", "_"))
