"""The claim checker (bench.report.claims) on constructed runs with known answers: a true
claim holds, a false one is contradicted, too few runs are inconclusive, a metric the runs
lack is not measured here, and a malformed claim is refused naming it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bench.cli.report import main as report_main
from bench.report import build, claims
from bench.report.trials import to_trial
from tests.report_data import record, runset
from tests.stores import new_store


def rates(framework: str, rate: float, n: int, seed: int, **kw: Any) -> list[Any]:
    rng = random.Random(seed)
    return [record(framework, "resnet50", rate=rng.gauss(rate, rate * 0.01), repeat=i, **kw)
            for i in range(n)]  # fmt: skip


def verdict(claim: dict[str, Any], records: list[Any]) -> claims.Checked:
    (parsed,) = claims.parse([claim])
    return claims.check(parsed, [to_trial(r) for r in records])


FASTER = {"kind": "comparison", "faster": "torch", "slower": "tf", "where": {"mode": "train"}}


def test_a_comparison_holds_is_contradicted_or_inconclusive_as_the_runs_say() -> None:
    runs = rates("torch", 110.0, 10, 1) + rates("tf", 100.0, 10, 2)  # torch 10% faster
    held = verdict(FASTER, runs)
    assert held.verdict == claims.HOLDS and held.runs == 20
    assert "tf/torch ms_per_sample = 1.1" in held.effect
    assert verdict({**FASTER, "by_at_least_pct": 5}, runs).verdict == claims.HOLDS
    assert verdict({**FASTER, "by_at_least_pct": 50}, runs).verdict == claims.CONTRADICTED
    reverse = verdict({**FASTER, "faster": "tf", "slower": "torch"}, runs)
    assert reverse.verdict == claims.CONTRADICTED
    few = rates("torch", 110.0, 2, 3) + rates("tf", 100.0, 2, 4)
    inconclusive = verdict(FASTER, few)
    assert inconclusive.verdict == claims.INCONCLUSIVE
    assert "not tested" in inconclusive.effect


def test_a_comparison_holds_only_where_every_configuration_agrees() -> None:
    small = rates("torch", 110.0, 8, 1, batch=32) + rates("tf", 100.0, 8, 2, batch=32)
    large = rates("torch", 90.0, 8, 3, batch=64) + rates("tf", 100.0, 8, 4, batch=64)
    found = verdict(FASTER, small + large)
    assert found.verdict == claims.CONTRADICTED
    assert "batch_size=64" in found.effect and "batch_size=32" not in found.effect


def infer_runs(rate_at: Any, metrics_at: Any = None, repeats: int = 2) -> list[Any]:
    out = []
    for batch in (1, 2, 4, 8, 16):
        for i in range(repeats):
            metrics = metrics_at(batch, i) if metrics_at else None
            out.append(record("torch", "resnet50", mode="infer", batch=batch, repeat=i,
                              rate=rate_at(batch, i), metrics=metrics))  # fmt: skip
    return out


TREND = {"kind": "trend", "metric": "ms_per_sample", "against": "batch_size",
         "direction": "decreases", "where": {"mode": "infer"}}  # fmt: skip


def test_a_trend_holds_or_is_contradicted() -> None:
    runs = infer_runs(lambda b, i: 100.0 * b**0.5 + i)  # faster per sample with the batch
    assert verdict(TREND, runs).verdict == claims.HOLDS
    assert verdict({**TREND, "direction": "increases"}, runs).verdict == claims.CONTRADICTED
    few = verdict({**TREND, "up_to": 2}, runs)  # 2 values
    assert few.verdict == claims.INCONCLUSIVE and "3 or more values of batch_size" in few.effect
    # A configuration with 2 batch sizes shows no trend either way: it is left out, not
    # counted against the claim (seed001's CPU cells at 2 sizes beside Fig. 4's series).
    two = [record("torch", "vgg16", mode="infer", batch=b, repeat=i, rate=100.0 + i)
           for b in (8, 32) for i in range(2)]  # fmt: skip
    found = verdict(TREND, runs + two)
    assert found.verdict == claims.HOLDS, found.effect


INDEPENDENT = {"kind": "independence", "metric": "power_w", "against": "batch_size",
               "margin_pct": 10, "where": {"mode": "infer"}}  # fmt: skip


def test_independence_needs_the_interval_inside_the_margin() -> None:
    rng = random.Random(5)
    flat = infer_runs(lambda b, i: 100.0, lambda b, i: {"power_w": rng.gauss(200, 1)}, 4)
    assert verdict(INDEPENDENT, flat).verdict == claims.HOLDS
    rising = infer_runs(lambda b, i: 100.0, lambda b, i: {"power_w": 100.0 + 20 * b + i}, 4)
    assert verdict(INDEPENDENT, rising).verdict == claims.CONTRADICTED
    few = infer_runs(lambda b, i: 100.0, lambda b, i: {"power_w": 200.0 + i}, 1)
    assert verdict(INDEPENDENT, few).verdict == claims.INCONCLUSIVE


def test_a_gpu_metric_on_cpu_runs_is_not_measured_here() -> None:
    runs = infer_runs(lambda b, i: 100.0)  # no power_w: CPU runs
    found = verdict(INDEPENDENT, runs)
    assert found.verdict == claims.NOT_MEASURED
    assert "none of the 10 matching runs has power_w" in found.effect
    assert verdict({**FASTER, "where": {"model": "vgg16"}}, runs).verdict == claims.NOT_MEASURED


@pytest.mark.parametrize(
    ("claim", "said"),
    [
        ({"kind": "rumour"}, "kind: one of comparison, majority, trend, independence"),
        ({"kind": "comparison", "faster": "torch"}, "slower: missing"),
        ({**FASTER, "direction": "up"}, "direction: not a field of a comparison claim"),
        ({**TREND, "direction": "sideways"}, "direction: decreases or increases"),
        ({**INDEPENDENT, "margin_pct": 0}, "margin_pct: above 0"),
        ({**FASTER, "where": "resnet"}, "where: a mapping"),
        ("torch is faster", "a mapping with kind"),
    ],
)
def test_a_malformed_claim_is_refused_naming_it(claim: Any, said: str) -> None:
    with pytest.raises(claims.ClaimError, match="claim 1") as refused:
        claims.parse([claim])
    assert said in str(refused.value)


def test_the_report_puts_the_claims_first_and_the_cli_refuses_a_bad_file(
    tmp_path: Path, capsys: Any
) -> None:
    runs = rates("torch", 110.0, 10, 1) + rates("tf", 100.0, 10, 2)
    stated = {**FASTER, "claim": "torch wins", "source": "seed001, Table 2"}
    report = build(runset(runs), claims=claims.parse([stated]))
    assert [s.title for s in report.sections][:2] == ["Overview", "Claims"]
    (table,) = [b for b in report.sections[1].blocks if hasattr(b, "rows")]
    assert [c.text for c in table.rows[0]][:3] == ["torch wins", "seed001, Table 2", "holds here"]
    bad = tmp_path / "claims.yaml"
    bad.write_text("- kind: comparison\n  faster: torch\n")
    assert report_main(["--claims", str(bad), "--uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert "claim 1" in capsys.readouterr().err


def test_a_sweeps_claims_are_checked_before_any_trial_and_imply_its_report() -> None:
    import dataclasses

    from bench.core.config import BenchConfig, ConfigError
    from bench.sweep.jobs import check_all
    from bench.sweep.session import Sweep

    base = BenchConfig(claims=[FASTER])
    check_all([("a", base)])
    with pytest.raises(ConfigError, match="claims: claim 1"):
        check_all([("a", dataclasses.replace(base, claims=[{"kind": "rumour"}]))])
    with pytest.raises(ConfigError, match="one list of claims"):
        check_all([("a", base), ("b", dataclasses.replace(base, claims=[]))])
    assert Sweep(None, "sweep", 1, report=False, claims=[FASTER]).report  # type: ignore[arg-type]


def strategy_runs(framework: str, strategy: str, rate: float, seed: int, **kw: Any) -> list[Any]:
    ps = "1" if strategy in ("ps_async", "kvstore_sync", "kvstore_async") else "0"
    return rates(framework, rate, 8, seed, params={"distributed": strategy, "ps": ps}, **kw)


SIDES = {
    "kind": "comparison",
    "faster": {"framework": "mxnet", "distributed": "kvstore_sync"},
    "slower": {"framework": "tf", "distributed": "multiworker"},
}


def test_comparison_sides_may_name_a_strategy_and_pair_across_ps_layouts() -> None:
    runs = (
        strategy_runs("mxnet", "kvstore_sync", 130.0, 1)
        + strategy_runs("tf", "multiworker", 100.0, 2)
        + strategy_runs("tf", "ps_async", 200.0, 3)  # neither side: left out
    )
    held = verdict(SIDES, runs)
    assert held.verdict == claims.HOLDS and held.runs == 16
    assert "tf distributed=multiworker/mxnet distributed=kvstore_sync" in held.effect
    swapped = verdict({**SIDES, "faster": SIDES["slower"], "slower": SIDES["faster"]}, runs)
    assert swapped.verdict == claims.CONTRADICTED


def test_sides_without_a_framework_compare_each_framework_with_itself() -> None:
    claim = {"kind": "comparison", "faster": {"distributed": "multiworker"},
             "slower": {"distributed": "ps_async"}}  # fmt: skip
    # tf: multiworker faster; torch (made up) the other way round: never paired across
    runs = (
        strategy_runs("tf", "multiworker", 150.0, 1)
        + strategy_runs("tf", "ps_async", 100.0, 2)
        + strategy_runs("torch", "multiworker", 100.0, 3)
        + strategy_runs("torch", "ps_async", 150.0, 4)
    )
    found = verdict(claim, runs)
    assert found.verdict == claims.CONTRADICTED
    assert found.effect.startswith("torch ") and "tf " not in found.effect
    held = verdict({**claim, "where": {"framework": "tf"}}, runs)
    assert held.verdict == claims.HOLDS


def model_runs(model: str, rate: float, seed: int, n: int = 8, **kw: Any) -> list[Any]:
    rng = random.Random(seed)
    return [record("tf", model, rate=rng.gauss(rate, rate * 0.01), repeat=i, **kw)
            for i in range(n)]  # fmt: skip


def test_sides_naming_the_model_compare_two_architectures_on_purpose() -> None:
    claim = {"kind": "comparison", "faster": {"model": "vgg16"},
             "slower": {"model": "resnet50"}}  # fmt: skip
    runs = model_runs("vgg16", 130.0, 1) + model_runs("resnet50", 100.0, 2)
    held = verdict(claim, runs)
    assert held.verdict == claims.HOLDS, held.effect
    assert "(14.7M vs 23.5M parameters)" in held.effect
    swapped = verdict({**claim, "faster": claim["slower"], "slower": claim["faster"]}, runs)
    assert swapped.verdict == claims.CONTRADICTED
    # Each side must still be one architecture: a vgg16 of another size is not comparable.
    mixed = runs + model_runs("vgg16", 130.0, 3, num_parameters=15_000_000, batch=32)
    found = verdict(claim, mixed)
    assert found.verdict == claims.INCONCLUSIVE
    assert "architectures differ: parameter counts 14,728,266, 15,000,000" in found.effect
    # A framework comparison still needs equal counts on both sides.
    framework = verdict(FASTER, rates("torch", 110.0, 8, 4) + rates(
        "tf", 100.0, 8, 5, num_parameters=23_000_000))  # fmt: skip
    assert framework.verdict == claims.INCONCLUSIVE
    assert "architectures differ" in framework.effect


def test_a_side_with_no_runs_is_named() -> None:
    found = verdict(SIDES, strategy_runs("tf", "multiworker", 100.0, 1))
    assert found.verdict == claims.NOT_MEASURED
    assert "no ok run of mxnet distributed=kvstore_sync" in found.effect


@pytest.mark.parametrize("side", [[], None, {}, ["torch"]])
def test_a_malformed_side_is_refused(side: Any) -> None:
    with pytest.raises(claims.ClaimError, match="claim 1"):
        claims.parse([{**SIDES, "faster": side}])


def test_a_later_report_of_a_sweep_checks_the_claims_the_sweep_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 29, finding 8: `bench report` after a sweep logged a report without the
    sweep's claims over the one with them; the sweep keeps its claims with its parent run."""
    import dataclasses

    import mlflow

    from bench import tracking

    uri = new_store(tmp_path / "m.db")
    client = mlflow.MlflowClient(uri)
    parent = client.create_run(client.create_experiment("e")).info.run_id
    stated = {**FASTER, "claim": "torch wins", "source": "seed001, Table 2"}
    tracking.log_claims(uri, parent, [stated])
    assert tracking.logged_claims(uri, parent) == [stated]
    runs = rates("torch", 110.0, 10, 1) + rates("tf", 100.0, 10, 2)
    swept = dataclasses.replace(runset(runs), uri=uri, sweep_id=parent)
    monkeypatch.setattr(tracking, "load_runs", lambda *a, **k: swept)
    assert report_main(["--uri", uri, "--out", str(tmp_path / "r")]) == 0
    assert "checking the sweep's own 1 claim(s)" in capsys.readouterr().out
    assert "torch wins" in (tmp_path / "r" / "report.md").read_text()
    # What the store hands back is checked: a kept file that is not a list is refused.
    bad = tmp_path / "claims.json"
    bad.write_text('{"kind": "comparison"}')
    client.log_artifact(parent, str(bad), tracking.REPORT_ARTIFACT_DIR)
    assert report_main(["--uri", uri, "--out", str(tmp_path / "r2")]) == 2
    assert "not a list of claims" in capsys.readouterr().err


def test_the_report_says_one_line_for_a_store_that_is_not_one(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29, finding 12: a file that is not a database gave 77 lines of SQLAlchemy, a
    missing one an empty new store, Ctrl-C 58 lines of traceback."""
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    assert report_main(["--uri", f"sqlite:///{text}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"bench.report: --uri: {text} is not an SQLite database (an MLflow store)"
    )
    assert report_main(["--uri", f"sqlite:///{tmp_path / 'none.db'}"]) == 2
    assert "no MLflow store at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    from bench.cli import report as report_cli

    monkeypatch.setattr(report_cli, "_main", interrupted)
    assert report_main([]) == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        "bench.report: interrupted; no report was written or logged"
    ]


# --- issue 37: "with a few exceptions", requirements, caveats ---------------------------------

MOSTLY = {"kind": "majority", "faster": "tf", "slower": "torch"}


def per_batch(
    torch_faster_at: tuple[int, ...], batches: tuple[int, ...] = (8, 16, 32)
) -> list[Any]:
    out = []
    for i, batch in enumerate(batches):
        torch_rate = 120.0 if batch in torch_faster_at else 100.0
        out += rates("torch", torch_rate, 8, 10 + i, batch=batch)
        out += rates("tf", 110.0, 8, 20 + i, batch=batch)
    return out


def test_a_majority_claim_holds_in_most_configurations_and_lists_its_exceptions() -> None:
    found = verdict(MOSTLY, per_batch(torch_faster_at=(32,)))
    assert found.verdict == claims.HOLDS
    assert "holds in 2 of 3 configurations, contradicted in 1" in found.effect
    assert "the exceptions: batch_size=32 " in found.effect
    assert "contradicted here, torch/tf" in found.effect
    # the same runs contradict "in every configuration"
    assert verdict({**MOSTLY, "kind": "comparison"}, per_batch((32,))).verdict == (
        claims.CONTRADICTED
    )
    assert verdict(MOSTLY, per_batch(torch_faster_at=(16, 32))).verdict == claims.CONTRADICTED
    everywhere = verdict(MOSTLY, per_batch(torch_faster_at=()))
    assert everywhere.verdict == claims.HOLDS and "the exceptions: none" in everywhere.effect


def data_runs(cache: bool, data: str = "cifar10") -> list[Any]:
    params = {"data.name": data, "data.cache": str(cache)}
    return rates("torch", 110.0, 8, 1, params={**params, "data.cache": "False"}) + rates(
        "tf", 100.0, 8, 2, params=params
    )


LOADING = {**FASTER, "requires": {"data": "real", "data_cache": {"tf": True, "torch": False}}}


def test_a_claim_whose_cause_the_runs_lack_is_not_measured_here_with_the_reason() -> None:
    synthetic = verdict(LOADING, data_runs(cache=True, data="synthetic"))
    assert synthetic.verdict == claims.NOT_MEASURED and synthetic.runs == 0
    assert "real data" in synthetic.effect and "synthetic" in synthetic.effect
    uncached = verdict(LOADING, data_runs(cache=False))
    assert uncached.verdict == claims.NOT_MEASURED
    assert "data.cache=true for tf" in uncached.effect
    assert verdict(LOADING, data_runs(cache=True)).verdict == claims.HOLDS
    # runs without the cause are left out, and the effect says how many
    mixed = verdict(LOADING, data_runs(cache=True) + data_runs(cache=True, data="synthetic"))
    assert mixed.verdict == claims.HOLDS and mixed.runs == 16
    assert "16 run(s) without what the claim requires left out" in mixed.effect


def test_nodes_device_and_version_requirements_are_checked_against_the_runs() -> None:
    runs = rates("torch", 110.0, 8, 1) + rates("tf", 100.0, 8, 2)  # cpu, 1 node, version 2.0
    one_node = verdict({**FASTER, "requires": {"nodes": 2}}, runs)
    assert one_node.verdict == claims.NOT_MEASURED and "loopback" in one_node.effect
    assert "device cuda" in verdict({**FASTER, "requires": {"device": "cuda"}}, runs).effect
    old_tf = verdict({**FASTER, "requires": {"versions": {"tf": "<1.9"}}}, runs)
    # the requirement is named first, even where the other side also lacks the metric
    backward = {**FASTER, "metric": "time_backward_ms", "requires": {"versions": {"tf": "<1.9"}}}
    assert verdict(backward, runs).effect.startswith("the claim needs tf <1.9 (these runs: 2.0)")
    assert old_tf.verdict == claims.NOT_MEASURED and "tf <1.9 (these runs: 2.0)" in old_tf.effect
    assert verdict({**FASTER, "requires": {"versions": {"tf": ">=2"}}}, runs).verdict == (
        claims.HOLDS
    )
    many = rates("torch", 110.0, 8, 1, params={"nodes": "3"}) + rates(
        "tf", 100.0, 8, 2, params={"nodes": "3"}
    )
    assert verdict({**FASTER, "requires": {"nodes": 2}}, many).verdict == claims.HOLDS


@pytest.mark.parametrize(
    ("requires", "said"),
    [
        ({"network": "fast"}, "requires: network: not a requirement bench can check"),
        ({"data": "imagenet"}, "data: real"),
        ({"nodes": 1}, "nodes: a whole number >= 2"),
        ({"device": "tpu"}, "device: cuda or cpu"),
        ({"versions": {"tf": "two-ish"}}, "not a version range"),
        ({"versions": {"caffe": "<1"}}, "caffe: not a framework"),
        ({"data_cache": {"tf": "yes"}}, "data_cache: each framework true or false"),
        ("real data", "requires: a mapping"),
    ],
)
def test_an_unknown_or_uncheckable_requirement_is_refused_naming_the_claim(
    requires: Any, said: str
) -> None:
    with pytest.raises(claims.ClaimError, match="claim 1 \\(torch first\\)") as refused:
        claims.parse([{**FASTER, "claim": "torch first", "requires": requires}])
    assert said in str(refused.value)


def test_the_claims_section_shows_each_claims_caveat_and_requirements() -> None:
    runs = rates("torch", 110.0, 10, 1) + rates("tf", 100.0, 10, 2)
    stated = {**FASTER, "caveat": "the study  ran on one core", "requires": {"device": "cpu"}}
    report = build(runset(runs), claims=claims.parse([stated, FASTER]))
    (table,) = [b for b in report.sections[1].blocks if hasattr(b, "rows")]
    assert table.columns[-1] == "Caveat"
    assert table.rows[0][-1].text == "the study ran on one core (needs device cpu)"
    assert table.rows[1][-1].text == "-"


def test_a_sweep_with_an_unknown_requirement_is_refused_before_any_trial() -> None:
    from bench.core.config import BenchConfig, ConfigError
    from bench.sweep.jobs import check_all

    bad = {**FASTER, "claim": "loopback is a network", "requires": {"network": "10GbE"}}
    with pytest.raises(ConfigError, match="claim 1 \\(loopback is a network\\): requires: network"):
        check_all([("a", BenchConfig(claims=[bad]))])


def test_a_claim_that_one_side_is_faster_is_contradicted_by_an_equivalence() -> None:
    runs = rates("torch", 100.0, 10, 1) + rates("tf", 100.0, 10, 2)  # 1% noise, no difference
    seen = verdict(FASTER, runs)
    assert seen.verdict == claims.CONTRADICTED and "equivalent within ±2%" in seen.effect


def test_claims_keep_their_defaults_and_gain_a_best_column() -> None:
    from bench.report.document import Table

    best = {"tuning.name": "best", "tuned.compile": "true"}
    runs = rates("torch", 110.0, 8, 1) + rates("tf", 100.0, 8, 2)  # at defaults: torch ahead
    runs += rates("torch", 110.0, 8, 3, params=best) + rates("tf", 130.0, 8, 4, params=best)
    report = build(runset(runs), claims=claims.parse([FASTER]))
    section = next(s for s in report.sections if s.title == "Claims")
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert table.columns[-2:] == ["Verdict at best", "Effect at best"]
    row = [c.text for c in table.rows[0]]
    assert row[2] == claims.HOLDS and row[4] == "16"  # the default runs only
    assert row[-2] == claims.CONTRADICTED  # at best, tf is the faster
