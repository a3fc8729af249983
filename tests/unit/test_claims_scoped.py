"""Claims scoped as their studies state them (issue 52): an average as an average over the
configurations (``kind: average``), a finding per model (``per: model``), "irrespective of
the mode" as each mode apart (a side listing several values).  Fabricated runs, known answers."""

from __future__ import annotations

import random
import re
from typing import Any

from bench.report import claims
from bench.report.trials import to_trial
from tests.report_data import record


def runs(framework: str, rate: float, n: int = 6, seed: int = 0, **kw: Any) -> list[Any]:
    rng = random.Random(seed)
    return [record(framework, rate=rng.gauss(rate, rate * 0.01), repeat=i, **kw)
            for i in range(n)]  # fmt: skip


def check(claim: dict[str, Any], records: list[Any]) -> claims.Checked:
    (parsed,) = claims.parse([claim])
    return claims.check(parsed, [to_trial(r) for r in records])


AVERAGE = {"kind": "average", "faster": "torch", "slower": "tf"}


def test_an_average_holds_where_one_configuration_goes_the_other_way() -> None:
    """Torch 3x faster at batch 32, 10% slower at batch 64: "faster by average" holds (the
    geometric mean is 1.64), where a per-configuration comparison is contradicted."""
    records = runs("torch", 300, batch=32, seed=1) + runs("tf", 100, batch=32, seed=2)
    records += runs("torch", 90, batch=64, seed=3) + runs("tf", 100, batch=64, seed=4)
    found = check(AVERAGE, records)
    assert found.verdict == claims.HOLDS, found.effect
    assert "geometric mean over 2 configuration(s) = 1.6" in found.effect
    assert check({**AVERAGE, "kind": "comparison"}, records).verdict == claims.CONTRADICTED
    assert check({**AVERAGE, "by_at_least_pct": 100}, records).verdict == claims.CONTRADICTED
    reverse = check({**AVERAGE, "faster": "tf", "slower": "torch"}, records)
    assert reverse.verdict == claims.CONTRADICTED


def test_an_average_straddling_its_threshold_is_inconclusive() -> None:
    noisy = [record("torch", rate=r, repeat=i) for i, r in enumerate((80, 130, 95, 120))]
    noisy += [record("tf", rate=r, repeat=i) for i, r in enumerate((90, 125, 100, 110))]
    found = check(AVERAGE, noisy)
    assert found.verdict == claims.INCONCLUSIVE and "straddles 1.00" in found.effect
    one_each = [record("torch", rate=200), record("tf", rate=100)]
    assert check(AVERAGE, one_each).verdict == claims.INCONCLUSIVE
    assert check(AVERAGE, runs("torch", 100)).verdict == claims.NOT_MEASURED


def test_the_geometric_mean_interval_is_seeded_and_covers_the_ratio() -> None:
    configs = [([1.0, 1.1, 0.9], [3.0, 3.3, 2.7]), ([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])]
    ratio, low, high = claims.geometric_mean_ratio(configs)
    assert abs(ratio - (3.0 * 0.5) ** 0.5) < 1e-9 and low < ratio < high
    assert claims.geometric_mean_ratio(configs) == (ratio, low, high)


def test_per_model_checks_each_model_apart() -> None:
    """A majority for each model: holds where each model's majority holds; one model whose
    runs go the other way contradicts it (pooled, the majority would still hold)."""
    records = []
    for batch in (16, 32, 64):
        records += runs("torch", 110, batch=batch, seed=batch)
        records += runs("tf", 100, batch=batch, seed=batch + 1)
        records += runs("torch", 110, model="vgg16", batch=batch, seed=batch + 2)
        records += runs("tf", 100, model="vgg16", batch=batch, seed=batch + 3)
    claim = {"kind": "majority", "faster": "torch", "slower": "tf", "per": "model"}
    assert check(claim, records).verdict == claims.HOLDS
    # vgg16: torch wins at 16 only
    torch_vgg = {"model.name": "vgg16", "framework.name": "torch"}
    flipped = [r for r in records if not (torch_vgg.items() <= r.params.items()
                                          and r.params["batch_size"] != "16")]  # fmt: skip
    flipped += runs("torch", 90, model="vgg16", batch=32, seed=7)
    flipped += runs("torch", 90, model="vgg16", batch=64, seed=8)
    found = check(claim, flipped)
    assert found.verdict == claims.CONTRADICTED and "model=vgg16" in found.effect
    assert "model=resnet50" not in found.effect
    pooled = check({k: v for k, v in claim.items() if k != "per"}, flipped)
    assert pooled.verdict == claims.HOLDS  # 4 of 6 configurations hold


def test_a_side_listing_both_modes_compares_each_apart() -> None:
    """ "PyTorch outperforms MXNet irrespective of the training mode": holds only where it
    holds against each mode; the two modes' runs are never pooled into one side."""

    def strategy(framework: str, distributed: str, rate: float, seed: int) -> list[Any]:
        return runs(framework, rate, seed=seed, params={"distributed": distributed})

    claim = {
        "kind": "comparison",
        "faster": {"framework": "torch", "distributed": "ddp"},
        "slower": {"framework": "mxnet", "distributed": ["kvstore_sync", "kvstore_async"]},
    }
    both = (strategy("torch", "ddp", 180, 1) + strategy("mxnet", "kvstore_sync", 100, 2)
            + strategy("mxnet", "kvstore_async", 120, 3))  # fmt: skip
    held = check(claim, both)
    assert held.verdict == claims.HOLDS, held.effect
    assert "kvstore_sync" in held.effect and "kvstore_async" in held.effect
    async_wins = both[:12] + strategy("mxnet", "kvstore_async", 200, 4)
    found = check(claim, async_wins)
    assert found.verdict == claims.CONTRADICTED
    assert "distributed=kvstore_async" in found.effect and "kvstore_sync:" not in found.effect


def test_average_and_per_are_parsed_and_a_typo_refused() -> None:
    (parsed,) = claims.parse([{**AVERAGE, "per": "model"}])
    assert parsed.kind == "average" and parsed.per == "model"
    try:
        claims.parse([{**AVERAGE, "trend": 1}])
    except claims.ClaimError as refused:
        assert "not a field of a average claim" in str(refused)
    else:
        raise AssertionError("an unknown field was accepted")


def test_an_average_over_part_of_the_studys_configurations_is_not_measured() -> None:
    """ "By average 2.65X" over six model-dataset pairs: LeNet-5's runs alone (where the
    study has the other order) are not that average."""
    records = runs("torch", 300, seed=1) + runs("tf", 100, seed=2)
    spans = {**AVERAGE, "over": {"model": ["resnet50", "vgg16"]}}
    found = check(spans, records)
    assert found.verdict == claims.NOT_MEASURED
    assert "spans model=vgg16 too (these runs: model=resnet50)" in found.effect
    records += runs("torch", 300, model="vgg16", seed=3) + runs("tf", 100, model="vgg16", seed=4)
    assert check(spans, records).verdict == claims.HOLDS


DATA_PARALLEL = {
    "kind": "comparison",
    "faster": {"distributed": ["mirrored", "ddp"], "workers": 2},
    "slower": {"distributed": "none", "workers": 1},
    "batch": "global",
}


def _strategy(distributed: str, workers: int) -> dict[str, str]:
    return {"distributed": distributed, "workers": str(workers)}


def test_data_parallelism_is_paired_by_the_global_batch_it_splits() -> None:
    """seed004's data parallelism splits a global batch of 64 between 2 workers (32 each):
    ``batch: global`` pairs those runs with the standalone ones at 64, and model parallelism
    (every worker sees the whole batch) at its own batch_size.  By each worker's batch (the
    default) the split runs would pair with standalone runs at 32."""
    records = runs("tf", 200, batch=32, seed=1, params=_strategy("mirrored", 2))
    records += runs("torch", 210, batch=32, seed=2, params=_strategy("ddp", 2))
    records += runs("tf", 100, batch=64, seed=3, params=_strategy("none", 1))
    records += runs("torch", 105, batch=64, seed=4, params=_strategy("none", 1))
    records += runs("tf", 150, batch=32, seed=5, params=_strategy("none", 1))  # not paired
    found = check(DATA_PARALLEL, records)
    assert found.verdict == claims.HOLDS, found.effect
    ratios = re.findall(r"ms_per_sample = ([0-9.]+)", found.effect)  # standalone/parallel
    assert len(ratios) == 2 and all(1.9 < float(r) < 2.1 for r in ratios), found.effect
    assert "global_batch=64" in found.effect and "6 vs 6 runs" in found.effect
    assert "batch_size=32" not in found.effect  # the standalone run at 32 is nobody's pair
    # By each worker's batch, mirrored's 32 a worker pairs with standalone at 32 (a different
    # global batch) and the standalone runs at 64 with nothing.
    by_worker = check({k: v for k, v in DATA_PARALLEL.items() if k != "batch"}, records)
    assert "batch_size=32" in by_worker.effect and "batch_size=64" not in by_worker.effect
    model_parallel = runs("tf", 90, batch=64, seed=6, params=_strategy("model_parallel", 2))
    split = check({**DATA_PARALLEL, "faster": {"distributed": "none", "workers": 1},
                   "slower": {"distributed": "model_parallel", "workers": 2}},
                  model_parallel + records)  # fmt: skip
    assert split.verdict == claims.HOLDS and "6 vs 6 runs" in split.effect, split.effect
    assert [
        claims.global_batch(to_trial(r)) for r in (records[0], records[12], model_parallel[0])
    ] == [64, 64, 64]
    two_nodes = record("torch", batch=16, params={**_strategy("ddp", 2), "nodes": "2"})
    assert claims.global_batch(to_trial(two_nodes)) == 64  # 2 workers on each of 2 nodes


def test_batch_names_worker_or_global() -> None:
    import pytest

    with pytest.raises(claims.ClaimError, match="batch: one of worker, global; got 'each'"):
        claims.parse([{**DATA_PARALLEL, "batch": "each"}])
    with pytest.raises(claims.ClaimError, match="batch: not a field of a trend claim"):
        claims.parse([{"kind": "trend", "against": "batch_size", "direction": "increases",
                       "batch": "global"}])  # fmt: skip
