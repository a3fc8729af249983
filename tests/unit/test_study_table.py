"""scripts/study_table.py: each claim's row (verdict, interval, runs, commit, date) and the
version of the claim it ran, from fabricated runs (the store is read by bench.tracking)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from typing import Any

from tests.report_data import record

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "study_table", ROOT / "scripts" / "study_table.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["study_table"] = module
    spec.loader.exec_module(module)
    return module


def _runs() -> list[Any]:
    rng = random.Random(0)
    out = []
    for framework, rate in (("torch", 120.0), ("tf", 100.0)):
        for i in range(6):
            r = record(framework, rate=rng.gauss(rate, 1.0), repeat=i)
            r.tags["mlflow.source.git.commit"] = "abcdef0123456789"
            out.append(r)
    return out


def test_each_row_says_its_verdict_interval_commit_and_claims_version() -> None:
    table = _script()
    claim = {"claim": "torch faster", "source": "seed001, section VI-A, Fig. 1: 'x'",
             "kind": "average", "faster": "torch", "slower": "tf"}  # fmt: skip
    older = {**claim, "kind": "comparison"}
    rows = table.rows(_runs(), [claim, older], [claim])
    assert [r[2] for r in rows] == ["holds here", "holds here"]
    assert "geometric mean over 1 configuration(s) = 1.2" in rows[0][3] and "95% CI" in rows[0][3]
    assert rows[0][1] == "1, section VI-A, Fig. 1"
    assert rows[0][4] == "12" and rows[0][5] == "abcdef0"
    assert rows[0][7] == f"{table.version(claim)} (current)"
    assert rows[1][7] == f"{table.version(older)} (older)"
    assert table.version(claim) != table.version(older)
    lines = table.markdown(rows).splitlines()
    assert (
        lines[0].startswith("| claim | source | verdict | ratio and interval") and len(lines) == 4
    )


def test_the_presets_claims_are_found_by_experiment_name() -> None:
    table = _script()
    preset, items = table.preset_claims("seed003_distributed_cpu_machine")
    assert preset == "seed003_distributed_cpu" and len(items) >= 10
    assert table.preset_claims("no_such_smoke") == ("", [])
