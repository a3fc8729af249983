"""The sequence models (lstm, transformer/bert_base, deepspeech2) in PyTorch and Keras 3.

Parity is checked three ways: parameter counts of both builds against the layout formula;
outputs of the Keras build equal to PyTorch's once PyTorch's weights are copied in (same
architecture, same arithmetic: LSTM biases, GRU gates, padding, attention); and a few
training steps through each framework's real session, whose loss must fall.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import pytest

from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError, ModelConfig
from bench.trial import data
from bench.trial.models import MODELS, deepspeech2, lstm, transformer

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

TINY = {
    "lstm": ModelConfig("lstm", seq_len=12, vocab_size=40, layers=2, hidden=24),
    "transformer": ModelConfig(
        "transformer", seq_len=12, vocab_size=40, layers=2, hidden=32, heads=4,
        intermediate=48, max_positions=16,
    ),
    "deepspeech2": ModelConfig(
        "deepspeech2", seq_len=14, vocab_size=9, layers=2, hidden=16, freq_bins=24
    ),
}  # fmt: skip
MODULES = {"lstm": lstm, "transformer": transformer, "deepspeech2": deepspeech2}


def formula(m: ModelConfig) -> int:
    if m.name == "lstm":
        return lstm.param_count(m.vocab_size, m.hidden, m.layers)
    if m.name == "deepspeech2":
        return deepspeech2.param_count(m.freq_bins, m.hidden, m.layers, m.vocab_size)
    return transformer.param_count(
        m.vocab_size, m.hidden, m.layers, m.intermediate, m.max_positions
    )


def torch_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def keras_params(model: Any) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def sample_input(m: ModelConfig, batch: int = 3) -> np.ndarray:
    rng = np.random.default_rng(7)
    if m.name == "deepspeech2":
        return rng.standard_normal((batch, m.seq_len, m.freq_bins), dtype=np.float32)
    return rng.integers(0, m.vocab_size, size=(batch, m.seq_len), dtype=np.int64)


@pytest.mark.parametrize("name", TINY)
def test_param_counts_match_each_other_and_the_formula(name: str) -> None:
    m = TINY[name]
    keras.backend.clear_session()
    assert torch_params(MODULES[name].build_torch(m)) == formula(m)
    assert keras_params(MODULES[name].build_keras(m)) == formula(m)


def test_registered_counts_are_those_of_the_conf_sizes() -> None:
    import yaml

    conf = os.path.join(os.path.dirname(__file__), "..", "..", "conf", "model")
    for name in ("lstm", "transformer", "bert_base", "deepspeech2"):
        with open(os.path.join(conf, f"{name}.yaml")) as f:
            sizes = yaml.safe_load(f)
        m = ModelConfig(**sizes)
        validate(BenchConfig(model=m))
        assert formula(m) == MODELS[name].reference_params, name


def test_bert_base_has_the_published_size() -> None:
    """BertForMaskedLM (bert-base-uncased, decoder tied) has 109,514,298 parameters.  The
    PyTorch build is checked at full size; the Keras build (about 10 s to build on 2 cores)
    is covered by the formula, which both builds match at every smaller size tested."""
    m = ModelConfig("bert_base", seq_len=8, **transformer.BERT_BASE)
    assert formula(m) == transformer.BERT_BASE_PARAMS == 109_514_298
    assert torch_params(transformer.build_torch(m)) == 109_514_298


def _copy_linear(t: Any, k: Any) -> None:
    k.kernel.assign(t.weight.detach().numpy().T)
    k.bias.assign(t.bias.detach().numpy())


def _copy_lstm(t: Any, k: Any) -> None:
    k.get_layer(index=1).embeddings.assign(t.embedding.weight.detach().numpy())
    cells = [layer.cell for layer in k.layers if isinstance(layer, keras.layers.LSTM)]
    for i, cell in enumerate(cells):
        p = {n: w.detach().numpy() for n, w in t.lstm.named_parameters() if n.endswith(f"l{i}")}
        cell.kernel.assign(p[f"weight_ih_l{i}"].T)
        cell.recurrent_kernel.assign(p[f"weight_hh_l{i}"].T)
        cell.input_bias.assign(p[f"bias_ih_l{i}"])
        cell.recurrent_bias.assign(p[f"bias_hh_l{i}"])
    _copy_linear(t.decoder, k.layers[-1])


def _copy_transformer(t: Any, k: Any) -> None:
    for name, module in t.named_modules():
        if not name or not list(module.parameters(recurse=False)):
            continue
        target = k
        for part in name.split("."):
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        if isinstance(module, torch.nn.Linear):
            _copy_linear(module, target)
        elif isinstance(module, torch.nn.Embedding):
            target.embeddings.assign(module.weight.detach().numpy())
        elif isinstance(module, torch.nn.LayerNorm):
            target.gamma.assign(module.weight.detach().numpy())
            target.beta.assign(module.bias.detach().numpy())
    k.decoder_bias.assign(t.decoder_bias.detach().numpy())


def _gru_gates(w: np.ndarray) -> np.ndarray:
    """PyTorch's gate order (reset, update, new) along axis 0 -> Keras' (update, reset, new)."""
    r, z, n = np.split(w, 3, axis=0)
    return np.concatenate([z, r, n], axis=0)


def _copy_deepspeech2(t: Any, k: Any, m: ModelConfig) -> None:
    convs = [layer for layer in k.layers if isinstance(layer, keras.layers.Conv2D)]
    norms = [layer for layer in k.layers if isinstance(layer, keras.layers.BatchNormalization)]
    t_convs = [c for c in t.conv if isinstance(c, torch.nn.Conv2d)]
    t_norms = [c for c in t.conv if isinstance(c, torch.nn.BatchNorm2d)]
    for tc, kc in zip(t_convs, convs, strict=True):
        kc.kernel.assign(tc.weight.detach().numpy().transpose(2, 3, 1, 0))
    for tn, kn in zip(t_norms, norms, strict=True):
        kn.gamma.assign(tn.weight.detach().numpy())
        kn.beta.assign(tn.bias.detach().numpy())
    # PyTorch flattens (channel, bin), Keras (bin, channel): permute the first GRU's inputs.
    bins, ch = deepspeech2.output_bins(m.freq_bins), deepspeech2.CHANNELS
    perm = [c * bins + f for f in range(bins) for c in range(ch)]
    grus = [layer for layer in k.layers if isinstance(layer, keras.layers.Bidirectional)]
    p = {n: w.detach().numpy() for n, w in t.rnn.named_parameters()}
    for i, bi in enumerate(grus):
        for suffix, gru in (("", bi.forward_layer), ("_reverse", bi.backward_layer)):
            w_ih = p[f"weight_ih_l{i}{suffix}"]
            w_ih = w_ih[:, perm] if i == 0 else w_ih
            cell = gru.cell
            cell.kernel.assign(_gru_gates(w_ih).T)
            cell.recurrent_kernel.assign(_gru_gates(p[f"weight_hh_l{i}{suffix}"]).T)
            biases = [_gru_gates(p[f"bias_{b}_l{i}{suffix}"]) for b in ("ih", "hh")]
            cell.bias.assign(np.stack(biases))
    _copy_linear(t.fc, k.layers[-1])


@pytest.mark.parametrize("name", TINY)
def test_keras_computes_what_torch_computes_with_the_same_weights(name: str) -> None:
    m = TINY[name]
    torch.manual_seed(0)
    t_model = MODULES[name].build_torch(m).eval()
    keras.backend.clear_session()
    k_model = MODULES[name].build_keras(m)
    if name == "lstm":
        _copy_lstm(t_model, k_model)
    elif name == "transformer":
        _copy_transformer(t_model, k_model)
    else:
        _copy_deepspeech2(t_model, k_model, m)
    x = sample_input(m)
    with torch.no_grad():
        expected = t_model(torch.from_numpy(x)).numpy()
    got = np.asarray(k_model(x, training=False))
    frames = deepspeech2.output_frames(m.seq_len) if name == "deepspeech2" else m.seq_len
    assert expected.shape == got.shape == (3, frames, m.vocab_size)
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.parametrize("name", TINY)
@pytest.mark.slow
def test_training_steps_lower_the_loss_on_a_fixed_batch(name: str, framework: str) -> None:
    from bench.trial import frameworks

    model = dataclasses.replace(TINY[name], layers=1)  # one layer traces faster in TF
    cfg = BenchConfig(model=model, batch_size=4)
    cfg.framework.name = framework
    cfg.data.num_batches = 1  # the same batch every step
    cfg.optimizer.name, cfg.optimizer.lr = "adam", 1e-2
    validate(cfg)
    torch.manual_seed(0)
    keras.utils.set_random_seed(0)
    keras.backend.clear_session()
    session = frameworks.load(framework).prepare(cfg, data.load(cfg))
    assert session.num_parameters == formula(model)
    losses = []
    for _ in range(6):
        session.step(session.next_batch())
        losses.append(session.take_mean_loss())
    assert all(loss is not None and np.isfinite(loss) for loss in losses), losses
    assert losses[-1] < 0.95 * losses[0], losses
    assert session.evaluate() is None


def test_synthetic_tokens_and_spectrograms() -> None:
    cfg = BenchConfig(model=TINY["lstm"], batch_size=5, seed=3)
    causal = data.load(cfg)
    assert isinstance(causal, data.SequenceBatches) and len(causal) == cfg.data.num_batches
    (nxt,) = causal.targets[0]
    x = causal.inputs[0]
    assert x.shape == nxt.shape == (5, 12) and x.dtype == nxt.dtype == np.int64
    assert (x[:, 1:] == nxt[:, :-1]).all()  # targets are the inputs shifted by one

    cfg.model = TINY["transformer"]
    masked = data.load(cfg)
    (targets,) = masked.targets[0]
    x, mask_id = masked.inputs[0], cfg.model.vocab_size - 1
    hit = targets != data.IGNORE_INDEX
    assert hit.any(axis=1).all() and (x[hit] == mask_id).all() and (x[~hit] != mask_id).all()

    cfg.model = TINY["deepspeech2"]
    speech = data.load(cfg)
    labels, lengths, frames = speech.targets[0]
    assert speech.inputs[0].shape == (5, 14, 24) and speech.inputs[0].dtype == np.float32
    assert (frames == deepspeech2.output_frames(14)).all()
    assert (lengths >= 1).all() and (2 * lengths <= frames).all()
    inside = np.arange(labels.shape[1])[None, :] < lengths[:, None]
    assert (labels[inside] > 0).all() and (labels[~inside] == 0).all()  # 0 is the blank


@pytest.mark.parametrize(
    ("model", "change", "expected"),
    [
        ("lstm", {}, "data: data=digits is a set of labelled images and model=lstm"),
        ("bert_base", {"layers": 2}, "model.layers: bert_base has layers=12, got 2"),
        ("transformer", {"heads": 5}, "model.heads: must divide model.hidden (32)"),
        ("transformer", {"seq_len": 17}, "model.seq_len: transformer has 16 positions"),
        ("deepspeech2", {"seq_len": 2}, "model.seq_len: deepspeech2 needs at least 3"),
        ("deepspeech2", {"vocab_size": 1}, "model.vocab_size: deepspeech2 needs the CTC blank"),
        ("lstm", {"hidden": 0}, "model.hidden: must be >= 1, got 0"),
    ],
)
def test_bad_sizes_and_data_are_refused_naming_the_field(
    model: str, change: dict[str, int], expected: str
) -> None:
    sizes = dict(vars(TINY[model])) if model in TINY else {"seq_len": 8, **transformer.BERT_BASE}
    sizes.update(change, name=model)
    cfg = BenchConfig(model=ModelConfig(**sizes))
    if not change:
        cfg.data.name = "digits"
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


def test_conf_presets_compose_and_image_data_is_refused() -> None:
    from hydra import compose, initialize_config_dir

    from bench.cli import CONF_DIR
    from bench.sweep.compose import to_bench_config

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        bert = to_bench_config(compose("config", overrides=["model=bert_base"]))
        mixed = to_bench_config(compose("config", overrides=["model=lstm", "data=digits"]))
    assert {k: getattr(bert.model, k) for k in transformer.BERT_BASE} == transformer.BERT_BASE
    validate(bert)
    with pytest.raises(ConfigError, match="data: data=digits .* model=lstm takes token"):
        validate(mixed)
