"""examples/api_example.py runs as documented: a two-framework sweep through bench.run,
its runs and verdicts read back as pandas tables, and bad input raised in bench's words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_the_api_example_runs(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "api_example.py"), store],
        capture_output=True, text=True, cwd=tmp_path, timeout=900, check=False,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("ok") >= 4, out  # two frameworks, two repeats
    assert "training time" in out or "tf vs torch" in out or "torch" in out, out
    assert "refused: bench: modle: no such key or group; did you mean model=lenet5?" in out, out
