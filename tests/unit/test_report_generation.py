"""The report's Generation section (mode=generate): every configuration's generation
figures, and the framework pairs' verdicts on time to first token and time per output
token, in the Verdicts table too; an LM's configuration is labelled by its sequence, not a
pixel size."""

from __future__ import annotations

import random

from bench.report import build
from bench.report.trials import Labeller, to_trial
from tests.report_data import record, runset, said

LLAMA = {"model.source": "hf", "model.seq_len": "128"}


def generating(
    framework: str, ttft: float, tpot: float, n: int, seed: int, spread: float = 0.01
) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        first, per_token = rng.gauss(ttft, ttft * spread), rng.gauss(tpot, tpot * spread)
        metrics = {
            "trial_time_to_first_token_ms": first,
            "trial_time_per_output_token_p50_ms": per_token,
            "trial_time_per_output_token_p90_ms": per_token * 1.2,
            "trial_prefill_tokens_per_s": 32 * 128 / first * 1e3,
            "trial_decode_tokens_per_s": 32 / per_token * 1e3,
            "prefill_achieved_flops_per_s": 1.5e11,
            "decode_achieved_flops_per_s": 1.2e10,
        }
        out.append(record(framework, "llama", mode="generate", params=LLAMA, metrics=metrics,
                          num_parameters=6_293_760, repeat=i))  # fmt: skip
    return out


def test_generation_figures_and_verdicts() -> None:
    # torch: TTFT 20% shorter; tf: the same time per output token (within noise)
    runs = generating("torch", 300.0, 12.0, 8, 1) + generating("tf", 375.0, 12.0, 8, 2)
    report = build(runset(runs))
    section = next(s for s in report.sections if s.title == "Generation")
    figures, compared = [b for b in section.blocks if hasattr(b, "rows")]
    assert figures.columns[:3] == ["Framework", "Configuration", "TTFT ms"]
    assert [r[0].text for r in figures.rows] == ["tf", "torch"]
    assert figures.rows[1][1].text == "hf:llama · batch 32 · prompt 128 + 32 new · cpu"
    assert figures.columns[-2:] == ["prefill GFLOP/s", "decode GFLOP/s"]
    assert [c.text for c in figures.rows[1][-2:]] == ["150 ± 0 (n=8)", "12.0 ± 0 (n=8)"]
    by_figure = {r[1].text: said(r[5]) for r in compared.rows}
    assert by_figure["time to first token"].startswith("torch is faster")
    assert not by_figure["time per output token"].startswith(("torch is faster", "tf is"))
    verdicts = next(s for s in report.sections if s.title == "Verdicts")
    tables = [b for b in verdicts.blocks if hasattr(b, "rows")]
    text = " ".join(c.text for b in tables for r in b.rows for c in r)
    assert "time to first token, tf vs torch" in text
    assert "time per output token, tf vs torch" in text


def test_a_sequence_model_is_labelled_by_its_sequence() -> None:
    train = to_trial(record("torch", "llama", params=LLAMA, num_parameters=1))
    image = to_trial(record("torch", "resnet50", image=224))
    lab = Labeller([train, image])
    assert lab.label(train.config) == "hf:llama · batch 32 · seq 128 · cpu"
    assert lab.label(image.config) == "resnet50 · batch 32 · 224 px · cpu"


def test_an_unstable_generation_is_told_what_steadies_it_not_min_window_s() -> None:
    # a generation's window is one prompt batch: min_window_s does not lengthen it
    runs = generating("torch", 300.0, 12.0, 6, 3, spread=0.3)
    runs += generating("tf", 300.0, 24.0, 6, 4, spread=0.3)
    report = build(runset(runs))
    section = next(s for s in report.sections if s.title == "Generation")
    _, compared = [b for b in section.blocks if hasattr(b, "rows")]
    by_figure = {r[1].text: said(r[5]) for r in compared.rows}
    for figure, lever in [
        ("time to first token", "more windows (epochs) or more repeats"),
        ("time per output token", "(new_tokens, epochs) or more repeats"),
    ]:
        text = by_figure[figure]
        assert "unstable" in text and lever in text, text
        assert "min_window_s" not in text, text
