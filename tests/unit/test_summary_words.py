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


def test_a_sweeps_parent_run_is_named_by_what_it_varies() -> None:
    from bench.sweep.driver import sweep_name

    given = ["framework=torch,tf", "model=lenet5", "tracking.uri=sqlite:///x.db"]
    name = sweep_name([*given, "hydra.sweeper.dry_run=false", "+experiment=seed000_single_gpu"])
    assert name.startswith("framework=torch,tf model=lenet5 experiment=seed000_single_gpu · ")
    assert "tracking" not in name and "hydra" not in name
    assert sweep_name([]).startswith("sweep-")
    assert len(sweep_name(["model.name=" + "x" * 200])) < 110
