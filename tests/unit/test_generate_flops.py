"""mode=generate's achieved FLOP/s: the prefill's and the decode steps' FLOPs from two counts
of the forward (bench.trial.generate.flops_per_prompt), over their timed seconds."""

from __future__ import annotations

import pytest

from bench.trial import generate


def forward(tokens: int, a: float = 1000.0, b: float = 8.0) -> float:
    """A forward of ``tokens`` tokens: per-token layers and attention over every pair."""
    return a * tokens + b * tokens**2


@pytest.mark.parametrize(("prompt", "new"), [(8, 5), (32, 1), (1, 16)])
def test_prefill_and_decode_flops_from_two_counts(prompt: int, new: int) -> None:
    a, b = 1000.0, 8.0
    prefill, decode = generate.flops_per_prompt(forward(prompt), forward(prompt + new), prompt, new)
    assert prefill == forward(prompt)
    # decode step i: one token's layers, its query against the prompt_len + i cached keys
    by_step = sum(a + b * (prompt + i) for i in range(1, new))
    assert decode == pytest.approx(by_step, rel=1e-12)


def test_achieved_rates_over_the_windows() -> None:
    windows = [
        generate.Window(start=0.0, end=1.0, prefill_s=0.5, decode_s=[0.1, 0.1]),
        generate.Window(start=1.0, end=2.0, prefill_s=0.5, decode_s=[0.2, 0.2]),
    ]
    rates = generate.achieved(windows, batch=4, prefill_flops=1e6, decode_flops=3e5)
    assert rates["prefill_achieved_flops_per_s"] == pytest.approx(4 * 1e6 * 2 / 1.0)
    assert rates["decode_achieved_flops_per_s"] == pytest.approx(4 * 3e5 * 2 / 0.6)
    single = [generate.Window(start=0.0, end=1.0, prefill_s=0.5, decode_s=[])]
    assert "decode_achieved_flops_per_s" not in generate.achieved(single, 4, 1e6, 0.0)
