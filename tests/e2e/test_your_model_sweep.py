"""Your own model through ``python -m bench`` (docs/your-model.md): the example's CNN,
copied into the sweep's working directory, in torch and tf, one trial each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_cnn.py"


def test_a_builder_in_the_working_directory_runs_in_both_frameworks(bench) -> None:  # noqa: ANN001
    shutil.copy(EXAMPLE, bench.root / "my_cnn.py")  # imported from the working directory
    result = bench.run(
        "-m", "framework=torch,tf", "model=py", "model.name=my_cnn",
        "model.builder=my_cnn:build", "image_size=32", *TINY,
    )  # fmt: skip
    assert result.returncode == 0, result.output
    children = bench.children()
    assert sorted(c.data.params["framework.name"] for c in children) == ["tf", "torch"]
    for child in children:
        assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
        assert child.data.tags["bench.model"] == "my_cnn"
        params = child.data.params
        assert params["num_parameters"] == "5418"  # equal in both: comparable
        assert (params["model.source"], params["model.builder"]) == ("py", "my_cnn:build")
        assert len(params["model.digest"]) == 16
        assert child.data.metrics["trial_samples_per_s"] > 0
    assert len({c.data.tags["bench.config_hash"] for c in children}) == 2
