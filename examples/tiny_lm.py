"""A tiny decoder-only language model of your own, built in PyTorch and in Keras as the same
network (equal parameter counts), to run through bench's matrix in training and generation
(docs/your-model.md):

    python -m bench -m framework=torch,tf model=py model.task=causal_lm \\
        model.builder=examples.tiny_lm:build model.hidden=64 model.intermediate=256

bench calls a causal LM's builder as ``build(framework=..., vocab_size=..., hidden=...,
layers=..., heads=..., intermediate=..., max_positions=..., seq_len=...)`` (bench's sequence
keys, ``model.hidden`` and so on) and trains the model it returns, token ids (batch, seq) to
logits (batch, seq, vocab_size), with the next-token loss on synthetic tokens.  For
``mode=generate`` the model also has the cached forward bench's generation loop calls:

- ``init_cache(batch_size, max_length)``: an empty cache for ``max_length`` positions;
- ``cached_forward(token_ids, cache, index)`` -> ``(logits, cache)``: the tokens at positions
  ``index ... index + n - 1`` attend to every position the cache holds before them and to
  each other causally; logits (batch, n, vocab_size); the cache returned holds them too.

Here the cache is one tensor of fixed size, (layers, 2, batch, heads, max_length, head dim),
written at ``index`` (under tf ``index`` is a scalar tensor and the step runs in a
``tf.function``, so the cache keeps its shape).

The network: a token embedding and a learned position embedding, ``layers`` pre-norm blocks
(layer norm, causal multi-head self-attention with one fused query/key/value projection
and an output projection, layer norm, a GELU feed-forward of ``intermediate`` units), a final
layer norm and an output projection without bias.  Its parameters:
``V*h + P*h + L*(4h^2 + 4h + 2*h*i + i + h + 4h) + 2h + h*V`` for vocabulary ``V``, width
``h``, ``P`` positions, ``L`` blocks and feed-forward ``i``: 260,864 for V=1000, h=64,
P=512, L=2, i=256, in both frameworks.  The frameworks are imported inside the builders, so
that importing this module costs nothing.
"""

from __future__ import annotations

from typing import Any

EPS = 1e-5  # every layer norm's epsilon (torch's default; Keras' is 1e-3)


def build_torch(
    framework: str,
    vocab_size: int,
    hidden: int,
    layers: int,
    heads: int,
    intermediate: int,
    max_positions: int,
    seq_len: int,
) -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(hidden, eps=EPS)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.out = nn.Linear(hidden, hidden)
            self.norm2 = nn.LayerNorm(hidden, eps=EPS)
            self.up = nn.Linear(hidden, intermediate)
            self.down = nn.Linear(intermediate, hidden)

        def forward(self, x: torch.Tensor, cache: Any = None, index: int = 0) -> torch.Tensor:
            b, n, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, -1).permute(2, 0, 3, 1, 4)
            if cache is None:  # the whole sequence, causally
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # this block's cache: (2, batch, heads, max_length, head dim)
                cache[0, :, :, index : index + n] = k
                cache[1, :, :, index : index + n] = v
                keys = torch.arange(cache.shape[3], device=x.device)
                queries = torch.arange(index, index + n, device=x.device)
                mask = keys[None, :] <= queries[:, None]
                a = F.scaled_dot_product_attention(
                    q, cache[0].to(q.dtype), cache[1].to(q.dtype), attn_mask=mask
                )
            x = x + self.out(a.transpose(1, 2).reshape(b, n, hidden))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class TinyLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocab_size, hidden)
            self.positions = nn.Embedding(max_positions, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(hidden, eps=EPS)
            self.head = nn.Linear(hidden, vocab_size, bias=False)

        def _run(self, token_ids: torch.Tensor, cache: Any, index: int) -> torch.Tensor:
            n = token_ids.shape[1]
            where = torch.arange(index, index + n, device=token_ids.device)
            x = self.tokens(token_ids) + self.positions(where)
            for i, block in enumerate(self.blocks):
                x = block(x, None if cache is None else cache[i], index)
            logits: torch.Tensor = self.head(self.norm(x))
            return logits

        def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
            return self._run(token_ids, None, 0)

        def init_cache(self, batch_size: int, max_length: int) -> torch.Tensor:
            weight = self.head.weight
            shape = (layers, 2, batch_size, heads, max_length, hidden // heads)
            return torch.zeros(shape, dtype=weight.dtype, device=weight.device)

        def cached_forward(
            self, token_ids: torch.Tensor, cache: torch.Tensor, index: int
        ) -> tuple[torch.Tensor, torch.Tensor]:
            return self._run(token_ids, cache, index), cache

    return TinyLM()


def build_keras(
    framework: str,
    vocab_size: int,
    hidden: int,
    layers: int,
    heads: int,
    intermediate: int,
    max_positions: int,
    seq_len: int,
) -> Any:
    import keras
    from keras import ops

    head_dim = hidden // heads

    class Block(keras.layers.Layer):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.norm1 = keras.layers.LayerNormalization(epsilon=EPS)
            self.qkv = keras.layers.Dense(3 * hidden)
            self.out = keras.layers.Dense(hidden)
            self.norm2 = keras.layers.LayerNormalization(epsilon=EPS)
            self.up = keras.layers.Dense(intermediate)
            self.down = keras.layers.Dense(hidden)

        def call(self, x: Any, cache: Any = None, index: Any = 0) -> tuple[Any, Any]:
            b, n = ops.shape(x)[0], ops.shape(x)[1]
            qkv = ops.transpose(ops.reshape(self.qkv(self.norm1(x)), (b, n, 3, heads, head_dim)),
                                (2, 0, 3, 1, 4))  # fmt: skip
            q, k, v = qkv[0], qkv[1], qkv[2]
            queries = index + ops.arange(n)
            if cache is None:
                keys = ops.arange(n)
            else:  # this block's cache: (2, batch, heads, max_length, head dim)
                kv = ops.cast(ops.stack([k, v]), cache.dtype)
                cache = ops.slice_update(cache, (0, 0, 0, index, 0), kv)
                k, v = ops.cast(cache[0], q.dtype), ops.cast(cache[1], q.dtype)
                keys = ops.arange(ops.shape(cache)[3])
            mask = ops.expand_dims(keys, 0) <= ops.expand_dims(queries, 1)
            scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / head_dim**0.5
            scores = ops.where(mask, scores, ops.cast(-1e9, scores.dtype))
            a = ops.matmul(ops.softmax(scores, axis=-1), v)
            x = x + self.out(ops.reshape(ops.transpose(a, (0, 2, 1, 3)), (b, n, hidden)))
            up = keras.activations.gelu(self.up(self.norm2(x)), approximate=False)
            return x + self.down(up), cache

    class TinyLM(keras.Model):
        def __init__(self) -> None:
            super().__init__(name="tiny_lm")
            self.tokens = keras.layers.Embedding(vocab_size, hidden)
            self.positions = keras.layers.Embedding(max_positions, hidden)
            self.blocks = [Block(name=f"block{i}") for i in range(layers)]
            self.norm = keras.layers.LayerNormalization(epsilon=EPS)
            self.head = keras.layers.Dense(vocab_size, use_bias=False)

        def _run(self, token_ids: Any, cache: Any, index: Any) -> tuple[Any, Any]:
            where = index + ops.arange(ops.shape(token_ids)[1])
            x = self.tokens(token_ids) + self.positions(where)
            caches = []
            for i, block in enumerate(self.blocks):
                x, layer_cache = block(x, cache=None if cache is None else cache[i], index=index)
                caches.append(layer_cache)
            logits = self.head(self.norm(x))
            return logits, None if cache is None else ops.stack(caches)

        def call(self, token_ids: Any, training: bool = False) -> Any:
            return self._run(token_ids, None, 0)[0]

        def init_cache(self, batch_size: int, max_length: int) -> Any:
            shape = (layers, 2, batch_size, heads, max_length, head_dim)
            return ops.zeros(shape, dtype=self.compute_dtype)

        def cached_forward(self, token_ids: Any, cache: Any, index: Any) -> tuple[Any, Any]:
            return self._run(token_ids, cache, index)

    return TinyLM()


def build(framework: str, **sizes: int) -> Any:
    """One builder for both frameworks."""
    builders = {"torch": build_torch, "tf": build_keras}
    return builders[framework](framework, **sizes)
