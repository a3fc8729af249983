"""A study preset with repeats=auto (issue 33, item 5): the rounds compare every cell of
seed003 at machine scale, and each claim on time per sample through the pairs of its sides."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR
from bench.report import claims
from bench.sweep import rounds
from bench.sweep.compose import compose_all
from tests.sweeper_fixture import sweeper_jobs as jobs_of


def _compose(overrides: list[str], hydra: bool = False):  # noqa: ANN202
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra)


def test_seed003_with_repeats_auto_compares_every_cell_and_its_claims_sides(
    tmp_path: Path,
) -> None:
    fixed = ["+experiment=seed003_distributed_cpu", "scale=machine", "repeats=auto",
             f"data.root={tmp_path}", f"tracking.uri=sqlite:///{tmp_path}/m.db"]  # fmt: skip
    jobs = [job for job in jobs_of(_compose(fixed, hydra=True)) if "repeat=0" in job]
    composed = compose_all(lambda job: _compose([*job, *fixed[2:]]), jobs)
    cfg = composed[0][2]
    assert cfg.repeats == "auto" and cfg.max_repeats == 10  # the command line wins
    configs = [rounds.config_of(job) for _, job, _ in composed]
    assert len(configs) == 30
    found = rounds.comparisons(configs, cfg.claims)
    assert {c for p in found for c in (p.a, p.b)} == set(configs)  # no cell stops at round 2
    pairs = {frozenset((p.a, p.b)) for p in found}
    parsed = [(c, dict(o.split("=", 1) for o in c if "=" in o)) for c in configs]
    timed = [i for i in cfg.claims if claims.parse([i])[0].metric == "ms_per_sample"]
    assert len(timed) == 7
    for item in timed:  # each has pairs of sides here, and the rounds compare every one
        sides = rounds._claimed(parsed, [item])
        assert sides and all(frozenset((s.a, s.b)) in pairs for s in sides), item
