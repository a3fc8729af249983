"""Your own causal LM through ``python -m bench`` (docs/your-model.md): the example's tiny
decoder-only LM, copied into the sweep's working directory, trained in torch and tf (next-token
loss on synthetic tokens) as one sweep, one trial each, the same network in both."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny_lm.py"


def test_a_causal_lm_of_your_own_trains_in_both_frameworks(bench) -> None:  # noqa: ANN001
    shutil.copy(EXAMPLE, bench.root / "my_lm.py")  # imported from the working directory
    result = bench.run(
        "-m", "framework=torch,tf", "model=py", "model.task=causal_lm", "model.name=my_lm",
        "model.builder=my_lm:build", "model.hidden=64", "model.intermediate=256",
        "model.seq_len=16", *TINY,
    )  # fmt: skip
    assert result.returncode == 0, result.output
    children = bench.children()
    assert sorted(c.data.params["framework.name"] for c in children) == ["tf", "torch"]
    for child in children:
        assert child.data.tags["bench.status"] == "ok", child.data.tags.get("bench.error")
        params = child.data.params
        # V*h + P*h + 2 blocks + final norm + head (examples/tiny_lm.py): equal, comparable
        assert params["num_parameters"] == "260864"
        assert (params["model.source"], params["model.task"]) == ("py", "causal_lm")
        assert (params["model.hidden"], params["model.seq_len"]) == ("64", "16")
        assert len(params["model.digest"]) == 16
        assert child.data.metrics["trial_samples_per_s"] > 0
        assert child.data.metrics["final_loss"] > 0
    assert len({c.data.tags["bench.config_hash"] for c in children}) == 2
