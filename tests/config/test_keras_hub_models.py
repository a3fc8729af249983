"""Tier 1: model=hf under framework=tf (keras-hub) refuses, before any trial (exit 2, one
line naming the key), what its backbone cannot build as transformers does, and a TF version
whose environment has no keras-hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.config.test_bad_input_table import refused

HF, TF = "model=hf", "framework=tf"
CASES = [
    ([HF, TF, "model.config.attention_bias=true"],
     "model.config.attention_bias: keras-hub's Llama3Backbone (framework=tf) builds llama "
     "with attention_bias=False only, got True"),
    ([HF, TF, "model.name=gpt2", "model.config.layer_norm_epsilon=1e-6"],
     "model.config.layer_norm_epsilon: keras-hub's GPT2Backbone (framework=tf) builds gpt2 "
     "with layer_norm_epsilon=1e-05 only"),
    ([HF, TF, "model.name=mistral", "model.config.tie_word_embeddings=true"],
     "model.config.tie_word_embeddings: keras-hub's MistralBackbone"),
    ([HF, "framework=mxnet"],
     "model.name: model=hf builds llama with transformers for framework=torch; framework=mxnet"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_refused_in_one_line_naming_its_key(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    err = refused(args, tmp_path, monkeypatch, capsys)
    assert expected in err, err


@pytest.mark.slow
def test_the_tf_probe_answers_from_the_trial_interpreter(tmp_path: Path) -> None:
    """The probe the host runs with the trial's interpreter: keras-hub imports here and the
    default sizes map; an override the backbone would drop is its one line."""
    import json
    import subprocess
    import sys

    fields = {"name": "qwen2", "vocab_size": 4096, "hidden": 256, "layers": 4, "heads": 4,
              "intermediate": 1024, "max_positions": 512, "config": {}}  # fmt: skip
    ask = [sys.executable, "-m", "bench.trial.models.keras_hub_lm"]
    done = subprocess.run([*ask, json.dumps(fields)], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "BENCH_PROBE {}"
    fields["config"] = {"use_sliding_window": True}
    done = subprocess.run([*ask, json.dumps(fields)], capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("BENCH_PROBE "))
    assert answer["problem"].startswith("model.config.use_sliding_window: keras-hub's QwenBackbone")
