"""goal=accuracy's MLPerf-style log (bench.tracking.mllog), from a recorded result."""

from __future__ import annotations

import json
from pathlib import Path

from bench.core.config import BenchConfig, DataConfig, GoalConfig, ModelConfig
from bench.core.result import OK, EpochRecord, TrialResult
from bench.tracking import mllog


def _result(reached: bool) -> TrialResult:
    result = TrialResult(status=OK, framework="torch", model="lenet5", mode="train")
    result.marks = {"trial_start": 1000.0, "first_timed_step": 1010.0}
    for i, (accuracy, elapsed) in enumerate([(0.6, 3.0), (0.96, 6.0)], start=1):
        r = EpochRecord(i, 44, 1408, 2.5, 563.0, 1.0, 1.0, 1.0, 0.5)
        r.extra.update(
            test_accuracy=accuracy, eval_time_s=0.5, eval_epoch=0.5 * i, eval_elapsed_s=elapsed
        )
        result.epochs.append(r)
    result.summary["target_reached"] = 1.0 if reached else 0.0
    return result


def _lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text().splitlines()
    assert all(line.startswith(":::MLLOG ") for line in text)
    return [json.loads(line.removeprefix(":::MLLOG ")) for line in text]


def test_a_run_to_the_target_logs_its_evaluations_and_success(tmp_path: Path) -> None:
    cfg = BenchConfig(
        model=ModelConfig(name="lenet5"),
        data=DataConfig(name="digits"),
        goal=GoalConfig(name="accuracy", eval_every=0.5),
        seed=3,
        batch_size=32,
    )
    path = mllog.write(cfg, _result(True), tmp_path)
    assert path is not None and path.name == "mllog.txt"
    lines = _lines(path)
    keys = [line["key"] for line in lines]
    assert keys.index("init_stop") < keys.index("run_start") < keys.index("run_stop")
    by_key = {line["key"]: line for line in lines}
    assert by_key["seed"]["value"] == 3 and by_key["global_batch_size"]["value"] == 32
    assert by_key["opt_base_learning_rate"]["value"] == 0.01
    accuracies = [
        (line["value"], line["metadata"]["epoch_num"])
        for line in lines
        if line["key"] == "eval_accuracy"
    ]  # type: ignore[index]
    assert accuracies == [(0.6, 0.5), (0.96, 1.0)]
    assert by_key["run_start"]["time_ms"] == 1_010_000
    assert by_key["run_stop"]["time_ms"] == 1_016_000
    assert by_key["run_stop"]["metadata"]["status"] == "success"  # type: ignore[index]


def test_a_run_that_stopped_short_is_aborted_and_other_trials_get_none(tmp_path: Path) -> None:
    cfg = BenchConfig(data=DataConfig(name="digits"), goal=GoalConfig(name="accuracy"))
    path = mllog.write(cfg, _result(False), tmp_path)
    assert path is not None
    stop = [line for line in _lines(path) if line["key"] == "run_stop"][0]
    assert stop["metadata"]["status"] == "aborted"  # type: ignore[index]
    assert mllog.write(BenchConfig(), _result(True), tmp_path / "x") is None
