"""Operator categories (one table for both frameworks), the operator table, and self time
read from a TensorFlow profile."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bench.trial.profiling import operators
from bench.trial.profiling.categories import CATEGORIES, categorize, metric_name

# (operator, scope, category): names as the profilers report them for ResNet training steps.
SEEN = [
    # PyTorch: scope is the chain of profiler events around the operator.
    (
        "aten::mkldnn_convolution",
        "aten::conv2d/aten::convolution/aten::_convolution",
        "convolution",
    ),
    (
        "aten::convolution_backward",
        "autograd::engine::evaluate_function: ConvolutionBackward0/ConvolutionBackward0",
        "convolution backward",
    ),
    ("aten::native_batch_norm", "aten::batch_norm/aten::_batch_norm_impl_index", "batch norm"),
    (
        "aten::native_batch_norm_backward",
        "autograd::engine::evaluate_function: NativeBatchNormBackward0",
        "batch norm backward",
    ),
    ("aten::add_", "Optimizer.step#SGD.step", "optimizer update"),
    ("aten::mul_", "Optimizer.step#SGD.step", "optimizer update"),
    ("aten::add_", "", "other"),  # the residual connection
    ("aten::clamp_min_", "aten::relu_", "activation"),
    (
        "aten::threshold_backward",
        "autograd::engine::evaluate_function: ReluBackward0",
        "activation backward",
    ),
    ("aten::max_pool2d_with_indices", "aten::max_pool2d", "pooling"),
    ("aten::addmm", "aten::linear", "matmul"),
    (
        "aten::mm",
        "autograd::engine::evaluate_function: AddmmBackward0/AddmmBackward0",
        "matmul backward",
    ),
    ("aten::_log_softmax", "aten::cross_entropy_loss/aten::log_softmax", "loss"),
    (
        "aten::nll_loss_backward",
        "autograd::engine::evaluate_function: NllLossBackward0",
        "loss backward",
    ),
    ("aten::copy_", "aten::to/aten::_to_copy", "data copy"),
    ("nccl:all_reduce", "", "communication"),
    # TensorFlow: operator is the op type, scope its name.
    ("_MklNativeConv2D", "resnet50_1/conv2d_48_1/convolution", "convolution"),
    (
        "Conv2DBackpropFilter",
        "gradient_tape/model/conv2d_3/Conv2D/Conv2DBackpropFilter",
        "convolution backward",
    ),
    ("FusedBatchNormV3", "model/batch_normalization_1/FusedBatchNormV3", "batch norm"),
    ("Mul", "resnet50_1/batch_normalization_24_1/batchnorm/mul", "batch norm"),  # Keras 3 unfused
    (
        "RsqrtGrad",
        "gradient_tape/resnet50_1/batch_normalization_2_1/batchnorm/Rsqrt/RsqrtGrad",
        "batch norm backward",
    ),
    ("Mul", "sgd_1/Mul_92", "optimizer update"),
    ("AssignSubVariableOp", "sgd_1/AssignSubVariableOp_15", "optimizer update"),
    ("ResourceApplyKerasMomentum", "SGD/update/ResourceApplyKerasMomentum", "optimizer update"),
    ("Relu", "resnet50_1/re_lu_16_1/Relu", "activation"),
    ("ReluGrad", "gradient_tape/resnet50_1/re_lu_2_1/ReluGrad", "activation backward"),
    ("_MklMatMul", "gradient_tape/resnet50_1/dense_1/MatMul/MatMul_1", "matmul backward"),
    (
        "SparseSoftmaxCrossEntropyWithLogits",
        "sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits",
        "loss",
    ),
    (
        "_MklNativeMaxPoolGrad",
        "gradient_tape/resnet50_1/max_pooling2d_1/MaxPool/MaxPoolGrad",
        "pooling backward",
    ),
    ("Mean", "resnet50_1/global_average_pooling2d_1/Mean", "pooling"),
    ("Pad", "resnet50_1/zero_padding2d_1/Pad", "data copy"),
    ("AddV2", "resnet50_1/add_3_1/Add", "other"),
    ("NcclAllReduce", "", "communication"),
    # JAX (bench.trial.profiling.jax_profiler): operator is the primitive (or XLA's opcode where
    # an instruction has no metadata), scope the op_name's layer scopes and the functions
    # it was traced in, "backward/" where JAX transposed it.
    ("conv_general_dilated", "train_step/conv2d/conv_general_dilated", "convolution"),
    (
        "conv_general_dilated",
        "backward/train_step/conv_general_dilated/Conv/__call__/build_flax/Block/__call__",
        "convolution backward",
    ),
    (
        "sub",
        "train_step/sub/_normalize/BatchNorm/__call__/build_flax/Block/__call__",
        "batch norm",
    ),
    ("sub", "train_step/sub/adam/update/move/adam/update", "optimizer update"),
    # bench's Keras optimizers with PyTorch's arithmetic (keras_optim): their own scope
    (
        "add",
        "train_step/torch_adam/add/Variable/assign_add/_backend_apply_gradients",
        "optimizer update",
    ),  # fmt: skip
    ("dot_general", "backward/train_step/dense/dot_general", "matmul backward"),
    ("dot_general", "train_step/dot_general/Linear/__call__", "matmul"),
    ("max", "train_step/relu/max/build_flax/Block/__call__", "activation"),
    ("reduce-window", "", "pooling"),  # XLA's instruction, no metadata left
    ("reverse", "", "data copy"),  # a kernel flipped for a convolution's backward
]


@pytest.mark.parametrize(("operator", "scope", "category"), SEEN)
def test_operators_map_to_common_categories(operator: str, scope: str, category: str) -> None:
    assert categorize(operator, scope) == category


def test_every_category_has_a_metric_name() -> None:
    assert "convolution backward" in CATEGORIES and "optimizer update" in CATEGORIES
    assert metric_name("convolution backward") == "op_convolution_backward_ms"
    assert len({metric_name(c) for c in CATEGORIES}) == len(CATEGORIES)


def test_operator_table_sums_per_operator_and_category(tmp_path: Path) -> None:
    times = [
        operators.OpTime("aten::add_", "Optimizer.step#SGD.step", 161, 4000.0),
        operators.OpTime("aten::add_", "", 16, 1000.0),
        operators.OpTime("aten::mkldnn_convolution", "aten::conv2d", 53, 30000.0),
        operators.OpTime("aten::mkldnn_convolution", "aten::conv2d", 53, 30000.0),
    ]
    rows = operators.table(times)
    assert [(r.operator, r.category, r.calls) for r in rows] == [
        ("aten::mkldnn_convolution", "convolution", 106),
        ("aten::add_", "optimizer update", 161),
        ("aten::add_", "other", 16),
    ]
    steps = 2
    assert operators.metrics(rows, steps) == {
        "op_convolution_ms": 30.0,
        "op_optimizer_update_ms": 2.0,
        "op_other_ms": 0.5,
        "op_total_ms": 32.5,
    }
    files = operators.write(rows, steps, tmp_path, "cpu", "Self time is CPU time.")
    with open(tmp_path / files[0]) as f:
        written = list(csv.DictReader(f))
    assert [r["operator"] for r in written] == [r.operator for r in rows]
    assert written[0]["self_ms_per_step"] == "30.000"
    table = (tmp_path / files[1]).read_text()
    assert "| 1 | `aten::mkldnn_convolution` | convolution | 106 | 30.000 | 92.3 |" in table


def test_tensorflow_self_time_excludes_nested_ops(tmp_path: Path) -> None:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from bench.trial.profiling.tf_profiler import read_xspace

    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    names = {
        1: ("model/conv/Conv2D:Conv2D", "Conv2D"),
        2: ("call:PartitionedCall", "PartitionedCall"),
    }
    names[3] = ("ExecutorState::Process", "")  # not an op
    for key, (name, display) in names.items():
        plane.event_metadata[key].id = key
        plane.event_metadata[key].name = name
        plane.event_metadata[key].display_name = display
    line = plane.lines.add(name="tf_Compute/1")
    ms = 10**9  # picoseconds
    # A 10 ms executor region holding a 6 ms call that holds a 4 ms convolution, then
    # another 2 ms convolution directly in the region.
    for key, start, duration in ((3, 0, 10), (2, 1, 6), (1, 2, 4), (1, 8, 2)):
        line.events.add(metadata_id=key, offset_ps=start * ms, duration_ps=duration * ms)
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    ops, timeline = read_xspace(path)
    assert timeline == "host"
    got = sorted((op.operator, op.scope, op.self_us) for op in ops)
    assert got == [
        ("Conv2D", "model/conv/Conv2D", 2000.0),
        ("Conv2D", "model/conv/Conv2D", 4000.0),
        ("PartitionedCall", "call", 2000.0),
    ]


def test_tensorflow_gpu_time_is_kernel_time_on_the_streams(tmp_path: Path) -> None:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from bench.trial.profiling.tf_profiler import read_xspace

    space = xplane_pb2.XSpace()
    space.planes.add(name="/host:CPU")
    gpu = space.planes.add(name="/device:GPU:0")
    gpu.stat_metadata[1].id, gpu.stat_metadata[1].name = 1, "tf_op"
    for key, name in ((1, "void implicit_convolve_sgemm<float>"), (2, "MemcpyHtoD")):
        gpu.event_metadata[key].id, gpu.event_metadata[key].name = key, name
    stream = gpu.lines.add(name="Stream #13(Compute)")
    kernel = stream.events.add(metadata_id=1, offset_ps=0, duration_ps=3 * 10**9)
    kernel.stats.add(metadata_id=1, str_value="model/conv/Conv2D:Conv2D")
    stream.events.add(metadata_id=2, offset_ps=4 * 10**9, duration_ps=10**9)
    derived = gpu.lines.add(name="TensorFlow Ops")  # repeats the streams' time
    derived.events.add(metadata_id=1, offset_ps=0, duration_ps=3 * 10**9)
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    ops, timeline = read_xspace(path)
    assert timeline == "device"
    rows = operators.table(ops)
    assert [(r.operator, r.category, r.self_ms) for r in rows] == [
        ("Conv2D", "convolution", 3.0),
        ("MemcpyHtoD", "data copy", 1.0),
    ]
