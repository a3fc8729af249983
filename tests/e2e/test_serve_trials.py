"""mode=serve through ``python -m bench``: LeNet-5 served under MLPerf's real LoadGen, one
trial per scenario (torch) and a tf Server trial, in ONE sweep whose store every assertion
reads; each LoadGen run lasts a fraction of a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Bench

pytestmark = pytest.mark.e2e
pytest.importorskip("mlperf_loadgen")

SERVE = [
    "mode=serve", "model=lenet5", "batch_size=4", "warmup_steps=1", "threads=1",
    "serve.max_batch=4", "serve.min_duration_s=0.3", "serve.min_queries=16",
    "serve.target_qps=40", "serve.latency_bound_ms=2000", "telemetry.enabled=false",
]  # fmt: skip
SCENARIOS = ("single_stream", "multi_stream", "server", "offline")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Bench, Any, list[Any]]:
    bench = Bench(tmp_path_factory.mktemp("serve"))
    result = bench.run("-m", "framework=torch", f"serve.scenario={','.join(SCENARIOS)}", *SERVE)
    assert result.returncode == 0, result.output
    return bench, result, bench.children()


def by_scenario(children: list[Any]) -> dict[str, Any]:
    return {c.data.params["serve.scenario"]: c for c in children}


def test_one_ok_trial_per_scenario_with_loadgen_s_verdict(sweep) -> None:  # noqa: ANN001
    _, result, children = sweep
    runs = by_scenario(children)
    assert sorted(runs) == sorted(SCENARIOS)
    for scenario, run in runs.items():
        tags, metrics = run.data.tags, run.data.metrics
        assert tags["bench.status"] == "ok", tags.get("bench.error")
        assert tags["bench.serve.result"].split(" ")[0] in ("VALID", "INVALID")
        assert tags["bench.serve.rules"].startswith("not valid under MLPerf's rules")
        assert tags["bench.serve.policy"] == "max_batch=4 batch_timeout_ms=0"
        assert metrics["trial_serve_valid"] in (0.0, 1.0)
        assert 0 < metrics["trial_serve_latency_p50_ms"] <= metrics["trial_serve_latency_p99_ms"]
        assert metrics["trial_serve_samples_per_s"] > 0
        assert 1 <= metrics["trial_serve_mean_batch"] <= 4
        if scenario == "single_stream":  # one sample a query, one query at a time
            assert metrics["trial_serve_mean_batch"] == 1
    assert "Server" in runs["server"].data.tags["bench.serve.scenario"]
    assert runs["server"].data.metrics["trial_serve_target_qps"] == 40


def test_the_summary_file_is_an_artifact_and_agrees_with_mlflow(sweep, tmp_path: Path) -> None:  # noqa: ANN001
    from bench.trial.serve import parse_summary

    bench, _, children = sweep
    client = bench.client()
    for run in children:
        files = {f.path for f in client.list_artifacts(run.info.run_id, "loadgen/run1")}
        assert {
            "loadgen/run1/mlperf_log_summary.txt",
            "loadgen/run1/mlperf_log_detail.txt",
        } <= files
        local = client.download_artifacts(
            run.info.run_id, "loadgen/run1/mlperf_log_summary.txt", str(tmp_path)
        )
        summary = parse_summary(Path(local).read_text())
        metrics = run.data.metrics
        assert metrics["trial_serve_latency_p99_ms"] == pytest.approx(summary.latency_ms[99.0])
        assert metrics["trial_serve_valid"] == float(summary.valid)
        assert run.data.tags["bench.serve.result"] == summary.verdict()


def test_the_run_s_history_holds_the_loadgen_run_as_a_window(sweep) -> None:  # noqa: ANN001
    bench, _, children = sweep
    history = bench.client().get_metric_history(children[0].info.run_id, "serve_latency_p99_ms")
    assert [m.step for m in history] == [1]
    assert history[0].value == children[0].data.metrics["trial_serve_latency_p99_ms"]


# A tiny llama (as tests/e2e/test_hf_lm_trials.py's) served under Server with LoadGen's token
# latencies, in torch (transformers) and tf (keras-hub): one sweep, half a second of LoadGen.
LM = [
    "mode=serve", "model=hf", "model.name=llama", "model.seq_len=16", "model.vocab_size=128",
    "model.hidden=32", "model.layers=2", "model.heads=2", "model.intermediate=64",
    "model.config.num_key_value_heads=1", "prompt_len=8", "new_tokens=5", "warmup_steps=1",
    "threads=1", "serve.max_batch=2", "serve.min_duration_s=0.3", "serve.min_queries=16",
    "serve.target_qps=20", "serve.latency_bound_ms=2000", "telemetry.enabled=false",
]  # fmt: skip
TOKEN_FIGURES = [
    f"trial_serve_{name}_{p}_ms"
    for name in ("time_to_first_token", "time_per_output_token")
    for p in ("p50", "p90", "p99")
]


def test_a_causal_lm_is_served_with_loadgen_s_token_latencies(bench: Bench, tmp_path: Path) -> None:
    from bench.trial.serve import parse_summary

    result = bench.run("-m", "framework=torch,tf", *LM)
    assert result.returncode == 0, result.output
    runs = {c.data.params["framework.name"]: c for c in bench.children()}
    assert sorted(runs) == ["tf", "torch"]
    client = bench.client()
    for run in runs.values():
        tags, metrics = run.data.tags, run.data.metrics
        assert tags["bench.status"] == "ok", tags.get("bench.error")
        assert tags["bench.serve.token_bounds"].startswith("p99 time to first token <= 2000 ms")
        assert (run.data.params["prompt_len"], run.data.params["new_tokens"]) == ("8", "5")
        local = client.download_artifacts(
            run.info.run_id, "loadgen/run1/mlperf_log_summary.txt", str(tmp_path)
        )
        summary = parse_summary(Path(local).read_text())
        for name in TOKEN_FIGURES:
            assert metrics[name] > 0, name
        # MLflow's figures are LoadGen's
        assert metrics["trial_serve_time_to_first_token_p99_ms"] == pytest.approx(
            summary.first_token_ms[99.0]
        )
        assert metrics["trial_serve_time_per_output_token_p50_ms"] == pytest.approx(
            summary.per_token_ms[50.0]
        )
        assert metrics["trial_serve_tokens_per_s"] == pytest.approx(summary.tokens_per_s)
        # the first token comes before the whole answer
        assert (
            metrics["trial_serve_time_to_first_token_p50_ms"]
            < metrics["trial_serve_latency_p50_ms"]
        )


def test_a_served_model_at_best_is_searched_by_its_scenario_s_figure(
    bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tuning=best under mode=serve: the incumbent probed (three LoadGen runs in a child
    trial), the rest skipped by the spent budget, the trial run at the pick, the objective
    logged (docs/tuning.md, Serving)."""
    import json

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    done = bench.run(
        "framework=torch", "serve.scenario=offline", "tuning=best", "tuning.budget_s=0.01",
        "tuning.probe_s=0.2", *SERVE,
    )  # fmt: skip
    assert done.returncode == 0, done.output
    (run,) = bench.children()
    tags, params = run.data.tags, run.data.params
    assert tags["bench.status"] == "ok", tags.get("bench.error")
    assert tags["bench.tuning_objective"] == "Offline samples/s"
    assert params["tuned.max_batch"] == "4"  # set by the test's overrides: fixed, not searched
    path = bench.client().download_artifacts(run.info.run_id, "tuning.json")
    table = json.loads(Path(path).read_text())
    assert table["objective"] == "Offline samples/s" and table["fixed"]["serve.max_batch"] == 4
    first = table["table"][0]
    assert first["settings"] == {} and first["chosen"] and len(first["rates"]) == 3
    assert min(first["rates"]) > 0
    assert {r["note"] for r in table["table"][1:]} == {"budget"}
