"""Causal LM builders for the tests of model=py model.task=causal_lm
(tests/config/test_own_lm.py, tests/unit/test_tiny_lm.py): each one wrong in its own way,
or right without a cached forward.  torch only: the probe checks a Keras model the same way."""

from __future__ import annotations

from typing import Any


def _context_lm(vocab_size: int, hidden: int, forgets: bool) -> Any:
    """Logits from the running sum of the token embeddings (each position sees the ones
    before it); ``forgets``: its cached forward ignores the cache."""
    import torch
    from torch import nn

    class RunningSum(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab_size, hidden)
            self.head = nn.Linear(hidden, vocab_size)

        def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.head(self.embed(token_ids).cumsum(1))
            return out

        def init_cache(self, batch_size: int, max_length: int) -> torch.Tensor:
            return torch.zeros(batch_size, hidden)

        def cached_forward(
            self, token_ids: torch.Tensor, cache: torch.Tensor, index: int
        ) -> tuple[torch.Tensor, torch.Tensor]:
            sums = self.embed(token_ids).cumsum(1) + (0 if forgets else cache[:, None])
            return self.head(sums), sums[:, -1]

    return RunningSum()


def running_sum(framework: str, vocab_size: int, hidden: int, **sizes: int) -> Any:
    """A right one, cached forward included."""
    return _context_lm(vocab_size, hidden, forgets=False)


def forgets(framework: str, vocab_size: int, hidden: int, **sizes: int) -> Any:
    return _context_lm(vocab_size, hidden, forgets=True)


def no_cache(framework: str, vocab_size: int, hidden: int, **sizes: int) -> Any:
    """A causal LM (each position its own token's logits) without a cached forward."""
    from torch import nn

    return nn.Sequential(nn.Embedding(vocab_size, hidden), nn.Linear(hidden, vocab_size))


def hidden_states(framework: str, vocab_size: int, hidden: int, **sizes: int) -> Any:
    """Hidden states, not logits: (batch, seq, hidden)."""
    from torch import nn

    return nn.Embedding(vocab_size, hidden)


def returns_none(framework: str, **sizes: int) -> Any:
    return None
