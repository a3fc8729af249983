"""tuning=best through the CLI: a real search (two candidates, each a child trial of real
torch), its pick logged and reused by the configuration's next repeat from the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_a_search_runs_once_and_every_repeat_uses_its_pick(
    bench,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))  # the CLI's env derives from it
    done = bench.run(
        "-m", "model=lenet5", "framework=torch", "tuning=best", "tuning.keys=[threads]",
        "tuning.probe_s=0.2", "repeats=2", "epochs=1", "batch_size=16", "warmup_steps=1",
        "steps_per_epoch=5",
    )  # fmt: skip
    assert done.returncode == 0, done.output
    children = sorted(bench.children(), key=lambda r: r.data.tags["bench.repeat"])
    assert [c.data.tags["bench.status"] for c in children] == ["ok", "ok"]
    first, second = (c.data for c in children)
    assert first.tags["bench.tuning_source"] == "search"
    assert second.tags["bench.tuning_source"].startswith("cache ")
    tuned = {k: v for k, v in first.params.items() if k.startswith("tuned.")}
    assert tuned and tuned == {k: v for k, v in second.params.items() if k.startswith("tuned.")}
    assert first.params["tuning.name"] == "best" and first.params["threads"] == "0"
    assert first.metrics["tuning_search_s"] > second.metrics["tuning_search_s"]
    client = bench.client()
    names = {a.path for a in client.list_artifacts(children[0].info.run_id)}
    assert {"tuning.json", "tuning.txt"} <= names
    path = client.download_artifacts(children[0].info.run_id, "tuning.json")
    table = json.loads(Path(path).read_text())
    assert table["source"] == "search" and table["table"][0]["settings"] == {}
    assert all(r["status"] == "ok" and len(r["rates"]) == 3 for r in table["table"])
    assert sum(r["chosen"] for r in table["table"]) == 1
    assert (tmp_path / "cache" / "tuning").is_dir()
