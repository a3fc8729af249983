"""mode=generate's timing loop (bench.trial.generate): what each window times, the figures'
arithmetic on a fake clock, and a tiny Hugging Face llama whose greedy tokens through bench's
own cached loop are exactly those of transformers' ``generate()``."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from bench.core.config import BenchConfig, ModelConfig
from bench.trial import generate


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeSession:
    """A generating session whose prefill takes 0.5 s and whose decode steps take 0.1, 0.2,
    0.3... s on a fake clock; it counts its calls and the syncs."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[str] = []
        self.step = 0

    def start_generation(self) -> None:
        self.calls.append("start")
        self.step = 0

    def prefill(self) -> None:
        self.calls.append("prefill")
        self.clock.now += 0.5

    def decode(self) -> None:
        self.step += 1
        self.calls.append("decode")
        self.clock.now += 0.1 * self.step

    def generated(self) -> Any:
        return None

    def sync(self) -> None:
        self.calls.append("sync")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeSession:
    clock = FakeClock()
    monkeypatch.setattr(generate.time, "perf_counter", clock)
    return FakeSession(clock)


def test_a_window_times_the_prefill_and_each_decode_step_synchronized(fake: FakeSession) -> None:
    w = generate.generation(fake, new_tokens=4, events=False)
    # the cache is dropped before the window starts, the device synchronized at its edges
    assert fake.calls[:3] == ["start", "sync", "prefill"]
    assert fake.calls[-1] == "sync" and fake.calls.count("decode") == 3
    assert w.prefill_s == pytest.approx(0.5)
    assert w.decode_s == pytest.approx([0.1, 0.2, 0.3])
    assert w.end - w.start == pytest.approx(1.1)


def test_the_figures_of_windows(fake: FakeSession) -> None:
    w = generate.generation(fake, new_tokens=4, events=False)
    f = generate.figures([w, w], batch=2, prompt_len=8)
    assert f["time_to_first_token_ms"] == pytest.approx(500.0)
    assert f["prefill_tokens_per_s"] == pytest.approx(2 * 8 / 0.5)
    assert f["decode_tokens_per_s"] == pytest.approx(2 * 3 / 0.6)  # 3 tokens per 0.6 s
    assert f["time_per_output_token_p50_ms"] == pytest.approx(200.0)
    assert f["time_per_output_token_p90_ms"] == pytest.approx(300.0)


def test_warm_up_is_outside_the_timed_windows_and_each_epoch_is_one_generation(
    fake: FakeSession,
) -> None:
    first, rest = generate.warm_up(fake, new_tokens=3, generations=2)
    assert first == pytest.approx(0.5 + 0.1 + 0.2) and rest == pytest.approx(0.8)
    assert fake.calls.count("prefill") == 2
    seen: list[Any] = []
    records, windows = generate.timed_generations(
        fake, epochs=3, batch=2, prompt_len=8, new_tokens=3, events=False, on_epoch=seen.append
    )
    assert fake.calls.count("prefill") == 5 and len(records) == len(windows) == len(seen) == 3
    r = records[0]
    assert (r.steps, r.samples) == (3, 6)  # forward passes; tokens generated (2 prompts x 3)
    assert r.epoch_time_s == pytest.approx(0.8)
    assert r.samples_per_s == pytest.approx(6 / 0.8)
    assert r.loss is None and r.extra["time_to_first_token_ms"] == pytest.approx(500.0)
    s = generate.summary(records, windows, batch=2, prompt_len=8)
    assert s["trial_time_s"] == pytest.approx(2.4)
    assert s["trial_decode_tokens_per_s"] == pytest.approx(2 * 2 / 0.3)
    assert "decode_tokens_per_s" not in s  # each window's, logged at its epoch's step
    assert s["trial_step_time_p50_ms"] == pytest.approx(150.0)


class EventSession(FakeSession):
    """Device events: each mark is the fake clock's reading; no sync inside a window."""

    def mark(self) -> float:
        return self.clock.now

    def between_s(self, first: float, second: float) -> float:
        return second - first


def test_with_device_events_the_host_synchronizes_only_at_the_edges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(generate.time, "perf_counter", clock)
    s = EventSession(clock)
    w = generate.generation(s, new_tokens=3, events=True)
    assert s.calls == ["start", "sync", "prefill", "decode", "decode", "sync"]
    assert w.prefill_s == pytest.approx(0.5) and w.decode_s == pytest.approx([0.1, 0.2])


TINY = {"vocab_size": 64, "hidden": 32, "layers": 2, "heads": 2, "intermediate": 64,
        "max_positions": 64}  # fmt: skip


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_bench_greedy_tokens_are_hugging_faces_generate(family: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bench.trial.data import synthetic_sequences
    from bench.trial.frameworks.torch_adapter import Adapter

    model = ModelConfig(name=family, source="hf", **TINY)
    cfg = dataclasses.replace(
        BenchConfig(), model=model, mode="generate", batch_size=3, prompt_len=7, new_tokens=6,
        device="cpu", telemetry=dataclasses.replace(BenchConfig().telemetry, enabled=False),
    )  # fmt: skip
    adapter = Adapter()
    adapter.configure(cfg, 1)
    session = adapter.prepare(cfg, synthetic_sequences(cfg))
    assert session.num_parameters > 0
    w = generate.generation(session, cfg.new_tokens, events=False)
    assert len(w.decode_s) == 5 and w.prefill_s > 0
    ours = session.generated()
    assert ours.shape == (3, 6)
    prompt = session._prompt
    with torch.no_grad():
        theirs = session.model.lm.generate(
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
            max_new_tokens=6, min_new_tokens=6, use_cache=True, pad_token_id=0,
            eos_token_id=None,  # bench chooses end-of-sequence like any token
        )  # fmt: skip
    np.testing.assert_array_equal(ours, theirs[:, 7:].numpy())
    # a second generation starts from an empty cache with the next prompt batch
    generate.generation(session, cfg.new_tokens, events=False)
    assert session.generated().shape == (3, 6)


def test_the_default_sizes_give_each_family_its_own_parameter_count() -> None:
    pytest.importorskip("transformers")
    from bench.trial.models import hf_lm

    counts = {}
    for family in ("llama", "gpt2", "mistral", "qwen2"):
        fields = {"name": family, "config": {}} | {
            k: v for k, v in hf_lm.DEFAULT_SIZES.items() if k != "seq_len"
        }
        counts[family] = hf_lm.probe(hf_lm._Model(fields))["num_parameters"]
    # llama and mistral are one architecture at these sizes; qwen2 adds q/k/v biases
    assert counts["llama"] == counts["mistral"]
    assert counts["qwen2"] == counts["llama"] + 4 * (256 + 256 + 256)
    assert counts["gpt2"] < counts["llama"]  # tied embeddings


def test_a_field_the_class_lacks_names_the_nearest() -> None:
    pytest.importorskip("transformers")
    from bench.trial.models import hf_lm

    model = hf_lm._Model({"name": "qwen2", "config": {"rope_thetta": 1.0}, **TINY})
    assert hf_lm.fields_problem(model).startswith(
        "model.config.rope_thetta: qwen2's config has no field 'rope_thetta'; nearest: rope_theta"
    )
    bad = hf_lm._Model({"name": "llama", "config": {"hidden_act": "nope"}, **TINY})
    assert hf_lm.probe(bad)["problem"].startswith("model.config.hidden_act: building llama raised")
    assert (
        hf_lm.probe(hf_lm._Model({"name": "qwen2", "config": {"rope_theta": 1e4}, **TINY}))[
            "num_parameters"
        ]
        > 0
    )  # transformers 5 takes rope_theta into rope_parameters


def test_the_summary_table_shows_generation_figures_in_a_column_of_their_own() -> None:
    from bench.sweep.session import Row, format_table, generation_detail

    assert generation_detail({"trial_samples_per_s": 5.0}) == ""
    detail = generation_detail({
        "trial_time_to_first_token_ms": 12.34, "trial_time_per_output_token_p50_ms": 3.21,
        "trial_decode_tokens_per_s": 1234.5,
    })  # fmt: skip
    assert detail == "TTFT 12.3 ms, TPOT p50 3.2 ms, decode 1,234.5 tok/s"
    table = format_table([Row("a", "ok", 10.0, 1.0, "r1", detail), Row("b", "ok", 5.0, 1.0)])
    header, _, first, second = table.splitlines()
    assert header.split()[-1] == "generation" and first.endswith(detail)
    assert second.endswith("-")
    assert "generation" not in format_table([Row("b", "ok", 5.0, 1.0)])
