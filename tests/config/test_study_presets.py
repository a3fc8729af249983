"""The study presets (conf/experiment/seed*.yaml): each composes and validates at every
scale without running a trial, its cells this machine cannot run are listed with the reason,
and its claims parse.  Also the sweeper's grid (the union of products) on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from bench.checks.availability import split_unavailable
from bench.cli import CONF_DIR
from bench.core.config import ConfigError
from bench.report import claims
from bench.sweep.compose import compose_all
from bench.sweep.jobs import check_all, expand, grid_blocks, pairs
from tests.cifar_fixture import write_cifar_archive
from tests.sweeper_fixture import sweeper_jobs as jobs_of

PRESETS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("seed*.yaml"))
SCALES = ("paper", "machine", "smoke")


def _compose(overrides: list[str], hydra: bool = False) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra)


def _check(preset: str, scale: str, tmp_path: Path) -> tuple[list[Any], list[tuple[str, str]]]:
    """Every distinct job of the preset at ``scale`` composed and validated here (CIFAR
    archives generated for the paper scale; one round of repeats); returns the runnable
    jobs and the skipped cells."""
    for name in ("cifar10", "cifar100"):
        write_cifar_archive(tmp_path / "data", name, per_member=4)
    fixed = [
        f"+experiment={preset}",
        f"scale={scale}",
        f"data.root={tmp_path / 'data'}",
        f"tracking.uri=sqlite:///{tmp_path}/m.db",
    ]
    jobs = [job[1:] if job[0].startswith("repeat=") else job
            for job in jobs_of(_compose(fixed, hydra=True))]  # fmt: skip
    jobs = [job for i, job in enumerate(jobs) if job not in jobs[:i]]
    composed = compose_all(lambda job: _compose([*job, *fixed[2:]]), jobs)
    kept, skipped = split_unavailable(composed)
    check_all([(label, cfg) for label, _, cfg in kept])
    return kept, skipped


def test_every_study_has_a_preset() -> None:
    assert PRESETS == [
        "seed000_single_gpu",
        "seed001_frameworks",
        "seed003_distributed_cpu",
        "seed004_cifar10_strategies",
    ]


def _needs_horovod(preset: str) -> bool:
    """A preset with Horovod cells validates only where Horovod is installed (the check
    refuses distributed=horovod without it): under scripts/test.sh it waits for the
    background build, like the Horovod tests, and runs with them, last."""
    return "horovod" in (Path(CONF_DIR) / "experiment" / f"{preset}.yaml").read_text()


# The paper and machine scales compose dozens of distinct group choices through Hydra (2-8 s a
# preset on 2 cores): the slow tier's; the smoke scale, in the fast tier, composes every preset.
@pytest.mark.parametrize(
    "scale", [pytest.param(s, marks=[] if s == "smoke" else [pytest.mark.slow]) for s in SCALES]
)
@pytest.mark.parametrize(
    "preset",
    [pytest.param(p, marks=[pytest.mark.horovod] if _needs_horovod(p) else []) for p in PRESETS],
)
def test_preset_composes_and_validates(
    preset: str, scale: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if _needs_horovod(preset):
        request.getfixturevalue("horovod_ready")
    if (preset, scale) == ("seed003_distributed_cpu", "paper"):  # MXNet on 3 nodes: refused
        with pytest.raises(ConfigError) as refused:
            _check(preset, scale, tmp_path)
        said = str(refused.value)
        assert "distributed=kvstore_sync runs on one node, and mxnet has no strategy" in said
        assert "framework=tf" not in said and "framework=torch" not in said  # only MXNet's
        return
    kept, skipped = _check(preset, scale, tmp_path)
    cfgs = [cfg for _, _, cfg in kept]
    print(f"{preset} scale={scale}: {len(kept)} runnable, {len(skipped)} not run here")
    for label, why in skipped:
        print(f"  {label}: {why}")
        assert why.startswith(("needs a GPU", "needs 3 nodes", "needs horovod"))
    assert all(cfg.scale == scale and cfg.skip_unavailable for cfg in cfgs)
    assert all(cfg.tracking.experiment == f"{preset}_{scale}" for cfg in cfgs)
    claims.parse(cfgs[0].claims if cfgs else [])
    if scale == "machine":
        assert all(cfg.repeats >= 4 for cfg in cfgs)  # or every claim is inconclusive
    if scale == "smoke":
        assert all(cfg.repeats == 1 and cfg.steps_per_epoch <= 2 for cfg in cfgs)


@pytest.mark.slow  # a whole paper- or machine-scale matrix through Hydra
def test_seed003_matrix_is_the_studys(tmp_path: Path) -> None:
    """Table III's six workloads by Table I's five systems, at machine scale on one node
    with the cache off (so the claims needing a network or the study's caching read "not
    measured here"); the paper scale's refusal is test_preset_composes_and_validates'."""
    kept, skipped = _check("seed003_distributed_cpu", "machine", tmp_path)
    cells = {
        (c.framework.name, c.distributed.name, c.model.name, c.num_classes) for _, _, c in kept
    }
    assert len(cells) == len(kept) == 6 * 5 and not skipped
    systems = {(fw, d) for fw, d, _, _ in cells}
    assert systems == {
        ("tf", "multiworker"),
        ("tf", "ps_async"),
        ("torch", "ddp"),
        ("mxnet", "kvstore_sync"),
        ("mxnet", "kvstore_async"),
    }
    assert {c.image_size for _, _, c in kept if c.model.name == "alexnet"} == {64}
    assert all(c.nodes == 1 and not c.data.cache for _, _, c in kept)  # loopback, no cache


@pytest.mark.slow  # a whole paper- or machine-scale matrix through Hydra
def test_seed001_lists_its_gpu_cells_on_a_cpu_machine(tmp_path: Path) -> None:
    from bench.checks.device import host_gpus

    if host_gpus()[0]:
        pytest.skip("this host has a GPU: nothing is skipped")
    kept, skipped = _check("seed001_frameworks", "smoke", tmp_path)
    assert kept and skipped
    assert all(c.device in ("cpu", "auto") for _, _, c in kept)
    assert all("needs a GPU" in why for _, why in skipped)


def test_an_unknown_scale_is_refused() -> None:
    with pytest.raises(
        Exception, match="Could not find 'scale/huge'(.|\n)*Available options in 'scale'"
    ):
        _compose(["+experiment=seed003_distributed_cpu", "scale=huge"])


def _parse(items: list[str]) -> list[Any]:
    return OverridesParser.create().parse_overrides(items)


def test_a_grid_is_the_union_of_its_blocks_products() -> None:
    blocks = grid_blocks(
        {"batch_size": "8"},
        [{"framework": "tf", "distributed": "multiworker,ps_async"}, {"framework": "torch"}],
        ["model=lenet5"],
    )
    jobs = expand(_parse(["batch_size=8"]), 1, [_parse(b) for b in blocks])
    assert [pairs(j) for j in jobs] == [
        {"batch_size": "8", "framework": "tf", "distributed": "multiworker", "model": "lenet5"},
        {"batch_size": "8", "framework": "tf", "distributed": "ps_async", "model": "lenet5"},
        {"batch_size": "8", "framework": "torch", "model": "lenet5"},
    ]


def test_grid_axes_cross_and_the_command_line_wins() -> None:
    grid = {
        "workload": [{"model": "lenet5"}, {"model": "alexnet", "image_size": 64}],
        "system": [{"framework": "tf,torch"}, {"framework": "mxnet"}],
    }
    blocks = grid_blocks({}, grid, ["framework=torch"])
    jobs = expand([], 2, [_parse(b) for b in blocks])
    first_round = [pairs(j) for j in jobs if "repeat=0" in j]
    # the command line narrows every block; blocks that became equal run once
    assert first_round == [
        {"repeat": "0", "model": "lenet5", "framework": "torch"},
        {"repeat": "0", "model": "alexnet", "image_size": "64", "framework": "torch"},
    ]
    assert len(jobs) == 4  # two rounds, the second reversed
    assert pairs(jobs[2])["model"] == "alexnet"


@pytest.mark.parametrize(
    "grid",
    [[], [{}], ["model=lenet5"], {"axis": []}, {"axis": [{"model": "lenet5"}, "x"]}, {}],
)
def test_a_malformed_grid_names_the_field(grid: Any) -> None:
    with pytest.raises(ConfigError, match="hydra.sweeper.grid"):
        grid_blocks({}, grid, [])


@pytest.mark.parametrize("preset", ["seed003_distributed_cpu", "seed004_cifar10_strategies"])
def test_smaller_scales_take_the_cifar_archives_where_they_are(preset: str, tmp_path: Path) -> None:
    """machine and smoke train on CIFAR where its archive is under data.root, else on
    synthetic batches of its shape; the job's config says which (it is what the run logs)."""
    from bench.sweep.compose import to_bench_config

    root = tmp_path / "data"
    root.mkdir()
    fixed = [f"+experiment={preset}", "scale=smoke", f"data.root={root}"]
    assert to_bench_config(_compose(fixed)).data.name == "synthetic"
    write_cifar_archive(root, "cifar10", per_member=4)
    cfg = to_bench_config(_compose(fixed))
    assert (cfg.data.name, cfg.num_classes, cfg.data.evaluate) == ("cifar10", 10, False)
    (root / "cifar-10-python.tar.gz").write_bytes(b"not an archive")  # unreadable: synthetic
    assert to_bench_config(_compose(fixed)).data.name == "synthetic"
    hundred = to_bench_config(_compose([*fixed, "num_classes=100"]))
    assert hundred.data.name == "synthetic"  # no CIFAR-100 archive here


def test_a_cell_that_cannot_run_is_named_once_whatever_its_repeats() -> None:
    from bench.core.config import BenchConfig

    cfg = BenchConfig(device="cuda", skip_unavailable=True)
    composed = [(f"framework=torch model=resnet18 repeat={i} device=cuda", [], cfg)
                for i in range(4)]  # fmt: skip
    kept, skipped = split_unavailable(composed)
    if kept:
        pytest.skip("this machine has a GPU")
    assert [label for label, _ in skipped] == ["framework=torch model=resnet18 device=cuda"]


# --- the paper scales: the cells docs/studies.md's fidelity tables promise (issue 37) --------


def _cells(preset: str, scale: str, tmp_path: Path, *extra: str) -> list[Any]:
    """Every distinct cell of the preset at ``scale`` as composed (not validated: a paper
    scale's cells need GPUs, nodes or archives this machine may lack)."""
    fixed = [f"+experiment={preset}", f"scale={scale}", f"data.root={tmp_path}",
             f"tracking.uri=sqlite:///{tmp_path}/m.db", *extra]  # fmt: skip
    jobs = [job for job in jobs_of(_compose(fixed, hydra=True))
            if not any(o.startswith("repeat=") and o != "repeat=0" for o in job)]  # fmt: skip
    return [cfg for _, _, cfg in compose_all(lambda job: _compose([*job, *fixed[2:]]), jobs)]


def _claims(preset: str) -> list[claims.Claim]:
    from omegaconf import OmegaConf

    return claims.parse(OmegaConf.to_container(_compose([f"+experiment={preset}"]).claims))


@pytest.mark.slow  # a whole paper- or machine-scale matrix through Hydra
def test_seed000_paper_runs_the_seven_networks_bench_has_on_a_gpu(tmp_path: Path) -> None:
    cells = _cells("seed000_single_gpu", "paper", tmp_path)
    models = {c.model.name for c in cells}
    assert models == {"vgg16", "inception_v3", "deepspeech2", "lstm", "bert_base"}
    assert {c.device for c in cells} == {"cuda"}
    # jax (issue 35) beside torch and tf on every network, the sequence models included,
    # each network's cells otherwise the same (the comparison is per network)
    frameworks = {(c.framework.name, c.model.name) for c in cells}
    for name in ("torch", "tf", "jax"):
        assert {m for f, m in frameworks if f == name} == models
    assert len(cells) == 3 * len(models)
    shapes = {(c.model.name, c.batch_size, c.image_size, c.distributed.name) for c in cells}
    assert len(shapes) == len(models)
    assert "resnet50" not in {
        c.model.name for c in _cells("seed000_single_gpu", "machine", tmp_path)
    }


@pytest.mark.slow
def test_seed001_paper_cells_and_claims_are_the_studys(tmp_path: Path) -> None:
    cells = _cells("seed001_frameworks", "paper", tmp_path)
    cpu = [c for c in cells if c.device == "cpu"]
    assert cpu and all(c.mode == "infer" and c.threads == 1 for c in cpu)  # one CPU core
    assert all(c.device == "cuda" for c in cells if c.device != "cpu")  # Fig. 4 too
    distributed = {(c.distributed.name, c.workers) for c in cells if c.distributed.name != "none"}
    assert distributed == {("dp", 2), ("ddp", 2)}
    # DDP's one-GPU baseline: the same training undistributed (fig1's cell)
    (ddp,) = [c for c in cells if c.distributed.name == "ddp"]
    assert any(
        (c.distributed.name, c.model.name, c.batch_size, c.image_size, c.device)
        == ("none", ddp.model.name, ddp.batch_size, ddp.image_size, "cuda")
        and c.mode == "train"
        and c.framework.name == "torch"
        for c in cells
    )
    # Fig. 5's batch series (the only training at batch 128): TensorFlow, as the study measured
    assert {c.framework.name for c in cells if c.mode == "train" and c.batch_size == 128} == {"tf"}
    # jax (issue 35) in the framework comparisons only (fig1-fig3), not Fig. 4/5 or DDP
    jax = [c for c in cells if c.framework.name == "jax"]
    assert jax and all(c.batch_size in (16, 32, 64) and c.distributed.name == "none" for c in jax)
    assert {c.image_size for c in jax} == {128, 224}
    found = {c.text: c for c in _claims("seed001_frameworks")}
    assert all("section VI-" in c.source for c in found.values())
    # The study's claims still compare torch with tf: a comparison's sides, and the one
    # claim whose sides name no framework (Fig. 4's trend) kept to them.
    for claim in found.values():
        sides = [claim.faster.get("framework"), claim.slower.get("framework")]
        named = claim.where.get("framework") or [f for s in sides if s for f in s]
        assert set(named) <= {"torch", "tf"}, claim.text
    cpu_claim = found["TensorFlow infers faster than PyTorch on the CPU, with a few exceptions"]
    assert cpu_claim.kind == "majority" and "one CPU core" in cpu_claim.caveat
    (power_claim,) = [c for c in found.values() if c.metric == "power_w"]
    assert power_claim.where["framework"] == ["tf"] and power_claim.requires == {"device": "cuda"}
    (scaling,) = [c for c in found.values() if c.by_at_least_pct]
    assert scaling.faster["distributed"] == ["ddp"] and scaling.slower["workers"] == ["1"]


SEED003_WITHOUT_MXNET = (
    'hydra.sweeper.grid.system=[{framework: tf, distributed: "multiworker,ps_async", '
    "data.cache: true}, {framework: torch, distributed: ddp, data.cache: false}]"
)


@pytest.mark.slow
def test_seed003_paper_runs_mxnet_on_3_nodes_and_the_rest_as_the_study(
    tmp_path: Path,
) -> None:
    cells = _cells("seed003_distributed_cpu", "paper", tmp_path)
    mxnet = [c for c in cells if c.framework.name == "mxnet"]
    assert len(mxnet) == 12 and all(c.nodes == 3 for c in mxnet)
    rest = _cells("seed003_distributed_cpu", "paper", tmp_path, SEED003_WITHOUT_MXNET)
    assert len(rest) == 18 and {c.framework.name for c in rest} == {"tf", "torch"}
    assert all((c.nodes, c.workers, c.batch_size, c.epochs) == (3, 1, 42, 10) for c in rest)
    assert all(c.steps_per_epoch == 396 and c.data.name.startswith("cifar") for c in rest)
    # Table I: TensorFlow caches, PyTorch (and MXNet) do not
    assert {(c.framework.name, c.data.cache) for c in rest} == {("tf", True), ("torch", False)}
    assert {(c.framework.name, c.data.cache) for c in mxnet} == {("mxnet", False)}
    assert {c.image_size for c in rest if c.model.name == "alexnet"} == {64}
    found = {c.text: c for c in _claims("seed003_distributed_cpu")}
    comm = [c for c in found.values() if c.metric == "time_comm_ms"]
    assert len(comm) == 4 and all(c.requires == {"nodes": 2} for c in comm)
    mxnet_torch = [c for c in comm if c.slower["framework"] == ["torch"]]
    assert mxnet_torch[0].where["model"] == ["alexnet", "resnet18", "resnet50"]  # no LeNet-5
    loading = [c for c in found.values() if "data" in c.requires]
    assert len(loading) == 4
    assert all(c.requires["data_cache"]["tf"] for c in loading if "data_cache" in c.requires)
    (backward,) = [c for c in found.values() if c.metric == "time_backward_ms"]
    assert str(backward.requires["versions"]["tf"]) == "<2.9"


@pytest.mark.slow  # a whole paper- or machine-scale matrix through Hydra
def test_seed004_paper_uses_ddp_on_the_gpu(tmp_path: Path) -> None:
    cells = _cells("seed004_cifar10_strategies", "paper", tmp_path)
    assert {c.device for c in cells} == {"cuda"}
    assert {(c.framework.name, c.distributed.name, c.workers) for c in cells} == {
        ("tf", "none", 1), ("torch", "none", 1), ("tf", "horovod", 1),
        ("torch", "model_parallel", 2), ("tf", "model_parallel", 2),
        ("tf", "mirrored", 2), ("torch", "ddp", 2),
    }  # fmt: skip
    assert all(c.data.name == "cifar10" for c in cells)
    # the global batch is 64: "each GPU is given a section of the batches" (Methodology)
    assert all(c.batch_size * (c.workers if c.distributed.name in ("mirrored", "ddp") else 1)
               == 64 for c in cells)  # fmt: skip
    for scale in ("machine", "smoke"):
        names = {c.distributed.name for c in _cells("seed004_cifar10_strategies", scale, tmp_path)}
        assert "ddp" in names and "dp" not in names
    found = _claims("seed004_cifar10_strategies")
    (data_parallel,) = [c for c in found if c.faster.get("distributed") == ["mirrored", "ddp"]
                        and c.metric == "ms_per_sample"]  # fmt: skip
    assert "A100" in data_parallel.caveat
    util = [c for c in found if c.metric == "gpu_util_pct"]
    assert len(util) == 4 and all(c.requires == {"device": "cuda"} for c in util)
