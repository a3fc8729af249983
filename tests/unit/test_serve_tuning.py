"""tuning=best under mode=serve below the CLI: the serving space (the batching policy's
max_batch within its bound), each scenario's objective and its direction, the probe trial
(three LoadGen runs, run for real around a fake model), the pick applied and cached, and
what stays refused (fake probes: no child process, no framework)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from bench.checks.config import rules, said
from bench.core import metrics
from bench.core.config import BenchConfig, FrameworkConfig, ModelConfig, ServeConfig, TuningConfig
from bench.core.result import OK, EpochRecord, TrialResult
from bench.trial import tuning
from bench.trial.frameworks import spaces
from bench.trial.tuning import cache
from bench.trial.tuning.search import (
    PROBE_QUERIES,
    PROBE_WINDOWS,
    _row,
    objective,
    probe_config,
    search,
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def served(scenario: str, framework: str = "torch", **serving: object) -> BenchConfig:
    return BenchConfig(
        framework=FrameworkConfig(name=framework),
        model=ModelConfig(name="lenet5"),
        mode="serve",
        serve=ServeConfig(scenario=scenario, **serving),  # type: ignore[arg-type]
        tuning=TuningConfig(name="best", probe_s=0.1),
    )


def serving_result(figures: list[float], metric: str) -> TrialResult:
    """A probe trial's result: one window per LoadGen run, ``metric`` at each figure."""
    r = TrialResult(status=OK, framework="torch", model="lenet5", mode="serve")
    for i, x in enumerate(figures):
        rec = EpochRecord(i + 1, 10, 80, 1.0, 80.0, 1.0, 1.0, 1.0)
        rec.extra[metric] = x
        r.epochs.append(rec)
    return r


class ServingProbe:
    """Probe results by the settings a candidate changes (serve.max_batch among them)."""

    def __init__(self, metric: str, table: dict[str, list[float]], default: list[float]) -> None:
        self.metric, self.table, self.default = metric, table, default
        self.configs: list[BenchConfig] = []

    def __call__(self, cfg: BenchConfig, timeout_s: float) -> TrialResult | str:
        self.configs.append(cfg)
        changed = {
            k: spaces.value(cfg, k)
            for k, d in spaces.SEARCHABLE.items()
            if spaces.value(cfg, k) != d
        }
        label = ",".join(f"{k}={v}" for k, v in changed.items())
        return serving_result(self.table.get(label, self.default), self.metric)


def test_each_scenario_searches_the_batch_bound_it_can_use() -> None:
    def sizes(cfg: BenchConfig) -> tuple[object, ...]:
        found = [k for k in spaces.space(cfg, 4, False, True) if k.key == "serve.max_batch"]
        return found[0].values if found else ()

    assert sizes(served("offline")) == (16, 32, 4)
    assert sizes(served("server")) == (16, 32, 4)
    assert max(sizes(served("server"))) == spaces.MAX_BATCH_BOUND
    assert sizes(served("single_stream")) == ()  # one sample a query: a batch of one
    assert sizes(served("multi_stream")) == (4,)  # 8 samples a query: nothing above 8
    assert sizes(served("multi_stream", samples_per_query=16)) == (16, 4)
    assert sizes(dataclasses.replace(served("offline"), mode="infer")) == ()
    # a bound the user set is fixed; tuning.keys narrows the search to it
    assert spaces.fixed(served("offline", max_batch=16)) == {"serve.max_batch": 16}
    assert "serve.max_batch" not in {k.key for k in tuning.knobs(served("offline", max_batch=16))}
    only = dataclasses.replace(
        served("offline"), tuning=TuningConfig(name="best", keys=["serve.max_batch"])
    )
    assert [k.key for k in tuning.knobs(only)] == ["serve.max_batch"]


def test_each_scenario_has_its_figure_and_latencies_win_by_being_lower() -> None:
    assert objective(served("offline")).metric == metrics.SERVE_SAMPLES_PER_S
    assert not objective(served("offline")).lower
    assert objective(served("single_stream")).metric == metrics.SERVE_LATENCY_P90_MS
    for scenario in ("single_stream", "multi_stream", "server"):
        assert objective(served(scenario)).lower
    assert objective(served("server")).metric == metrics.SERVE_LATENCY_P99_MS
    assert objective(dataclasses.replace(served("offline"), mode="train")).metric == ""

    cfg = served("single_stream")
    knobs = [spaces.Knob("threads", (1,), ""), spaces.Knob("onednn", ("off",), "")]
    p90 = metrics.SERVE_LATENCY_P90_MS
    # threads=1 is faster (lower p90 in every window), onednn=off slower: a samples/s rule
    # would take the slower one
    probe = ServingProbe(
        p90, {"threads=1": [2.0, 2.1, 2.2], "threads=1,onednn=off": [9.0] * 3}, [5.0, 5.1, 5.2]
    )
    pick, rows = search(cfg, knobs, probe, refused={})
    assert pick == {"threads": 1}
    assert rows[0].rates == [5.0, 5.1, 5.2]  # the figure itself, in ms
    # overlapping windows keep the incumbent, as training's rule does
    probe = ServingProbe(p90, {"threads=1": [4.9, 5.3, 5.0]}, [5.0, 5.1, 5.2])
    assert search(cfg, knobs[:1], probe, refused={})[0] == {}


def test_a_serving_probe_is_three_short_loadgen_performance_runs() -> None:
    cfg = served("server", mode="find_peak", min_duration_s=5.0)
    probe = probe_config(cfg, {"serve.max_batch": 16, "threads": 1})
    s = probe.serve
    assert (s.mode, s.runs, s.max_batch, probe.threads) == ("performance", PROBE_WINDOWS, 16, 1)
    assert s.min_duration_s == cfg.tuning.probe_s and s.min_queries == PROBE_QUERIES
    assert s.target_qps == cfg.serve.target_qps and s.latency_bound_ms == cfg.serve.latency_bound_ms
    assert probe_config(served("offline"), {}).serve.min_queries == 0  # Offline: one query
    assert probe_config(served("single_stream", min_queries=30), {}).serve.min_queries == 30
    assert probe.tuning.name == "default" and not probe.telemetry.enabled


class FakeSession:
    """A served model: 0.5 ms a batch, its outputs the first 4 features."""

    def predict(self, x: np.ndarray) -> np.ndarray:
        time.sleep(0.0005)
        return x[:, :4]

    def sync(self) -> None:
        pass


def test_a_probe_trial_runs_its_loadgen_runs_and_each_is_a_window(tmp_path: Path) -> None:
    pytest.importorskip("mlperf_loadgen")
    from bench.trial import serve

    cfg = dataclasses.replace(served("offline", max_batch=4), warmup_steps=1)
    probe = probe_config(cfg, {})
    result = TrialResult(status=OK, framework="torch", model="lenet5", mode="serve")
    lib = serve.Library(np.eye(16, dtype=np.float32), np.arange(16) % 4)
    records = serve.serve(result, FakeSession(), lib, probe, None, None, tmp_path)
    assert len(records) == PROBE_WINDOWS
    assert sorted(p.name for p in (tmp_path / "loadgen").iterdir()) == ["run1", "run2", "run3"]
    assert result.epochs == records  # in result.json, where a probe's parent reads them
    row = _row({}, result, 1.0, objective(probe))
    assert row.status == OK and len(row.rates) == PROBE_WINDOWS and min(row.rates) > 0
    assert row.rates == [r.extra[metrics.SERVE_SAMPLES_PER_S] for r in records]
    # a window without the figure is not ranked as zero: the candidate is an error
    del records[1].extra[metrics.SERVE_SAMPLES_PER_S]
    assert _row({}, result, 1.0, objective(probe)).status == "error"


def test_the_pick_is_applied_logged_and_cached(tmp_path: Path) -> None:
    cfg = served("offline")
    rate = metrics.SERVE_SAMPLES_PER_S
    probe = ServingProbe(rate, {"serve.max_batch=16": [900.0, 910.0, 920.0]}, [500.0, 510.0, 520.0])
    tuned = tuning.resolve(cfg, tmp_path, probe)
    assert tuned.pick.get("serve.max_batch") == 16 and tuned.cfg.serve.max_batch == 16
    assert tuned.params()["max_batch"] == "16"
    result = TrialResult(status=OK, framework="torch", model="lenet5", mode="serve")
    result.tuned = tuned.params()
    assert TrialResult.from_dict(result.to_dict()).tuned["max_batch"] == "16"  # a valid param
    text = (tmp_path / tuning.TABLE_TEXT).read_text()
    assert "Offline samples/s" in text and "serve.max_batch=16" in text and "chosen" in text
    # the repeat reads the cached pick, which is a sound entry
    again = tuning.resolve(dataclasses.replace(cfg, repeat=1), None, probe)
    assert again.source.startswith("cache") and again.cfg.serve.max_batch == 16
    assert cache.valid_pick({"serve.max_batch": 16}) and not cache.valid_pick({"serve.x": 1})


def test_serving_at_best_is_checked_and_a_causal_lm_stays_refused() -> None:
    assert not [p for p in said(rules(served("server", mode="find_peak"))) if "tuning" in p]
    model = ModelConfig(name="llama", source="hf", task="causal_lm")
    lm = dataclasses.replace(served("server"), model=model, prompt_len=8, new_tokens=4)
    assert [p for p in said(rules(lm)) if p.startswith("tuning: best searches serving")]


def test_served_runs_at_best_are_compared_in_the_serving_section_not_by_time_per_sample() -> None:
    from bench.report import build
    from bench.report.sections import Context, at_best
    from bench.report.trials import to_trial
    from tests.report_data import record, runset

    runs = []
    for repeat in range(3):
        for tuning_name, p90 in (("default", 4.0), ("best", 2.0)):
            params = {"serve.scenario": "single_stream", "tuning.name": tuning_name}
            figures = {metrics.TRIAL_SERVE_LATENCY_P90_MS: p90 + 0.01 * repeat}
            runs.append(record("torch", "lenet5", mode="serve", params=params, metrics=figures,
                               rate=300.0, repeat=repeat, num_parameters=61_706))  # fmt: skip
    assert at_best(Context([to_trial(r) for r in runs])) is None
    section = next(s for s in build(runset(runs)).sections if s.title == "Serving")
    table = next(b for b in section.blocks if hasattr(b, "rows"))
    labels = [r[1].text for r in table.rows]
    assert len(labels) == 2 and any("tuning.name=best" in label for label in labels)
