"""model.source=flax (issue 35): the zoo's Flax NNX models are the torch models layer for
layer: the same parameter count at any input size, the same outputs from the same weights
(carried in the canonical form of bench.trial.frameworks.weights), BatchNorm with PyTorch's
momentum, eps and train/eval behaviour.  Flax needs no Keras, so this runs in the test
process (beside Keras on TensorFlow's backend)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from bench.core.config import ModelConfig
from bench.trial.frameworks import weights
from bench.trial.models import MODELS, NATIVE_SOURCES, build, build_sequence, common, transformer

torch = pytest.importorskip("torch")
pytest.importorskip("flax")

from flax import nnx  # noqa: E402

FLAX = "flax"


def torch_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def abstract_flax(name: str, classes: int, size: int) -> Any:
    """The Flax model's shapes only (nnx.eval_shape: nothing drawn, milliseconds)."""
    return nnx.eval_shape(lambda: build("jax", name, classes, size, source=FLAX))


@pytest.mark.parametrize(
    ("name", "classes", "size"),
    [
        ("lenet5", 10, 32),
        ("lenet5", 10, 45),  # adaptive pooling to 5x5 above 32 px
        ("lenet5", 7, 128),
        ("resnet18", 10, 32),
        pytest.param("resnet18", 1000, 224, marks=pytest.mark.slow),
        pytest.param("resnet50", 10, 32, marks=pytest.mark.slow),
        pytest.param("resnet50", 1000, 224, marks=pytest.mark.slow),
        ("resnet50", 100, 97),
    ],
)
def test_flax_parameter_counts_are_torchs_at_any_input(name: str, classes: int, size: int) -> None:
    flax_model = abstract_flax(name, classes, size)
    torch_model = build("torch", name, classes, size)
    assert common.flax_params(flax_model) == torch_params(torch_model)
    spec = MODELS[name]
    if (classes, size) == (spec.reference_num_classes, spec.reference_image_size):
        assert common.flax_params(flax_model) == spec.reference_params
    # The canonical form lists the same tensors, in torch's order and shapes.
    ours = [(t.kind, t.value.shape) for t in _canonical(flax_model)]
    theirs = [(t.kind, t.value.shape) for t in weights.torch_model_weights(torch_model)]
    assert ours == theirs


def _canonical(model: Any) -> list[weights.Tensor]:
    """The canonical form's tensors of an NNX model, shapes only where it is abstract."""
    out = []
    for name, layer in model.layers():
        if isinstance(layer, nnx.BatchNorm):
            for n, kind, v in (("weight", weights.PARAM, layer.scale),
                               ("bias", weights.PARAM, layer.bias),
                               ("running_mean", weights.BUFFER, layer.mean),
                               ("running_var", weights.BUFFER, layer.var)):  # fmt: skip
                out.append(weights.Tensor(f"{name}.{n}", kind, np.empty(v.shape, np.float32)))
            continue
        shape = layer.kernel.shape
        shape = shape[::-1] if len(shape) == 2 else (shape[3], shape[2], shape[0], shape[1])
        out.append(weights.Tensor(f"{name}.weight", weights.PARAM, np.empty(shape, np.float32)))
        if layer.bias is not None:
            out.append(weights.Tensor(f"{name}.bias", weights.PARAM, np.empty(layer.bias.shape)))
    return out


class _Session:
    """What the canonical form's Flax functions use of a jax session."""

    source = FLAX

    def __init__(self, model: Any) -> None:
        self.model = model

    def to_model(self) -> None:
        pass

    def from_model(self) -> None:
        pass


def _same_start(name: str, size: int, seed: int = 0) -> tuple[Any, Any]:
    torch.manual_seed(seed)
    torch_model = build("torch", name, 10, size)
    flax_model = build("jax", name, 10, size, source=FLAX, seed=seed)
    session = _Session(flax_model)
    weights.load("jax", session, weights.torch_model_weights(torch_model))
    return torch_model, flax_model


def _outputs(torch_model: Any, flax_model: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(x)).numpy()
    got = np.asarray(flax_model(x.transpose(0, 2, 3, 1)))  # NHWC, the TF side's bytes
    return expected, got


@pytest.mark.parametrize(
    ("name", "size"),
    [("lenet5", 32), ("lenet5", 40), pytest.param("resnet18", 32, marks=pytest.mark.slow)],
)
@pytest.mark.slow
def test_same_weights_give_the_same_outputs_in_eval_and_train(name: str, size: int) -> None:
    torch_model, flax_model = _same_start(name, size)
    x = np.random.default_rng(1).standard_normal((6, 3, size, size)).astype(np.float32)
    torch_model.eval()
    flax_model.eval()
    expected, got = _outputs(torch_model, flax_model, x)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    torch_model.train()  # BatchNorm on the batch's statistics, running ones updated
    flax_model.train()
    expected, got = _outputs(torch_model, flax_model, x)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    ours = weights._flax_export(_Session(flax_model))
    theirs = weights.torch_model_weights(torch_model)
    for a, b in zip(ours, theirs, strict=True):
        if b.name.endswith("running_var"):  # PyTorch's takes the unbiased batch variance
            continue
        np.testing.assert_allclose(a.value, b.value, rtol=1e-4, atol=1e-5, err_msg=b.name)


@pytest.mark.slow
def test_batchnorm_is_torchs_momentum_and_eps() -> None:
    """One training-mode forward moves the running mean by PyTorch's 0.1 of the batch mean,
    the running variance by 0.1 of the (biased) batch variance; eps 1e-5."""
    flax_model = build("jax", "resnet18", 10, 32, source=FLAX)
    bn = flax_model.bn1
    assert bn.momentum == pytest.approx(0.9) and bn.epsilon == pytest.approx(1e-5)
    x = np.random.default_rng(2).standard_normal((4, 32, 32, 3)).astype(np.float32)
    flax_model.train()
    conv = np.asarray(flax_model.conv1(x))
    flax_model(x)
    np.testing.assert_allclose(bn.mean[...], 0.1 * conv.mean(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
    expected_var = 0.9 + 0.1 * conv.var(axis=(0, 1, 2))
    np.testing.assert_allclose(bn.var[...], expected_var, rtol=1e-4)
    before = np.asarray(bn.mean[...]).copy()
    flax_model.eval()  # inference reads the running statistics and leaves them
    flax_model(x)
    np.testing.assert_array_equal(bn.mean[...], before)


def test_flax_builds_the_models_it_lists() -> None:
    framework, _ = NATIVE_SOURCES[FLAX]
    built = sorted(n for n, spec in MODELS.items() if spec.has_builder(framework, FLAX))
    assert built == ["bert_base", "lenet5", "resnet152", "resnet18", "resnet50", "transformer"]
    from bench.trial.models import native_problem

    assert native_problem("jax", "resnet18", FLAX) == ""
    refused = native_problem("torch", "lenet5", FLAX)
    assert refused.startswith("model.source: flax builds its models for framework=jax only")
    missing = native_problem("jax", "vgg16", FLAX)
    assert "flax has no vgg16" in missing and "resnet50, lenet5, resnet18, resnet152" in missing
    assert "flax has no lstm" in native_problem("jax", "lstm", FLAX)


# The transformer (model.source=flax): built from the sizes in ModelConfig, like torch's.
TRANSFORMER_SIZES = [
    {"seq_len": 12, "vocab_size": 40, "layers": 2, "hidden": 32, "heads": 4,
     "intermediate": 48, "max_positions": 16},
    {"seq_len": 7, "vocab_size": 2, "layers": 1, "hidden": 6, "heads": 3,
     "intermediate": 1, "max_positions": 7},
    {"seq_len": 128, "vocab_size": 30522, "layers": 4, "hidden": 256, "heads": 4,
     "intermediate": 1024, "max_positions": 512},
]  # fmt: skip


def flax_transformer(model: ModelConfig, seed: int = 0) -> Any:
    return build_sequence("jax", dataclasses.replace(model, source=FLAX), seed=seed)


@pytest.mark.parametrize("sizes", TRANSFORMER_SIZES, ids=["tiny", "smallest", "mini"])
def test_flax_transformer_parameter_counts_are_torchs_at_any_size(sizes: dict) -> None:
    m = ModelConfig("transformer", **sizes)
    flax_model = nnx.eval_shape(lambda: flax_transformer(m))
    expected = transformer.param_count(
        m.vocab_size, m.hidden, m.layers, m.intermediate, m.max_positions
    )
    assert common.flax_params(flax_model) == torch_params(transformer.build_torch(m)) == expected
    # The same tensors under torch's names (a Linear's kernel: torch's weight, transposed).
    state = nnx.state(flax_model, nnx.Param).flat_state()
    ours = {_torch_name(path): tuple(v.shape) for path, v in state}
    theirs = {}
    for name, module in transformer.build_torch(m).named_modules():
        for leaf, p in module.named_parameters(prefix=name, recurse=False):
            linear = isinstance(module, torch.nn.Linear) and leaf.endswith("weight")
            theirs[leaf] = tuple(p.shape)[::-1] if linear else tuple(p.shape)
    assert ours == theirs


def test_flax_bert_base_has_the_published_size() -> None:
    m = ModelConfig("bert_base", seq_len=8, **transformer.BERT_BASE)
    flax_model = nnx.eval_shape(lambda: flax_transformer(m))
    assert common.flax_params(flax_model) == transformer.BERT_BASE_PARAMS == 109_514_298


def _torch_name(path: tuple) -> str:
    """torch's parameter name of an NNX state path (kernel/scale/embedding: weight)."""
    renamed = {"kernel": "weight", "scale": "weight", "embedding": "weight"}
    return ".".join(renamed.get(str(p), str(p)) for p in path)


def _load_torch_transformer(torch_model: Any, flax_model: Any) -> None:
    """torch's weights into the Flax model, tensor by tensor under the same names."""
    for name, param in torch_model.named_parameters():
        value = param.detach().numpy()
        *parents, leaf = name.split(".")
        target = flax_model
        for part in parents:
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        if isinstance(target, nnx.Linear):
            variable = target.kernel if leaf == "weight" else target.bias
            value = value.T if leaf == "weight" else value
        elif isinstance(target, nnx.Embed):
            variable = target.embedding
        elif isinstance(target, nnx.LayerNorm):
            variable = target.scale if leaf == "weight" else target.bias
        else:
            variable = getattr(target, leaf)  # decoder_bias
        assert variable.shape == value.shape, name
        variable[...] = value


@pytest.mark.slow
def test_flax_transformer_computes_what_torch_computes_with_the_same_weights() -> None:
    """Eval mode (no dropout): the same logits; train mode draws dropout masks, each call
    its own (the RNG state advances)."""
    m = ModelConfig("transformer", **TRANSFORMER_SIZES[0])
    torch.manual_seed(0)
    torch_model = transformer.build_torch(m).eval()
    flax_model = flax_transformer(m)
    _load_torch_transformer(torch_model, flax_model)
    tokens = np.random.default_rng(7).integers(0, m.vocab_size, size=(3, m.seq_len))
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(tokens)).numpy()
    flax_model.eval()
    got = np.asarray(flax_model(tokens))
    assert got.shape == (3, m.seq_len, m.vocab_size)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    flax_model.train()
    first, second = np.asarray(flax_model(tokens)), np.asarray(flax_model(tokens))
    assert not np.allclose(first, second) and not np.allclose(first, expected)
