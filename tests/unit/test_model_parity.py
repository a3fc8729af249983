"""Parity checks between the PyTorch and Keras builds of VGG-16 and ResNet-50."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from bench.trial.models import resnet, vgg  # framework-free at import time

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")

MODELS: dict[str, ModuleType] = {"vgg16": vgg, "resnet50": resnet}
REFERENCE_PARAMS = {"vgg16": 138_357_544, "resnet50": 25_557_032}  # torchvision, 224 / 1000


def torch_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def keras_params(model: keras.Model) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


# VGG-16 (138 M parameters at 224 px, 4-5 s on 2 cores) in the slow tier, ResNet-50 in both.
@pytest.mark.parametrize("name", [pytest.param("vgg16", marks=pytest.mark.slow), "resnet50"])
def test_param_counts_match_at_32_and_the_forward_is_finite(name: str) -> None:
    """One build of each side (VGG-16's 138 M weights take seconds to initialise) for both."""
    mod = MODELS[name]
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    model = mod.build_torch(10, 32).eval()
    n_torch = torch_params(model)
    with torch.no_grad():
        out_torch = model(torch.from_numpy(x)).numpy()
    keras.backend.clear_session()
    keras_model = mod.build_keras(10, 32)
    assert keras_params(keras_model) == n_torch
    out_keras = np.asarray(keras_model(x.transpose(0, 2, 3, 1), training=False))
    for out in (out_torch, out_keras):
        assert out.shape == (2, 10)
        assert np.isfinite(out).all()


@pytest.mark.slow  # both sides at 224 px and 1000 classes: 3-6 s a model
@pytest.mark.parametrize("name", MODELS)
def test_param_counts_match_reference_at_224(name: str) -> None:
    mod = MODELS[name]
    assert torch_params(mod.build_torch(1000, 224)) == REFERENCE_PARAMS[name]
    keras.backend.clear_session()
    assert keras_params(mod.build_keras(1000, 224)) == REFERENCE_PARAMS[name]


@pytest.mark.parametrize("size", [(1, 1), (5, 5), (7, 7), (14, 14), (9, 9), (9, 14)])
def test_keras_adaptive_pool_matches_torch(size: tuple[int, int]) -> None:
    x = np.random.default_rng(1).standard_normal((2, 4, *size)).astype(np.float32)
    expected = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(x), 7).numpy()
    got = np.asarray(vgg._keras_adaptive_avg_pool2d(7)(x.transpose(0, 2, 3, 1)))
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), expected, rtol=0, atol=1e-5)
