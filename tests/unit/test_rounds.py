"""repeats=auto in the sweep (bench.sweep.rounds and the driver's rounds): which pairs are
comparisons, when a configuration stops, and what a round says (fake trials: rows from a
table of rates, no framework)."""

from __future__ import annotations

import random

import pytest

from bench.analysis import stats
from bench.core.config import BenchConfig, FrameworkConfig, LauncherConfig
from bench.core.identity import config_hash
from bench.sweep import driver, rounds
from bench.sweep.jobs import expand
from bench.sweep.session import Row


def parsed(*overrides: str) -> list:  # noqa: ANN401
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(overrides))


def test_comparisons_are_pairs_that_differ_in_one_compared_key() -> None:
    configs = [
        ("framework=torch", "model=lenet5"), ("framework=tf", "model=lenet5"),
        ("framework=torch", "model=vgg16"), ("framework=tf", "model=vgg16"),
    ]  # fmt: skip
    found = rounds.comparisons(configs)
    assert [(c.a, c.b) for c in found] == [(configs[0], configs[1]), (configs[2], configs[3])]
    assert found[0].label == "model=lenet5: framework torch vs tf"
    # an A/A pair: a key that changes nothing measured is still a comparison
    same = rounds.comparisons([("data.num_batches=4",), ("data.num_batches=5",)])
    assert len(same) == 1


def test_failed_runs_are_never_samples() -> None:
    times = rounds.times_of([(("a",), "ok", 100.0), (("a",), "oom", None), (("a",), "ok", 50.0),
                             (("b",), "diverged", 10.0), (("b",), "skipped", 20.0)])  # fmt: skip
    assert times == {("a",): [0.01, 0.02], ("b",): [0.05]}  # a reused ok run counts


def fake_sweep(
    rates: dict[str, float], cv: float, max_repeats: int = 10, budget: float = 0.0, seed: int = 0
):  # noqa: ANN202
    """Run driver._run_rounds over jobs of framework=torch,tf whose trials return ``rates``
    (samples/s by framework) with noise ``cv``; the jobs run, in order."""
    rng = random.Random(seed)
    jobs = expand(parsed("framework=" + ",".join(rates)), max_repeats)
    ran: list[list[str]] = []

    def run_jobs(indices: list[int]) -> list[Row]:
        out = []
        for i in indices:
            ran.append(jobs[i])
            fw = dict(o.split("=") for o in jobs[i])["framework"]
            out.append(Row(fw, "ok", rates[fw] * rng.gauss(1.0, cv), 1.0))
        return out

    cfg = BenchConfig(repeats="auto", max_repeats=max_repeats, repeats_budget_s=budget)
    driver._run_rounds(jobs, cfg, run_jobs)
    return ran


def test_a_large_difference_stops_after_two_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    ran = fake_sweep({"torch": 100.0, "tf": 50.0}, cv=0.01)
    assert len(ran) == 4  # 2 rounds of 2 configurations
    said = capsys.readouterr().err
    assert "2 rounds (every comparison is settled): 1 faster" in said


def test_close_sides_run_until_settled_and_say_why(capsys: pytest.CaptureFixture[str]) -> None:
    ran = fake_sweep({"torch": 100.0, "tf": 99.8}, cv=0.004, max_repeats=10)
    said = capsys.readouterr().err
    assert "spans both sides" in said or "not yet within" in said
    assert 4 < len(ran) <= 20
    assert "equivalent" in said.splitlines()[-1] or "futile" in said


def test_max_repeats_and_the_budget_end_the_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    ran = fake_sweep({"torch": 100.0, "tf": 97.0}, cv=0.05, max_repeats=3)
    assert len(ran) <= 6 and "3 rounds" in capsys.readouterr().err
    ran = fake_sweep({"torch": 100.0, "tf": 97.0}, cv=0.05, budget=1e-9)
    assert len(ran) == 4 and "budget" in capsys.readouterr().err


def test_an_ab_sweep_rarely_finds_a_difference_between_identical_sides() -> None:
    faster = 0
    for seed in range(40):
        ran = fake_sweep({"torch": 100.0, "tf": 100.0}, cv=0.03, seed=seed)
        assert len(ran) % 2 == 0
        faster += len(ran) == 4  # stopping at round 2 is a verdict reached at once
    assert faster <= 6


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"repeats": "sometimes"}, "repeats"), ({"repeats": 0}, "repeats"),
     ({"repeats": "auto", "max_repeats": 1}, "max_repeats"),
     ({"repeats_budget_s": -1.0}, "repeats_budget_s"),
     ({"equivalence_margin": 0.5}, "equivalence_margin"),
     ({"equivalence_margin": 0.0}, "equivalence_margin")],
)  # fmt: skip
def test_bad_repeats_input_names_its_key(changes: dict[str, object], field: str) -> None:
    import dataclasses

    from bench.checks.rules import check

    problems = check(dataclasses.replace(BenchConfig(), **changes))  # type: ignore[arg-type]
    assert any(p.startswith(f"{field}:") for p in problems), problems


def test_the_new_keys_change_no_hash() -> None:
    import dataclasses

    plain = BenchConfig()
    for changes in ({"repeats": "auto"}, {"max_repeats": 3}, {"equivalence_margin": 0.05},
                    {"repeats_budget_s": 60.0}):  # fmt: skip
        assert config_hash(dataclasses.replace(plain, **changes)) == config_hash(plain)


def test_an_unstable_side_keeps_a_settled_pair_open() -> None:
    """Replayed from lenet-auto3: torch vs mxnet looked "faster" after 7 rounds, but mxnet's
    CV was 15%, so the report called the pair "not comparable": the rounds go on."""
    torch, mxnet = ("framework=torch",), ("framework=mxnet",)
    pair = rounds.comparisons([torch, mxnet])
    rates = {torch: [7400, 7350, 7300, 7420, 7380, 7310, 7360],
             mxnet: [5200, 4100, 5600, 4300, 5900, 4000, 5000]}  # fmt: skip
    times = {c: [1 / r for r in rs] for c, rs in rates.items()}
    assert stats.cv(times[mxnet]) >= stats.UNSTABLE_CV
    (status,) = rounds.settle(pair, times, 7, 10, 0.02)
    assert status.look is not None and status.look.kind == "faster"
    assert not status.settled and not status.capped and status.noisy
    assert status.why.startswith("mxnet unstable, CV 15%")
    assert rounds.still_open([torch, mxnet], [status]) == {torch, mxnet}
    assert rounds.tally([status]) == "1 unstable"
    # at the cap the pair ends open, and says so
    (last,) = rounds.settle(pair, times, 10, 10, 0.02)
    assert last.capped and "mxnet unstable" in rounds.describe([last])[0]
    # once the CV falls below the report's line the verdict stands
    calm = {torch: times[torch], mxnet: [1 / r for r in (5000, 5050, 4980, 5020, 5010)]}
    (fine,) = rounds.settle(pair, calm, 5, 10, 0.02)
    assert fine.settled and fine.look is not None and fine.look.kind == "faster"


def test_max_repeats_is_named_when_the_cap_ends_the_rounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_sweep({"torch": 100.0, "tf": 99.0}, cv=0.03, max_repeats=3)
    last = [line for line in capsys.readouterr().err.splitlines() if "3 rounds" in line]
    assert last and "max_repeats reached; 1 of 1 comparisons still open" in last[0]
    assert "every comparison is settled" not in last[0]


def seed003_configs() -> list[tuple[str, ...]]:
    """The 30 configurations of `bench plan +experiment=seed003_distributed_cpu scale=machine
    repeats=auto`: its system block sets framework and distributed together."""
    work = [[("model", "lenet5"), ("num_classes", "10")],
            [("model", "alexnet"), ("num_classes", "10"), ("image_size", "64")]]  # fmt: skip
    work += [
        [("model", m), ("num_classes", n)]
        for m in ("resnet18", "resnet50")
        for n in "10 100".split()
    ]
    systems = [[("framework", "tf"), ("distributed", d)] for d in ("multiworker", "ps_async")]
    systems += [[("framework", "torch"), ("distributed", "ddp")]]
    systems += [
        [("framework", "mxnet"), ("distributed", d)] for d in ("kvstore_sync", "kvstore_async")
    ]
    return [("+experiment=seed003_distributed_cpu", *(f"{k}={v}" for k, v in w + s))
            for w in work for s in systems]  # fmt: skip


def test_a_claims_sides_are_comparisons_of_the_rounds() -> None:
    """seed003: torch/ddp differs from every other cell in two keys; without its claims the
    rounds compare it with nothing and it stops after round 2."""
    import yaml

    from bench.core.paths import data

    configs = seed003_configs()
    assert len(configs) == 30
    alone = rounds.comparisons(configs)
    assert len(alone) == 12 and not any("framework=torch" in c.a + c.b for c in alone)
    experiment = yaml.safe_load(
        (data("conf") / "experiment/seed003_distributed_cpu.yaml").read_text()
    )
    found = rounds.comparisons(configs, experiment["claims"])
    assert {c for p in found for c in (p.a, p.b)} == set(configs)  # every cell is compared
    # The averages over the study's six workloads (issue 52): torch vs tf, mxnet vs tf and
    # mxnet vs torch in sync, mxnet vs tf in async, each in all 6; torch vs mxnet on LeNet-5
    # in either mode, one pair whose mxnet side is sync|async; tf vs mxnet on LeNet-5 is the
    # sync average's pair there, and tf sync vs async on LeNet-5 the one-key pair already there
    assert len(found) == 12 + 6 + 6 + 6 + 1 + 6
    torch = [p for p in found if "framework=torch" in p.a + p.b]
    assert len(torch) == 6 + 6 + 1
    pair = next(p for p in torch if "model=lenet5" in p.a and "framework=mxnet" in p.b)
    assert pair.key == "framework" and pair.a[-2:] == ("framework=torch", "distributed=ddp")
    assert pair.label.startswith("model=lenet5 num_classes=10: torch distributed=ddp vs mxnet")
    assert rounds.side_name(pair, pair.b) == "mxnet"


def test_the_sweep_compares_its_claims_sides(capsys: pytest.CaptureFixture[str]) -> None:
    sides = {"torch": ("framework=torch", "distributed=ddp"),
             "tf": ("framework=tf", "distributed=multiworker")}  # fmt: skip
    jobs = [[*sides[fw], f"repeat={r}"] for r in range(4) for fw in sides]
    rng = random.Random(0)

    def run_jobs(indices: list[int]) -> list[Row]:
        rate = {"framework=torch": 100.0, "framework=tf": 50.0}
        return [Row("x", "ok", rate[jobs[i][0]] * rng.gauss(1.0, 0.01), 1.0) for i in indices]

    claim = {"claim": "torch is faster", "kind": "comparison",
             "faster": {"framework": "torch", "distributed": "ddp"},
             "slower": {"framework": "tf", "distributed": "multiworker"}}  # fmt: skip
    cfg = BenchConfig(repeats="auto", max_repeats=4, claims=[claim])
    driver._run_rounds(jobs, cfg, run_jobs)
    said = capsys.readouterr().err
    assert "2 rounds (every comparison is settled): 1 faster" in said


def test_a_settled_comparison_stays_settled() -> None:
    """Replayed from lenet-auto: torch vs mxnet was faster after round 4; torch ran on for its
    pair with tf, disturbed rounds followed, and a fresh look re-opened the pair."""
    torch, mxnet = ("framework=torch",), ("framework=mxnet",)
    pair = rounds.comparisons([torch, mxnet])
    early = {torch: [1 / r for r in (7400, 7350, 7300, 7420)],
             mxnet: [1 / r for r in (5300, 5350, 5310, 5320)]}  # fmt: skip
    kept: dict[rounds.Comparison, rounds.Status] = {}
    (first,) = rounds.settle(pair, early, 4, 10, 0.02, kept)
    assert first.settled and first.look is not None and first.look.kind == "faster"
    late = {torch: early[torch] + [1 / r for r in (4531, 2156, 1806, 7000)],
            mxnet: early[mxnet] + [1 / r for r in (1403, 2421, 5300, 5200)]}  # fmt: skip
    (fresh,) = rounds.settle(pair, late, 8, 10, 0.02)
    assert not fresh.settled  # a fresh look would re-open it
    (again,) = rounds.settle(pair, late, 8, 10, 0.02, kept)
    assert again is first and rounds.still_open([torch, mxnet], [again]) == set()


def test_a_key_outside_the_identity_is_neither_compared_nor_a_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The rounds group jobs as the report groups runs (bench.core.identity): a swept
    launcher.kill_grace_s changes nothing measured, so its jobs pool into one configuration
    per framework and the only comparison is torch against tf."""
    cfgs = [
        BenchConfig(framework=FrameworkConfig(name=fw), launcher=LauncherConfig(kill_grace_s=g))
        for fw in ("torch", "tf")
        for g in (5.0, 10.0)
    ]
    dropped = rounds.unmeasured(cfgs)
    assert "launcher.kill_grace_s" in dropped and "framework" not in dropped
    assert "framework.name" not in dropped and "batch_size" not in dropped
    jobs = [
        [f"framework={fw}", f"launcher.kill_grace_s={g}", f"repeat={r}"]
        for r in range(3)
        for fw in ("torch", "tf")
        for g in (5, 10)
    ]
    configs = {rounds.config_of(j, dropped) for j in jobs}
    assert configs == {("framework=torch",), ("framework=tf",)}
    found = rounds.comparisons(sorted(configs))
    assert [c.key for c in found] == ["framework"]
    # without the identity's rule the grace period would be a comparison of its own
    assert "launcher.kill_grace_s" in {c.key for c in rounds.comparisons(
        list(dict.fromkeys(rounds.config_of(j) for j in jobs)))}  # fmt: skip
    rng = random.Random(0)

    def run_jobs(indices: list[int]) -> list[Row]:
        rate = {"framework=torch": 100.0, "framework=tf": 50.0}
        return [Row("x", "ok", rate[jobs[i][0]] * rng.gauss(1.0, 0.01), 1.0) for i in indices]

    driver._run_rounds(jobs, BenchConfig(repeats="auto", max_repeats=3), run_jobs, dropped)
    assert "2 rounds (every comparison is settled): 1 faster" in capsys.readouterr().err
