"""framework=jax's breakdown and profiler through ``python -m bench`` (issue 35): the four
phases logged with the tag that says which are derived, the operator table in the common
categories, and JAX's trace kept as an artifact."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

PARTS = ("data", "forward", "backward", "optimizer")


def test_jax_breakdown_and_profile_are_logged(bench, tmp_path: Path) -> None:  # noqa: ANN001
    result = bench.run(
        "framework=jax",
        "model=lenet5",
        "batch_size=8",
        "epochs=1",
        "steps_per_epoch=5",
        "warmup_steps=1",
        "threads=1",
        "breakdown=true",
        "profile=true",
    )
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    metrics, tags = child.data.metrics, child.data.tags
    assert tags["bench.status"] == "ok", tags.get("bench.error")
    assert all(f"time_{p}_ms" in metrics for p in PARTS), metrics
    assert metrics["time_forward_ms"] > 0 and metrics["time_step_ms"] > 0
    assert "backward derived" in tags["bench.breakdown_method"]
    assert tags["bench.profile_timeline"] == "host"
    assert metrics["op_convolution_ms"] > 0 and metrics["op_convolution_backward_ms"] > 0
    assert metrics["flops_per_sample"] == 1_303_440  # torch's count for lenet5 at 32 px
    client = bench.client()
    artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"operators.csv", "operators.md", "jax_profile"} <= artifacts, artifacts
    table = Path(client.download_artifacts(child.info.run_id, "operators.md", str(tmp_path)))
    assert "`conv_general_dilated` | convolution backward" in table.read_text()
