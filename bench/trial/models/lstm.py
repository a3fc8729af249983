"""An LSTM language model for PyTorch and Keras 3: embedding -> stacked LSTM -> linear.

Tokens (batch, seq_len) int64 are embedded into ``model.hidden`` dimensions, run through
``model.layers`` LSTM layers of ``model.hidden`` units, and every position is projected to
``model.vocab_size`` logits (batch, seq_len, vocab); the loss is next-token cross-entropy at
every position.  With PTB-"medium" sizes (conf/model/lstm.yaml: 10,000 tokens, 2 x 650
units) that is 19,780,400 parameters in both frameworks.  No dropout.

Bias parity.  ``torch.nn.LSTM`` keeps two bias vectors per layer, ``b_ih`` and ``b_hh``
(8 x units, cuDNN's layout); ``keras.layers.LSTM`` keeps one (4 x units).  Both enter the
gate pre-activations only as their sum, ``x W_ih + b_ih + h W_hh + b_hh``, so the Keras
model here gets torch's second vector as a real trainable weight: :class:`_TwoBiasLSTMCell`
holds ``input_bias`` and ``recurrent_bias`` and exposes their sum as the ``bias`` that
``keras.layers.LSTM`` reads, both in its fused kernel (cuDNN on a GPU) and in its
step-by-step loop.  Parameter counts are therefore equal, the forward computation is the
same, and each bias gets the same gradient as in PyTorch.  Initialization is PyTorch's in
both: U(+-1/sqrt(units)) for every LSTM weight and bias (Keras' forget-gate bias of 1 is
off), N(0, 1) embeddings and PyTorch's default for the output layer.

Nothing here imports a framework until a builder is called.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras
    import torch

    from bench.core.config import ModelConfig


def check(model: ModelConfig) -> list[str]:
    """Problems with the sizes in ``model`` for this architecture."""
    if model.vocab_size < 2:
        return [f"model.vocab_size: {model.name} needs at least 2 tokens, got {model.vocab_size}"]
    return []


def param_count(vocab_size: int, hidden: int, layers: int) -> int:
    """Parameters of the model, computed from its layout (the tests check the builds)."""
    lstm_layer = 4 * hidden * hidden * 2 + 4 * hidden * 2  # W_ih, W_hh, b_ih, b_hh
    return vocab_size * hidden + layers * lstm_layer + hidden * vocab_size + vocab_size


def build_torch(model: ModelConfig) -> torch.nn.Module:
    """Logits (batch, seq_len, vocab_size) from int64 tokens (batch, seq_len)."""
    from torch import nn

    class LSTMLanguageModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(model.vocab_size, model.hidden)
            self.lstm = nn.LSTM(model.hidden, model.hidden, model.layers, batch_first=True)
            self.decoder = nn.Linear(model.hidden, model.vocab_size)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(self.embedding(tokens))
            return self.decoder(out)

    return LSTMLanguageModel()


def build_keras(model: ModelConfig) -> keras.Model:
    """Logits (batch, seq_len, vocab_size) from int tokens (batch, seq_len)."""
    import keras
    from keras import layers, ops

    hidden = model.hidden
    bound = 1.0 / math.sqrt(hidden)

    def uniform() -> keras.initializers.Initializer:
        return keras.initializers.RandomUniform(-bound, bound)

    class _TwoBiasLSTMCell(layers.LSTMCell):
        """keras.layers.LSTMCell with PyTorch's two bias vectors (see the module docstring)."""

        def build(self, input_shape: Any) -> None:
            gates = 4 * self.units
            self.kernel = self.add_weight(
                shape=(input_shape[-1], gates), name="kernel", initializer=uniform()
            )
            self.recurrent_kernel = self.add_weight(
                shape=(self.units, gates), name="recurrent_kernel", initializer=uniform()
            )
            self.input_bias = self.add_weight(
                shape=(gates,), name="input_bias", initializer=uniform()
            )
            self.recurrent_bias = self.add_weight(
                shape=(gates,), name="recurrent_bias", initializer=uniform()
            )

        @property
        def bias(self) -> Any:  # what LSTMCell.call and LSTM's fused kernel add
            return ops.add(self.input_bias, self.recurrent_bias)

    class _TwoBiasLSTM(layers.LSTM):
        def __init__(self, units: int) -> None:
            super().__init__(units, return_sequences=True)
            # Replaces the one-bias cell LSTM.__init__ made; that one is never built.
            self.cell = _TwoBiasLSTMCell(units, name="lstm_cell")

    tokens = keras.Input((model.seq_len,), dtype="int64")
    x = layers.Embedding(
        model.vocab_size, hidden, embeddings_initializer=keras.initializers.RandomNormal(0, 1)
    )(tokens)
    for _ in range(model.layers):
        x = _TwoBiasLSTM(hidden)(x)
    decoder = layers.Dense(
        model.vocab_size, kernel_initializer=uniform(), bias_initializer=uniform()
    )
    logits = decoder(x)
    return keras.Model(tokens, logits, name="lstm_lm")
