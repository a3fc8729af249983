"""A BERT-style encoder with a masked-language-model head, for PyTorch, Keras 3 and Flax NNX.

Layout (BERT's, Devlin et al. 2018, as in Hugging Face's ``BertForMaskedLM``): token,
position and token-type embeddings summed, LayerNorm and dropout; ``model.layers`` post-LN
encoder blocks, each ``x = LN(x + Dropout(Attention(x)))`` then
``x = LN(x + Dropout(W2 GELU(W1 x)))``; then the MLM head, ``LN(GELU(W x))`` projected onto
the vocabulary by the token-embedding matrix (tied, plus its own bias), giving logits
(batch, seq_len, vocab_size) at every position.  The loss is cross-entropy at the masked
positions only.  Sizes come from ``model.hidden``, ``.heads``, ``.intermediate``,
``.layers``, ``.vocab_size`` and ``.max_positions``; dropout is BERT's 0.1, LayerNorm eps
1e-12, GELU the exact (erf) one, and every weight starts N(0, 0.02) with zero biases.

Attention is written out in every framework the same way (four Linear/Dense layers with
biases for query, key, value and output; softmax(q k^T / sqrt(d)) v per head; no mask,
since the synthetic sequences have no padding), rather than ``nn.MultiheadAttention`` and
``keras.layers.MultiHeadAttention``, whose parameter layouts and kernels differ.  Synthetic
data uses one segment, so only the first token-type row is added; the second is kept so
that BERT-base has its published size.

``bert_base`` (:data:`BERT_BASE`: 12 layers, 768 wide, 12 heads, 3072 intermediate,
30,522 tokens, 512 positions) has 109,514,298 parameters in every framework, the count of
``BertForMaskedLM`` for bert-base-uncased (no pooler, decoder tied to the embeddings).

The Flax NNX build (model.source=flax, framework=jax) names its layers as the torch build
does, so torch's parameter names map onto its state one to one (a Linear's ``kernel`` is
torch's ``weight`` transposed; ``scale`` and ``embedding`` are torch's ``weight``).

Nothing here imports a framework until a builder is called.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras
    import torch

    from bench.core.config import ModelConfig

BERT_BASE = {
    "layers": 12,
    "hidden": 768,
    "heads": 12,
    "intermediate": 3072,
    "vocab_size": 30522,
    "max_positions": 512,
}
BERT_BASE_PARAMS = 109_514_298
TOKEN_TYPES = 2
DROPOUT = 0.1
LN_EPS = 1e-12
INIT_STD = 0.02


def check(model: ModelConfig) -> list[str]:
    """Problems with the sizes in ``model`` for this architecture."""
    problems = []
    if model.name == "bert_base":
        for key, value in BERT_BASE.items():
            if getattr(model, key) != value:
                problems.append(
                    f"model.{key}: bert_base has {key}={value}, got {getattr(model, key)}; "
                    "for other sizes use model=transformer"
                )
    if model.hidden % model.heads:
        problems.append(
            f"model.heads: must divide model.hidden ({model.hidden}) evenly, got {model.heads}"
        )
    if model.seq_len > model.max_positions:
        problems.append(
            f"model.seq_len: {model.name} has {model.max_positions} positions "
            f"(model.max_positions), got seq_len={model.seq_len}"
        )
    if model.vocab_size < 2:
        problems.append(
            f"model.vocab_size: {model.name} needs at least 2 tokens (one is the mask token), "
            f"got {model.vocab_size}"
        )
    return problems


def param_count(
    vocab_size: int, hidden: int, layers: int, intermediate: int, max_positions: int
) -> int:
    """Parameters of the model, computed from its layout (the tests check the builds)."""
    embeddings = (vocab_size + max_positions + TOKEN_TYPES) * hidden + 2 * hidden
    attention = 4 * (hidden * hidden + hidden) + 2 * hidden
    ffn = hidden * intermediate + intermediate + intermediate * hidden + hidden + 2 * hidden
    head = hidden * hidden + hidden + 2 * hidden + vocab_size  # decoder weight is tied
    return embeddings + layers * (attention + ffn) + head


def build_torch(model: ModelConfig) -> torch.nn.Module:
    """Logits (batch, seq_len, vocab_size) from int64 tokens (batch, seq_len)."""
    import torch
    from torch import nn

    hidden, heads = model.hidden, model.heads
    head_dim = hidden // heads

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)
            self.dropout = nn.Dropout(DROPOUT)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            batch, length, _ = x.shape

            def split(t: torch.Tensor) -> torch.Tensor:  # (B, S, H) -> (B, heads, S, d)
                return t.view(batch, length, heads, head_dim).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(head_dim))
            probs = self.dropout(torch.softmax(scores, dim=-1))
            context = torch.matmul(probs, v).transpose(1, 2).reshape(batch, length, hidden)
            return self.out(context)

    class EncoderBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = SelfAttention()
            self.attention_norm = nn.LayerNorm(hidden, eps=LN_EPS)
            self.ffn_in = nn.Linear(hidden, model.intermediate)
            self.ffn_out = nn.Linear(model.intermediate, hidden)
            self.ffn_norm = nn.LayerNorm(hidden, eps=LN_EPS)
            self.gelu = nn.GELU()
            self.dropout = nn.Dropout(DROPOUT)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.attention_norm(x + self.dropout(self.attention(x)))
            ffn = self.ffn_out(self.gelu(self.ffn_in(x)))
            return self.ffn_norm(x + self.dropout(ffn))

    class BertMaskedLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(model.vocab_size, hidden)
            self.positions = nn.Embedding(model.max_positions, hidden)
            self.token_types = nn.Embedding(TOKEN_TYPES, hidden)
            self.embedding_norm = nn.LayerNorm(hidden, eps=LN_EPS)
            self.dropout = nn.Dropout(DROPOUT)
            self.blocks = nn.ModuleList(EncoderBlock() for _ in range(model.layers))
            self.head_dense = nn.Linear(hidden, hidden)
            self.gelu = nn.GELU()
            self.head_norm = nn.LayerNorm(hidden, eps=LN_EPS)
            self.decoder_bias = nn.Parameter(torch.zeros(model.vocab_size))

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.tokens(ids) + self.positions.weight[: ids.shape[1]]
            x = x + self.token_types.weight[0]
            x = self.dropout(self.embedding_norm(x))
            for block in self.blocks:
                x = block(x)
            x = self.head_norm(self.gelu(self.head_dense(x)))
            return torch.matmul(x, self.tokens.weight.t()) + self.decoder_bias

    net = BertMaskedLM()
    for module in net.modules():
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, 0.0, INIT_STD)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)
    return net


def build_keras(model: ModelConfig) -> keras.Model:
    """Logits (batch, seq_len, vocab_size) from int tokens (batch, seq_len); built."""
    import keras
    import numpy as np
    from keras import layers, ops

    hidden, heads = model.hidden, model.heads
    head_dim = hidden // heads

    def normal() -> keras.initializers.Initializer:
        return keras.initializers.RandomNormal(0.0, INIT_STD)

    def dense(units: int) -> layers.Dense:
        return layers.Dense(units, kernel_initializer=normal(), bias_initializer="zeros")

    def norm() -> layers.LayerNormalization:
        return layers.LayerNormalization(epsilon=LN_EPS)

    class SelfAttention(layers.Layer):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.query, self.key, self.value = dense(hidden), dense(hidden), dense(hidden)
            self.out = dense(hidden)
            self.dropout = layers.Dropout(DROPOUT)

        def call(self, x: Any, training: bool = False) -> Any:
            batch, length = ops.shape(x)[0], ops.shape(x)[1]

            def split(t: Any) -> Any:  # (B, S, H) -> (B, heads, S, d)
                return ops.transpose(ops.reshape(t, (batch, length, heads, head_dim)), (0, 2, 1, 3))

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(head_dim))
            probs = self.dropout(ops.softmax(scores, axis=-1), training=training)
            context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
            return self.out(ops.reshape(context, (batch, length, hidden)))

    class EncoderBlock(layers.Layer):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.attention = SelfAttention()
            self.attention_norm = norm()
            self.ffn_in, self.ffn_out = dense(model.intermediate), dense(hidden)
            self.ffn_norm = norm()
            self.dropout = layers.Dropout(DROPOUT)

        def call(self, x: Any, training: bool = False) -> Any:
            attended = self.dropout(self.attention(x, training=training), training=training)
            x = self.attention_norm(x + attended)
            ffn = self.ffn_out(ops.gelu(self.ffn_in(x), approximate=False))
            return self.ffn_norm(x + self.dropout(ffn, training=training))

    class BertMaskedLM(keras.Model):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.tokens = layers.Embedding(
                model.vocab_size, hidden, embeddings_initializer=normal()
            )
            self.positions = layers.Embedding(
                model.max_positions, hidden, embeddings_initializer=normal()
            )
            self.token_types = layers.Embedding(
                TOKEN_TYPES, hidden, embeddings_initializer=normal()
            )
            # Both are read as tables (sliced), not called, so they are built here.
            self.positions.build()
            self.token_types.build()
            self.embedding_norm = norm()
            self.dropout = layers.Dropout(DROPOUT)
            self.blocks = [EncoderBlock() for _ in range(model.layers)]
            self.head_dense = dense(hidden)
            self.head_norm = norm()
            self.decoder_bias = self.add_weight(
                shape=(model.vocab_size,), initializer="zeros", name="decoder_bias"
            )

        def call(self, ids: Any, training: bool = False) -> Any:
            length = ops.shape(ids)[1]
            x = self.tokens(ids)
            x = x + self.positions.embeddings[:length] + self.token_types.embeddings[0]
            x = self.dropout(self.embedding_norm(x), training=training)
            for block in self.blocks:
                x = block(x, training=training)
            x = self.head_norm(ops.gelu(self.head_dense(x), approximate=False))
            table = ops.cast(self.tokens.embeddings, x.dtype)
            return ops.matmul(x, ops.transpose(table)) + ops.cast(self.decoder_bias, x.dtype)

    net = BertMaskedLM(name="bert_mlm")
    net(np.zeros((1, model.seq_len), dtype=np.int64))  # create the weights
    return net


def build_flax(model: ModelConfig, seed: int = 0) -> Any:
    """The same model as a Flax NNX module, layer for layer as :func:`build_torch` (the same
    attribute names, torch's parameter counts at any size): logits (batch, seq_len,
    vocab_size) from int tokens (batch, seq_len), its weights drawn from ``seed``.  Dropout
    draws from the module's own RNG stream (state the jitted step carries); ``.eval()``
    switches it off.  LayerNorm's variance is computed in two passes, as PyTorch does."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    hidden, heads = model.hidden, model.heads
    head_dim = hidden // heads
    rngs = nnx.Rngs(seed)
    normal = jax.nn.initializers.normal(INIT_STD)

    def linear(width: int, out: int) -> nnx.Linear:
        zeros = jax.nn.initializers.zeros
        return nnx.Linear(width, out, kernel_init=normal, bias_init=zeros, rngs=rngs)

    def embed(rows: int) -> nnx.Embed:
        return nnx.Embed(rows, hidden, embedding_init=normal, rngs=rngs)

    def norm() -> nnx.LayerNorm:
        return nnx.LayerNorm(hidden, epsilon=LN_EPS, use_fast_variance=False, rngs=rngs)

    def dropout() -> nnx.Dropout:
        return nnx.Dropout(DROPOUT, rngs=rngs)

    def gelu(x: Any) -> Any:
        return jax.nn.gelu(x, approximate=False)

    class SelfAttention(nnx.Module):
        def __init__(self) -> None:
            self.query, self.key = linear(hidden, hidden), linear(hidden, hidden)
            self.value, self.out = linear(hidden, hidden), linear(hidden, hidden)
            self.dropout = dropout()

        def __call__(self, x: Any) -> Any:
            batch, length, _ = x.shape

            def split(t: Any) -> Any:  # (B, S, H) -> (B, heads, S, d)
                return t.reshape(batch, length, heads, head_dim).transpose(0, 2, 1, 3)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = jnp.matmul(q, k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(head_dim))
            probs = self.dropout(jax.nn.softmax(scores, axis=-1))
            context = jnp.matmul(probs, v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            return self.out(context)

    class EncoderBlock(nnx.Module):
        def __init__(self) -> None:
            self.attention = SelfAttention()
            self.attention_norm = norm()
            self.ffn_in = linear(hidden, model.intermediate)
            self.ffn_out = linear(model.intermediate, hidden)
            self.ffn_norm = norm()
            self.dropout = dropout()

        def __call__(self, x: Any) -> Any:
            x = self.attention_norm(x + self.dropout(self.attention(x)))
            ffn = self.ffn_out(gelu(self.ffn_in(x)))
            return self.ffn_norm(x + self.dropout(ffn))

    class BertMaskedLM(nnx.Module):
        def __init__(self) -> None:
            self.tokens = embed(model.vocab_size)
            self.positions = embed(model.max_positions)
            self.token_types = embed(TOKEN_TYPES)
            self.embedding_norm = norm()
            self.dropout = dropout()
            self.blocks = nnx.List([EncoderBlock() for _ in range(model.layers)])
            self.head_dense = linear(hidden, hidden)
            self.head_norm = norm()
            self.decoder_bias = nnx.Param(jnp.zeros((model.vocab_size,), jnp.float32))

        def __call__(self, ids: Any) -> Any:
            x = self.tokens(ids) + self.positions.embedding[: ids.shape[1]]
            x = x + self.token_types.embedding[0]
            x = self.dropout(self.embedding_norm(x))
            for block in self.blocks:
                x = block(x)
            x = self.head_norm(gelu(self.head_dense(x)))
            return jnp.matmul(x, self.tokens.embedding[...].T) + self.decoder_bias[...]

    return BertMaskedLM()
