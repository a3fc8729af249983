"""The sweep's summary in plain words (issue 50): a generation's rate is named tokens/s,
one trial is 'trial', not 'trials'."""

from __future__ import annotations

from bench.sweep.session import Row, format_table


def test_a_generations_rate_is_named_tokens_per_s() -> None:
    gen = Row("hf:llama generate", "ok", 120.0, 3.0, "abcdef12", detail="TTFT 5.0 ms")
    train = Row("lenet5 train", "ok", 900.0, 2.0, "12345678")
    assert "tokens/s" in format_table([gen]).splitlines()[0]
    assert "samples/s" not in format_table([gen]).splitlines()[0]
    assert "samples/s" in format_table([train]).splitlines()[0]
    assert "samples or tokens/s" in format_table([gen, train]).splitlines()[0]
