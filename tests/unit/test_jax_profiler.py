"""framework=jax's breakdown and operator profile (issue 35), on a real short trace of a
small model: each check in a child process (Keras picks its backend once per process, and
this one may hold it on TensorFlow's)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, sys, tempfile
    from pathlib import Path
    from bench.trial import frameworks, profiling
    from bench.core.config import (
        BenchConfig, DataConfig, FrameworkConfig, ModelConfig, OptimizerConfig,
    )
    from bench.trial.data import synthetic
    from bench.trial.profiling import operators

    cfg = BenchConfig(
        framework=FrameworkConfig(name="jax"),
        model=ModelConfig(name=sys.argv[2], source=sys.argv[1]),
        mode=sys.argv[3], batch_size=8, image_size=32, data=DataConfig(num_batches=2),
        optimizer=OptimizerConfig(name="adam", lr=0.001),
    )
    frameworks.before_import(cfg, 1)
    adapter = frameworks.load("jax")
    adapter.configure(cfg, 1)
    session = adapter.prepare(cfg, synthetic(cfg))
    session.step(session.next_batch())
    session.sync()
    profiler = profiling.load("jax")
    out = {"breakdown": profiling.breakdown(profiler, session, cfg, 6),
           "method": profiler.method(cfg)}
    with tempfile.TemporaryDirectory() as tmp:
        got = profiler.profile(session, cfg, 2, Path(tmp))
        out["trace"] = [str(p.relative_to(tmp)) for p in Path(tmp).rglob("*.xplane.pb")]
    rows = operators.table(got.ops)
    out["timeline"] = got.timeline
    out["rows"] = [[r.operator, r.category, r.calls, r.self_ms] for r in rows]
    out["categories"] = operators.by_category(rows)
    print(json.dumps(out))
    """
)


def run(source: str, model: str, mode: str = "train") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, source, model, mode],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("source", ["bench", "flax"])
def test_lenet5_training_splits_into_four_phases_and_profiles_into_categories(source: str) -> None:
    """Keras' layer scopes (model.source=bench) and Flax's traced functions (flax) both lead
    each XLA instruction to its category, forward and backward apart."""
    out = run(source, "lenet5")
    parts = out["breakdown"]
    for phase in ("data", "forward", "backward", "optimizer"):
        assert f"time_{phase}_ms" in parts, parts
    assert parts["time_forward_ms"] > 0 and parts["time_step_ms"] > 0
    assert parts["breakdown_sum_pct"] == pytest.approx(
        100
        * sum(parts[f"time_{p}_ms"] for p in ("data", "forward", "backward", "optimizer"))
        / parts["time_step_ms"]
    )
    assert "derived" in out["method"] and "fuses" in out["method"]
    assert out["timeline"] == "host" and out["trace"], out
    assert all(p.startswith("jax_profile/") for p in out["trace"])
    categories = out["categories"]
    for category in ("convolution", "convolution backward", "matmul", "optimizer update"):
        assert categories.get(category, 0) > 0, (category, categories)
    operators = {(op, category) for op, category, _, _ in out["rows"]}
    assert ("conv_general_dilated", "convolution") in operators
    assert ("conv_general_dilated", "convolution backward") in operators
    assert ("dot_general", "matmul") in operators
    # Most time is named: what lands in "other" is XLA's own bookkeeping, not the model.
    total = sum(categories.values())
    assert categories.get("other", 0) + categories.get("other backward", 0) < 0.5 * total


def test_a_flax_resnets_batch_norm_is_found_through_its_traced_functions() -> None:
    out = run("flax", "resnet18")
    categories = out["categories"]
    assert categories.get("batch norm", 0) > 0 and categories.get("batch norm backward", 0) > 0
    assert categories.get("activation", 0) > 0, categories


def test_inference_has_data_and_forward_only() -> None:
    out = run("bench", "lenet5", "infer")
    parts = out["breakdown"]
    assert "time_forward_ms" in parts and "time_backward_ms" not in parts
    assert "derived" not in out["method"]
    assert not any(category.endswith("backward") for category in out["categories"])
    assert out["categories"].get("convolution", 0) > 0
