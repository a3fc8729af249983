"""A study preset end to end: seed003_distributed_cpu at scale=smoke runs every system and
mode of the study (TensorFlow all-reduce and asynchronous parameter servers, PyTorch DDP,
MXNet synchronous and asynchronous KVStore) through ``python -m bench``, and its report
opens with a verdict for every one of the study's claims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from bench.cli import CONF_DIR
from bench.report.claims import CONTRADICTED, HOLDS, INCONCLUSIVE, NOT_MEASURED

pytestmark = pytest.mark.e2e

VERDICTS = (HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED)


def test_seed003_smoke_runs_every_system_and_checks_every_claim(bench) -> None:  # noqa: ANN001
    done = bench.run("+experiment=seed003_distributed_cpu", "scale=smoke", timeout=900)
    assert done.returncode == 0, done.output[-3000:]
    children = bench.children("seed003_distributed_cpu_smoke")
    systems = {(r.data.params["framework.name"], r.data.params["distributed"]) for r in children}
    assert systems == {
        ("tf", "multiworker"),
        ("tf", "ps_async"),
        ("torch", "ddp"),
        ("mxnet", "kvstore_sync"),
        ("mxnet", "kvstore_async"),
    }
    assert all(r.data.tags.get("bench.status") == "ok" for r in children), [
        r.data.tags.get("bench.error", "")[-300:] for r in children
    ]
    assert "scale" not in children[0].data.params  # what the scale sets is logged instead
    assert children[0].data.params["steps_per_epoch"] == "2"

    found = re.search(r"Report: file://(\S+)/report\.html", done.stdout)
    assert found, done.stdout[-2000:]
    report = (Path(found.group(1)) / "report.md").read_text()
    assert report.index("## Claims") < report.index("## ", report.index("## Claims") + 3)
    preset = yaml.safe_load(
        (Path(CONF_DIR) / "experiment/seed003_distributed_cpu.yaml").read_text()
    )
    section = report[report.index("## Claims") :]
    for claim in preset["claims"]:
        row = next(
            (line for line in section.splitlines() if line.startswith(f"| {claim['claim']} |")), ""
        )
        assert row, f"no row for {claim['claim']!r}"
        assert any(f"| {v} |" in row for v in VERDICTS), row
    # one run a side: nothing can hold or be contradicted, and no claim is silently passed
    assert f"| {HOLDS} |" not in section and f"| {CONTRADICTED} |" not in section
