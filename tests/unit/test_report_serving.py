"""The report's Serving section (mode=serve): each configuration's LoadGen figures with its
verdicts and MLPerf's rules, the latency-versus-load figure, and the framework pairs'
verdicts per scenario (SingleStream's p90, Offline's samples/s, Server's highest VALID QPS)."""

from __future__ import annotations

import random

from bench.core import metrics
from bench.report import build
from tests.report_data import record, runset

RULES = "not valid under MLPerf's rules: min_duration 2 s < 600 s"


def serving(framework: str, scenario: str, n: int, seed: int, **figures: float) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        values = {k: rng.gauss(v, v * 0.01) for k, v in figures.items()}
        tags = {"bench.serve.result": "VALID", "bench.serve.rules": RULES,
                "bench.serve.policy": "max_batch=8 batch_timeout_ms=0"}  # fmt: skip
        params = {"serve.scenario": scenario, "serve.latency_bound_ms": "50"}
        out.append(record(framework, "lenet5", mode="serve", params=params, metrics=values,
                          tags=tags, num_parameters=61_706, repeat=i))  # fmt: skip
    return out


def test_serving_figures_verdicts_and_the_latency_vs_load_figure() -> None:
    p90, rate = metrics.TRIAL_SERVE_LATENCY_P90_MS, metrics.TRIAL_SERVE_SAMPLES_PER_S
    p99, load = metrics.TRIAL_SERVE_LATENCY_P99_MS, metrics.TRIAL_SERVE_TARGET_QPS
    runs = serving("torch", "single_stream", 6, 1, **{p90: 2.0, rate: 500.0, p99: 3.0})
    runs += serving("tf", "single_stream", 6, 2, **{p90: 3.0, rate: 330.0, p99: 4.0})
    runs += serving("torch", "offline", 6, 3, **{p90: 9.0, rate: 2000.0, p99: 9.0})
    runs += serving("tf", "offline", 6, 4, **{p90: 9.0, rate: 1000.0, p99: 9.0})
    peak = {metrics.SERVE_PEAK_QPS: 400.0, load: 400.0, p99: 40.0, rate: 399.0, p90: 20.0}
    runs += serving("torch", "server", 6, 5, **peak)
    runs += serving("tf", "server", 6, 6, **{**peak, metrics.SERVE_PEAK_QPS: 200.0, load: 200.0})
    report = build(runset(runs))
    section = next(s for s in report.sections if s.title == "Serving")
    tables = [b for b in section.blocks if hasattr(b, "rows")]
    figure_table, compared = tables[0], tables[1]
    assert figure_table.columns[:4] == ["Framework", "Configuration", "Scenario", "samples/s"]
    assert {r[2].text for r in figure_table.rows} == {"SingleStream", "Offline", "Server"}
    assert all(r[-3].text == "VALID x6" and r[-2].text == RULES for r in figure_table.rows)
    by_figure = {r[1].text: r[5].text for r in compared.rows}
    assert by_figure["p90 latency"].startswith("torch is faster")
    assert by_figure["samples/s"].startswith("torch is faster")
    assert by_figure["highest VALID QPS"].startswith("torch is faster than tf")
    assert any(getattr(b, "name", "") == "serving_latency_vs_load" for b in section.blocks)
