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
    assert not [r for r in figure_table.rows if "serve.scenario" in r[1].text]  # its column's
    assert all(r[-3].text == "VALID x6" and r[-2].text == RULES for r in figure_table.rows)
    by_figure = {r[1].text: r[5].text for r in compared.rows}
    assert by_figure["p90 latency"].startswith("torch is faster")
    assert by_figure["samples/s"].startswith("torch is faster")
    assert by_figure["highest VALID QPS"].startswith("torch is faster than tf")
    assert any(getattr(b, "name", "") == "serving_latency_vs_load" for b in section.blocks)


def test_a_serving_row_is_labelled_by_max_batch_and_samples_per_s_ratios_read_as_such() -> None:
    rate = metrics.TRIAL_SERVE_SAMPLES_PER_S
    p99, p90 = metrics.TRIAL_SERVE_LATENCY_P99_MS, metrics.TRIAL_SERVE_LATENCY_P90_MS
    runs = serving("torch", "offline", 6, 3, **{p90: 9.0, rate: 2000.0, p99: 9.0})
    runs += serving("tf", "offline", 6, 4, **{p90: 9.0, rate: 1000.0, p99: 9.0})
    section = next(s for s in build(runset(runs)).sections if s.title == "Serving")
    figure_table, compared = [b for b in section.blocks if hasattr(b, "rows")][:2]
    for row in figure_table.rows + compared.rows:
        label = row[1].text if row in figure_table.rows else row[0].text
        assert "max_batch 8" in label and "batch 32" not in label, label
    (row,) = compared.rows
    assert compared.columns[4] == "tf / torch [95% CI]"
    assert row[5].text.startswith("torch is faster")
    ratio, low, high = (
        float(v) for v in row[4].text.replace("[", "").replace("]", "").replace(",", "").split()
    )
    assert 0.45 < low <= ratio <= high < 0.55  # tf's samples/s over torch's: 0.5, not 2
    # the report's Verdicts list shows the tested ratio (time per sample: 2), and says so
    verdicts = next(s for s in build(runset(runs)).sections if s.title == "Verdicts")
    rows = [r for b in verdicts.blocks if hasattr(b, "rows") for r in b.rows]
    (listed,) = [r for r in rows if r[0].text.startswith("serving samples/s")]
    assert listed[0].text == "serving samples/s (tested as its inverse), tf vs torch"
    assert 1.8 < float(listed[2].text.split()[0]) < 2.2


# Replayed from a store: a find_peak sweep of LeNet-5 (torch, tf; Server, p99 <= 20 ms,
# 5 probes from 100 QPS) on the shared 2-core machine, each run's history of (step, value).
PEAK_HISTORY = {
    "tf": (
        [(1, 100.0), (2, 200.0), (3, 150.0), (4, 125.0), (5, 137.5)],
        [(1, 14.507), (2, 23.477), (3, 18.263), (4, 12.489), (5, 10.98)],
    ),
    "torch": (
        [(1, 100.0), (2, 50.0), (3, 25.0), (4, 12.5), (5, 6.25)],
        [(1, 31.809), (2, 42.751), (3, 53.662), (4, 17.278), (5, 16.058)],
    ),
}
PEAK_QPS = {"tf": 125.0, "torch": 0.0}


def test_the_latency_vs_load_figure_draws_every_probe_from_the_run_s_history() -> None:
    from bench.report.sections.serving import probes
    from bench.report.trials import to_trial

    runs = []
    for framework, history in PEAK_HISTORY.items():
        loads, p99s = history
        figures = {metrics.SERVE_PEAK_QPS: PEAK_QPS[framework],
                   metrics.TRIAL_SERVE_TARGET_QPS: PEAK_QPS[framework],
                   metrics.TRIAL_SERVE_LATENCY_P99_MS: 1.0}  # fmt: skip
        (run,) = serving(framework, "server", 1, 7, **figures)
        run.history = {metrics.SERVE_TARGET_QPS: loads, metrics.SERVE_LATENCY_P99_MS: p99s}
        runs.append(run)
        expected = [(q, p) for (_, q), (_, p) in zip(loads, p99s, strict=True)]
        assert probes(to_trial(run)) == expected
    # a run without the history (an older store): the trial's own point
    load, p99 = metrics.TRIAL_SERVE_TARGET_QPS, metrics.TRIAL_SERVE_LATENCY_P99_MS
    old = record("torch", "lenet5", mode="serve", metrics={load: 50.0, p99: 9.0},
                 params={"serve.scenario": "server"}, num_parameters=61_706)  # fmt: skip
    assert probes(to_trial(old)) == [(50.0, 9.0)]
    section = next(s for s in build(runset(runs)).sections if s.title == "Serving")
    (figure,) = [b for b in section.blocks if getattr(b, "name", "") == "serving_latency_vs_load"]
    assert "each find_peak probe" in figure.caption
    assert figure.caption.endswith("the latency bound (dashed): 50 ms")


def test_the_sweep_s_line_of_a_serving_trial_shows_qps_p99_and_loadgen_s_verdict() -> None:
    from bench.sweep.session import Row, format_table, serving_detail

    summary = {
        metrics.TRIAL_SERVE_SAMPLES_PER_S: 19.34,
        metrics.TRIAL_SERVE_LATENCY_P99_MS: 143.98,
        metrics.TRIAL_SERVE_TTFT_P99_MS: 120.94,
        metrics.TRIAL_SERVE_TPOT_P50_MS: 5.76,
    }
    env = {"serve.scenario": "Server", "serve.result": "INVALID (early_stopping)"}
    detail = serving_detail(summary, env)
    assert detail == ("19.3 QPS, p99 144.0 ms, TTFT p99 120.9 ms, TPOT p50 5.76 ms, "
                      "INVALID (early_stopping)")  # fmt: skip
    assert serving_detail({metrics.TRIAL_SAMPLES_PER_S: 5.0}, {}) == ""
    table = format_table(
        [Row("a", "ok", 19.8, 1.0, "r1", serving=detail), Row("b", "ok", 5.0, 1.0)]
    )
    header, _, first, second = table.splitlines()
    assert header.split()[-1] == "serving" and first.endswith(detail) and second.endswith("-")
    assert "samples/s" in header  # a served LM's rate is its queries', not tokens


def test_a_served_causal_lm_s_token_latencies_have_columns_of_their_own() -> None:
    rate, p99 = metrics.TRIAL_SERVE_SAMPLES_PER_S, metrics.TRIAL_SERVE_LATENCY_P99_MS
    plain = serving("torch", "server", 2, 9, **{rate: 20.0, p99: 7.0})
    lm = {rate: 20.0, p99: 7.0, metrics.TRIAL_SERVE_TTFT_P99_MS: 3.8,
          metrics.TRIAL_SERVE_TPOT_P50_MS: 0.76}  # fmt: skip

    def columns(runs: list) -> list[str]:
        section = next(s for s in build(runset(runs)).sections if s.title == "Serving")
        return next(b for b in section.blocks if hasattr(b, "rows")).columns

    assert "first token p99 ms" not in columns(plain)
    with_lm = columns(plain + serving("tf", "server", 2, 10, **lm))
    assert {"first token p99 ms", "per token p50 ms"} <= set(with_lm)
    # two frameworks' LMs: compared on their token latencies
    slow = {**lm, metrics.TRIAL_SERVE_TTFT_P99_MS: 7.6, metrics.TRIAL_SERVE_TPOT_P50_MS: 1.52}
    runs = serving("torch", "server", 6, 11, **lm) + serving("tf", "server", 6, 12, **slow)
    section = next(s for s in build(runset(runs)).sections if s.title == "Serving")
    compared = [b for b in section.blocks if hasattr(b, "rows")][1]
    by_figure = {r[1].text: (r[4].text, r[5].text) for r in compared.rows}
    ratio, verdict = by_figure["p99 time to first token"]
    assert 1.9 < float(ratio.split()[0]) < 2.1 and verdict.startswith("torch is faster")
    assert by_figure["median time per output token"][1].startswith("torch is faster")


def test_a_causal_lm_s_probes_are_drawn_by_the_latency_its_bound_is_on() -> None:
    from bench.report.sections.serving import probes
    from bench.report.trials import to_trial

    lm = {metrics.TRIAL_SERVE_TARGET_QPS: 4.0, metrics.TRIAL_SERVE_LATENCY_P99_MS: 800.0,
          metrics.TRIAL_SERVE_TTFT_P99_MS: 300.0}  # fmt: skip
    (run,) = serving("torch", "server", 1, 13, **lm)
    loads = [(1, 2.0), (2, 4.0), (3, 8.0)]
    run.history = {
        metrics.SERVE_TARGET_QPS: loads,
        metrics.SERVE_LATENCY_P99_MS: [(1, 700.0), (2, 800.0), (3, 2500.0)],  # whole answers
        metrics.SERVE_TTFT_P99_MS: [(1, 150.0), (2, 300.0), (3, 1900.0)],  # bounded: these
    }
    assert probes(to_trial(run)) == [(2.0, 150.0), (4.0, 300.0), (8.0, 1900.0)]
    run.history.pop(metrics.SERVE_TTFT_P99_MS)  # an older store: the trial's own TTFT point
    t = to_trial(run)
    own = (t.metric(metrics.TRIAL_SERVE_TARGET_QPS), t.metric(metrics.TRIAL_SERVE_TTFT_P99_MS))
    assert probes(t) == [own] and 290 < own[1] < 310
    section = next(s for s in build(runset([run])).sections if s.title == "Serving")
    (figure,) = [b for b in section.blocks if getattr(b, "name", "") == "serving_latency_vs_load"]
    assert "a causal LM's line is its time to first token" in figure.caption
