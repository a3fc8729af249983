"""The image-model zoo: every registered image model is the same architecture in PyTorch and
Keras (same parameter count, and the same outputs once given the same weights), has
torchvision's parameter count, and both frameworks count the same FLOPs.

Models are built once per framework at their smallest supported input with 10 classes (small
and quick; parameter counts do not depend on the input size, see each module's docstring).
The reference count at 1000 classes is checked on a real PyTorch build (PyTorch builds cost
the same at any size) and, for Keras, from the 10-class build plus the head's difference.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from bench.checks.preflight import validate
from bench.cli import models as inventory
from bench.core.config import BenchConfig, ConfigError
from bench.trial.frameworks.weights import keras_order
from bench.trial.models import MODELS, build, common, flops, stock

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")
nn = torch.nn

IMAGE_MODELS = [name for name, spec in MODELS.items() if spec.task == "image"]
CLASSES = 10
# torchvision's forward multiply-adds at 224x224 ("GFLOPS" in its model docs), counted
# independently of bench; bench counts 2 FLOPs per multiply-add.
TORCHVISION_GMACS = {"alexnet": 0.714, "resnet18": 1.814, "mobilenet_v2": 0.301}


def torch_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def keras_params(model: Any) -> int:
    return sum(math.prod(w.shape) for w in model.trainable_weights)


@pytest.fixture(scope="module", params=IMAGE_MODELS)
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Any]]:
    """(name, torch model, keras model) at the model's smallest input, 10 classes."""
    name = request.param
    size = MODELS[name].min_image_size
    torch.manual_seed(0)
    keras.utils.set_random_seed(0)
    keras.backend.clear_session()
    yield name, build("torch", name, CLASSES, size).eval(), build("tf", name, CLASSES, size)
    keras.backend.clear_session()


def last_linear_in_features(model: Any) -> int:
    if isinstance(model, nn.Module):
        return [m for m in model.modules() if isinstance(m, nn.Linear)][-1].in_features
    return int([layer for layer in model.layers if isinstance(layer, keras.layers.Dense)][-1]
               .kernel.shape[0])  # fmt: skip


@pytest.mark.slow
def test_parameter_counts_are_equal_and_torchvisions(pair: tuple[str, Any, Any]) -> None:
    name, torch_model, keras_model = pair
    spec = MODELS[name]
    assert keras_params(keras_model) == torch_params(torch_model)
    # Only the linear head depends on the number of classes (and nothing on the input size).
    for model, params in ((torch_model, torch_params), (keras_model, keras_params)):
        head = (last_linear_in_features(model) + 1) * (spec.reference_num_classes - CLASSES)
        assert params(model) + head == spec.reference_params


@pytest.mark.parametrize("name", ["lenet5", "resnet18", "mobilenet_v2", "inception_v3"])
def test_reference_counts_of_real_builds_at_the_reference_input(name: str) -> None:
    spec = MODELS[name]
    size, classes = spec.reference_image_size, spec.reference_num_classes
    assert torch_params(build("torch", name, classes, size)) == spec.reference_params


def copy_torch_weights_to_keras(torch_model: Any, keras_model: Any) -> None:
    """Give the Keras model the PyTorch model's weights and (randomized) BN statistics."""
    rng = np.random.default_rng(0)
    weighted = (nn.Conv2d, nn.BatchNorm2d, nn.Linear)
    sources = [m for m in torch_model.modules() if isinstance(m, weighted)]
    kinds = (keras.layers.Conv2D, keras.layers.DepthwiseConv2D, keras.layers.Dense,
             keras.layers.BatchNormalization)  # fmt: skip
    targets = [layer for layer in keras_order(keras_model) if isinstance(layer, kinds)]
    assert len(sources) == len(targets)
    for src, dst in zip(sources, targets, strict=True):
        if isinstance(src, nn.BatchNorm2d):
            assert isinstance(dst, keras.layers.BatchNormalization)
            assert (src.eps, src.momentum) == pytest.approx((dst.epsilon, 1 - dst.momentum))
            n = src.num_features
            values = [rng.uniform(0.5, 1.5, n), rng.normal(0, 0.1, n), rng.normal(0, 0.1, n),
                      rng.uniform(0.5, 1.5, n)]  # fmt: skip
            with torch.no_grad():
                for tensor, value in zip(
                    (src.weight, src.bias, src.running_mean, src.running_var), values, strict=True
                ):
                    tensor.copy_(torch.from_numpy(value.astype(np.float32)))
            dst.set_weights([v.astype(np.float32) for v in values])
            continue
        w = src.weight.detach().numpy()
        if isinstance(src, nn.Linear):
            w = w.T
        elif isinstance(dst, keras.layers.DepthwiseConv2D):
            w = w.transpose(2, 3, 0, 1)  # (C, 1, kh, kw) -> (kh, kw, C, 1)
        else:
            w = w.transpose(2, 3, 1, 0)  # (out, in, kh, kw) -> (kh, kw, in, out)
        values = [w] + ([src.bias.detach().numpy()] if src.bias is not None else [])
        assert [v.shape for v in values] == [tuple(x.shape) for x in dst.get_weights()], dst.name
        dst.set_weights(values)


@pytest.mark.slow
def test_same_weights_give_the_same_outputs(pair: tuple[str, Any, Any]) -> None:
    """Architecture identity: padding, pooling, flatten order, block wiring, BN settings."""
    name, torch_model, keras_model = pair
    copy_torch_weights_to_keras(torch_model, keras_model)
    size = MODELS[name].min_image_size
    x = np.random.default_rng(1).standard_normal((2, 3, size, size)).astype(np.float32)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(x)).numpy()
    got = np.asarray(keras_model(x.transpose(0, 2, 3, 1), training=False))
    assert got.shape == expected.shape == (2, CLASSES)
    assert np.isfinite(expected).all()
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * scale)


@pytest.mark.slow
def test_both_frameworks_count_the_same_flops(pair: tuple[str, Any, Any]) -> None:
    name, torch_model, keras_model = pair
    size = MODELS[name].min_image_size
    counted_torch = flops.torch_flops_per_sample(torch_model, size)
    counted_keras = flops.keras_flops_per_sample(keras_model, size)
    assert counted_keras is not None and counted_torch > 0
    # Equal, but for Keras' adaptive pooling (an einsum, counted) at non-native sizes.
    assert counted_keras == pytest.approx(counted_torch, rel=1e-3)
    assert torch_model.training is False  # counting left the model as it was


def test_flops_of_lenet_by_hand() -> None:
    # Multiply-adds at 32x32, 10 classes: conv1 28*28*6 outputs x 5*5*3, conv2 10*10*16 x
    # 5*5*6, then 400*120 + 120*84 + 84*10; 2 FLOPs each.
    macs = 28 * 28 * 6 * 75 + 10 * 10 * 16 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert flops.torch_flops_per_sample(build("torch", "lenet5", 10, 32), 32) == 2 * macs
    assert flops.keras_flops_per_sample(build("tf", "lenet5", 10, 32), 32) == 2 * macs


@pytest.mark.parametrize("name", list(TORCHVISION_GMACS))
def test_flops_match_torchvisions_published_figures(name: str) -> None:
    size = MODELS[name].reference_image_size
    counted = flops.torch_flops_per_sample(build("torch", name, 1000, size), size)
    assert counted / 2e9 == pytest.approx(TORCHVISION_GMACS[name], abs=0.001)


def test_a_graph_with_control_flow_is_not_counted() -> None:
    inputs = keras.Input((6,), dtype="int32")
    x = keras.layers.LSTM(8)(keras.layers.Embedding(20, 4)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    assert flops.keras_forward_flops(model) is None


def test_einsum_flops_count_the_summed_indices() -> None:
    import tensorflow as tf

    def count(equation: str, *shapes: tuple[int, ...]) -> int:
        fn = tf.function(lambda *xs: tf.einsum(equation, *xs), autograph=False)
        graph = fn.get_concrete_function(*(tf.TensorSpec(s) for s in shapes)).graph
        return sum(flops._op_flops(op) for op in graph.get_operations())

    assert count("bij,bjk->bik", (2, 3, 4), (2, 4, 5)) == 2 * 2 * 3 * 5 * 4
    assert count("...ij,jk->...ik", (2, 3, 4), (4, 5)) == 2 * 2 * 3 * 5 * 4
    assert count("ij,ij->ij", (3, 4), (3, 4)) == 0  # element-wise: not a contraction


@pytest.mark.parametrize(("name", "too_small"), [("alexnet", 62), ("inception_v3", 74)])
def test_below_the_minimum_size_both_builders_refuse(name: str, too_small: int) -> None:
    assert MODELS[name].min_image_size == too_small + 1
    for framework in ("torch", "tf"):
        with pytest.raises(ValueError, match=f"needs image_size >= {too_small + 1}"):
            build(framework, name, CLASSES, too_small)


def test_stochastic_depth_drops_whole_samples_in_training_only() -> None:
    x = np.ones((4000, 2, 2, 3), dtype=np.float32)
    torch_layer = common.torch_stochastic_depth(0.25)
    keras_layer = common.keras_stochastic_depth(0.25, seed=0)
    outputs = [torch_layer(torch.from_numpy(x)).numpy(), np.asarray(keras_layer(x, training=True))]
    for out in outputs:
        per_sample = out.reshape(len(x), -1)
        np.testing.assert_allclose(np.unique(per_sample), [0.0, 1 / 0.75], rtol=1e-6)
        assert (per_sample == per_sample[:, :1]).all()  # all of a sample or nothing
        assert (per_sample[:, 0] == 0).mean() == pytest.approx(0.25, abs=0.03)
    torch_layer.eval()
    np.testing.assert_array_equal(torch_layer(torch.from_numpy(x)).numpy(), x)
    np.testing.assert_array_equal(np.asarray(keras_layer(x, training=False)), x)


def stock_config(framework: str, model: str, source: str = "stock") -> BenchConfig:
    cfg = BenchConfig(image_size=MODELS[model].min_image_size)
    cfg.framework.name, cfg.model.name, cfg.model.source = framework, model, source
    return cfg


@pytest.mark.parametrize(
    ("framework", "model"),
    [("tf", "lenet5"), ("tf", "alexnet"), ("tf", "resnet18"), ("torch", "lenet5")],
)
def test_stock_without_a_library_model_is_refused_up_front(framework: str, model: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(stock_config(framework, model))
    (problem,) = err.value.problems
    assert problem.startswith("model.source:") and model in problem


def test_model_source_must_be_one_bench_knows() -> None:
    """bench, stock, flax (framework=jax's Flax models), or those of docs/your-model.md
    (py, keras, torchvision, timm)."""
    with pytest.raises(ConfigError, match="model.source: 'onnx' is not allowed; choose one of "
                       "bench, stock, flax, py, keras, torchvision, timm"):  # fmt: skip
        validate(stock_config("torch", "resnet50", source="onnx"))
    validate(stock_config("tf", "resnet50"))
    validate(stock_config("torch", "alexnet"))


def test_stock_keras_model_is_keras_applications() -> None:
    keras.backend.clear_session()
    model = build("tf", "mobilenet_v2", CLASSES, 32, source="stock")
    assert model.name.startswith("mobilenet")
    out = np.asarray(model(np.zeros((2, 32, 32, 3), np.float32), training=False))
    assert out.shape == (2, CLASSES)
    assert keras_params(model) > 0
    assert flops.keras_flops_per_sample(model, 32) == flops.keras_flops_per_sample(
        build("tf", "mobilenet_v2", CLASSES, 32), 32
    )


@pytest.mark.skipif(stock.torchvision_available(), reason="torchvision is installed")
def test_stock_torch_without_torchvision_says_so() -> None:
    with pytest.raises(RuntimeError, match="model.source=stock for torch needs torchvision"):
        build("torch", "resnet50", CLASSES, 32, source="stock")


@pytest.mark.slow
def test_inventory_lists_counts_and_flops(capsys: pytest.CaptureFixture[str]) -> None:
    assert inventory.main(["--model", "lenet5", "alexnet", "--num-classes", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[:4] for line in lines] == [
        ["lenet5", "torch", "bench", "32x32"], ["lenet5", "tf", "bench", "32x32"],
        ["alexnet", "torch", "bench", "224x224"], ["alexnet", "tf", "bench", "224x224"],
    ]  # fmt: skip
    lenet_torch, lenet_tf, alexnet_torch, alexnet_tf = lines
    assert "62,006 = reference" in lenet_torch and "62,006 = reference" in lenet_tf
    assert "0.001303 GFLOPs" in lenet_torch and "0.001303 GFLOPs" in lenet_tf
    for line in (alexnet_torch, alexnet_tf):  # 10 classes: no reference count to compare
        assert " 57,044,810 " in line and "reference" not in line and " 1.42 GFLOPs" in line


def test_inventory_says_what_it_cannot_build(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "alexnet", "--source", "stock", "--image-size", "32"]
    assert inventory.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("needs image size >= 63") == 2
    assert inventory.main(["--model", "alexnet", "--source", "stock", "--framework", "tf"]) == 0
    assert "no stock version (keras.applications has none)" in capsys.readouterr().out
