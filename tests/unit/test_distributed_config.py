"""Distributed settings are checked at the one boundary, before any process starts."""

from __future__ import annotations

import pytest

from bench.checks.preflight import validate
from bench.core.config import (
    BenchConfig,
    ConfigError,
    distributed_config,
    flatten,
    from_dict,
    to_dict,
)
from bench.core.identity import config_hash, identity
from bench.core.strategy_configs import (
    STRATEGY_CONFIGS,
    DDPConfig,
    DistributedConfig,
    MirroredConfig,
    MultiWorkerConfig,
)
from bench.trial.distributed.registry import scaling_baselines


def problems(**fields: object) -> list[str]:
    framework = fields.pop("framework", "torch")
    fields["distributed"] = distributed_config(str(fields.get("distributed", "none")))
    cfg = BenchConfig(model=BenchConfig().model.__class__("lenet5"), device="cpu", **fields)  # type: ignore[arg-type]
    cfg.framework.name = str(framework)
    try:
        validate(cfg)
    except ConfigError as err:
        return err.problems
    return []


def test_a_torch_strategy_with_tf_lists_the_tf_strategies() -> None:
    got = problems(framework="tf", distributed="ddp", workers=2)
    assert got == [
        "distributed: 'ddp' (DistributedDataParallel, torchrun) is not available with "
        "framework=tf; choose one of none, mirrored, multiworker, ps_async, horovod, model_parallel"
    ]


def test_jax_takes_jax_dp_only_and_jax_dp_takes_jax_only() -> None:
    """framework=jax with another framework's strategy, and jax_dp with another framework:
    each refused naming distributed and what is allowed (issue 35)."""
    (got,) = problems(framework="jax", distributed="ddp", workers=2)
    assert got.startswith("distributed: 'ddp' ")
    assert got.endswith("choose one of none, jax_dp, jax_distributed")
    (got,) = problems(framework="torch", distributed="jax_dp", workers=2)
    assert got.startswith("distributed: 'jax_dp' (jax.sharding data parallelism")
    assert "framework=torch; choose one of none, dp, ddp" in got
    assert problems(framework="jax", distributed="jax_dp", workers=2) == []
    assert problems(framework="jax", distributed="jax_distributed", workers=2) == []
    assert problems(framework="jax", distributed="jax_distributed", workers=2, nodes=2) == []
    (got,) = problems(framework="jax", distributed="jax_dp", workers=2, nodes=2)
    assert (
        got
        == "nodes: distributed=jax_dp runs on one node; across 2 nodes use one of jax_distributed"
    )


def test_unknown_strategy_names_the_allowed_ones() -> None:
    (got,) = problems(distributed="allreduce")
    assert got.startswith("distributed: 'allreduce' is not allowed; choose one of none, dp, ddp")


def test_dataparallel_is_refused_on_the_cpu() -> None:
    (got,) = problems(distributed="dp", workers=2)
    assert got.startswith("distributed: dp (DataParallel)")
    assert "needs at least 2 CUDA devices" in got and "distributed=ddp" in got


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"distributed": "ps_async", "framework": "tf", "workers": 2},
            "ps: distributed=ps_async needs",
        ),
        ({"distributed": "ddp", "workers": 2, "ps": 1}, "ps: parameter servers are used only"),
        ({"workers": 2}, "workers: 2 workers on 1 node(s) need a distributed strategy"),
        ({"distributed": "ddp", "workers": 0}, "workers: must be >= 1, got 0"),
        (
            {"distributed": "mirrored", "framework": "tf", "workers": 2, "nodes": 2},
            "nodes: distributed=mirrored runs on one node; across 2 nodes use one of "
            "multiworker, ps_async, horovod",
        ),
        ({"distributed": "model_parallel", "workers": 3}, "workers: model_parallel splits"),
        ({"distributed": "ddp", "workers": 2, "mode": "infer"}, "mode: distributed=ddp measures"),
    ],
)
def test_each_problem_names_its_field(fields: dict[str, object], expected: str) -> None:
    got = problems(**fields)
    assert any(p.startswith(expected) for p in got), got


def test_model_parallel_with_torch_needs_two_gpus_and_tf_runs_on_logical_cpus() -> None:
    (got,) = problems(distributed="model_parallel", workers=2)
    assert got.startswith("distributed: model_parallel with framework=torch puts its 2 stages")
    assert "2 CUDA devices" in got and "framework=tf runs it on 2 logical CPU devices" in got
    assert problems(framework="tf", distributed="model_parallel", workers=2) == []


def test_valid_distributed_configs_pass() -> None:
    assert problems(distributed="ddp", workers=2) == []
    assert problems(framework="tf", distributed="mirrored", workers=2) == []
    assert problems(framework="tf", distributed="ps_async", workers=2, ps=1) == []
    # Across nodes: valid here; whether an allocation has them is checked where it runs.
    assert problems(distributed="ddp", workers=1, nodes=2) == []


def test_scaling_baselines_differ_only_in_distribution() -> None:
    cfg = BenchConfig(distributed=distributed_config("ddp"), workers=2)
    same, plain = scaling_baselines(cfg)
    assert (same.distributed.name, same.workers) == ("ddp", 1)
    assert (plain.distributed.name, plain.workers) == ("none", 1)
    assert config_hash(plain) == config_hash(BenchConfig())
    assert scaling_baselines(BenchConfig(distributed=distributed_config("ddp"), workers=1)) == []


def test_ps_0_means_one_server_per_node_for_the_strategies_that_need_them() -> None:
    """``distributed=kvstore_sync`` alone works: ps=0 (the default) is one server per node,
    logged and hashed as that number, so ps=0 and ps=1 on one node are one configuration."""
    from hydra import compose, initialize_config_dir

    from bench.cli import CONF_DIR
    from bench.sweep.compose import to_bench_config

    def composed(*overrides: str) -> BenchConfig:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return to_bench_config(compose("config", overrides=list(overrides)))

    default = composed("framework=tf", "distributed=ps_async", "workers=2")
    explicit = composed("framework=tf", "distributed=ps_async", "workers=2", "ps=1")
    assert default.ps == 1 and config_hash(default) == config_hash(explicit)
    assert composed("framework=tf", "distributed=ps_async", "nodes=2").ps == 2
    assert composed("framework=tf", "distributed=ps_async", "ps=3").ps == 3
    assert composed("distributed=ddp", "workers=2").ps == 0  # no servers: left alone


def test_the_registry_holds_what_the_parity_check_and_the_batch_rules_read() -> None:
    """The facts other packages used to spell out by strategy name, now one table."""
    from bench.parity import strategy
    from bench.trial.distributed import registry

    assert strategy.COVERED == {
        "ddp": ("torch",),
        "mirrored": ("tf",),
        "multiworker": ("tf",),
        "horovod": ("torch", "tf"),
        "model_parallel": ("tf",),
        "kvstore_sync": ("mxnet",),
        "kvstore_device": ("mxnet",),
        "jax_dp": ("jax",),
        "jax_distributed": ("jax",),
    }
    assert strategy.ASYNC == {"kvstore_async": ("mxnet",)}
    facts = registry.STRATEGIES.items()
    assert [n for n, s in facts if s.whole_batch] == ["model_parallel"]
    configs = STRATEGY_CONFIGS.items()
    assert [n for n, c in configs if c.per_device] == ["kvstore_device"]
    assert [n for n, s in facts if s.pinned_version_only] == ["horovod"]
    assert [n for n, s in facts if s.asynchronous] == ["ps_async", "kvstore_async"]
    assert not registry.distributes(registry.NONE) and registry.distributes("ddp")


def test_no_strategy_name_is_spelled_out_above_the_trial_side() -> None:
    """No comparison with a strategy's name (``none`` included, where the other side is a
    ``distributed`` value) anywhere in bench, bench.trial.distributed included: the facts of each
    strategy's typed config (bench.core.strategies) answer, read from ``cfg.distributed`` on
    the trial side and from the registry elsewhere (``distributes`` for ``none``)."""
    import ast
    from pathlib import Path

    from bench.trial.distributed.registry import NONE, STRATEGIES

    names = set(STRATEGIES) - {NONE}  # "none" is also, e.g., a wheel's ABI tag
    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted((root / "bench").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            about = "distributed" in ast.unparse(node)
            for side in sides:
                items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                for item in items:
                    if isinstance(item, ast.Constant) and (
                        item.value in names or (about and item.value == NONE)
                    ):
                        found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert found == [], "look the strategy up in bench.trial.distributed.registry instead"


def composed(*overrides: str) -> BenchConfig:
    from hydra import compose, initialize_config_dir

    from bench.cli import CONF_DIR
    from bench.sweep.compose import to_bench_config

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return to_bench_config(compose("config", overrides=list(overrides)))


def test_distributed_is_a_group_with_one_typed_config_per_strategy() -> None:
    """Every strategy of the registry is an option of the group ``distributed``, composed
    into its own typed config, with its settings under ``distributed.``."""
    from bench.trial.distributed.registry import STRATEGIES

    assert list(STRATEGY_CONFIGS) == list(STRATEGIES)
    for name, cls in STRATEGY_CONFIGS.items():
        framework = STRATEGIES[name].frameworks[0]
        got = composed(f"framework={framework}", f"distributed={name}").distributed
        assert type(got) is cls and got.name == name
    assert type(composed().distributed) is DistributedConfig
    ddp = composed("distributed=ddp", "distributed.backend=gloo", "workers=2", "nodes=2")
    assert ddp.distributed == DDPConfig(backend="gloo") and (ddp.workers, ddp.nodes) == (2, 2)
    tf = composed("framework=tf", "distributed=mirrored", "distributed.all_reduce=one_device")
    assert tf.distributed == MirroredConfig(all_reduce="one_device")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["distributed.backend=gloo"], "distributed.backend"),  # none has no backend
        (["distributed=ddp", "distributed.backend=tcp"], "distributed.backend"),
        (["distributed=ddp", "distributed.backend=nccl", "device=cpu"], "distributed.backend"),
        (["framework=tf", "distributed=mirrored", "distributed.all_reduce=nccl", "device=cpu"],
         "distributed.all_reduce"),
        (["framework=tf", "distributed=multiworker", "distributed.communication=nccl",
          "device=cpu"], "distributed.communication"),
        (["distributed=ddp", "+distributed.bucket_mb=25"], "distributed.bucket_mb"),
    ],
)  # fmt: skip
def test_a_strategys_settings_are_refused_by_name(overrides: list[str], field: str) -> None:
    from bench.sweep.compose import compose_all

    def compose(job: list[str]):  # noqa: ANN202
        from hydra import compose as hydra_compose
        from hydra import initialize_config_dir

        from bench.cli import CONF_DIR

        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return hydra_compose("config", overrides=job)

    with pytest.raises(ConfigError) as err:
        ((_, _, cfg),) = compose_all(compose, [overrides])
        validate(cfg)
    assert field in str(err.value)


def test_a_strategy_hashes_and_logs_as_its_name_until_a_setting_changes() -> None:
    """Runs logged when ``distributed`` was a bare name keep their hash and group with new
    runs of the same configuration; a changed setting is a different configuration."""
    old = {**flatten(to_dict(BenchConfig())), "distributed": "ddp", "workers": 2}
    new = flatten(to_dict(BenchConfig(distributed=DDPConfig(), workers=2)))
    assert new["distributed"] == "ddp" and new["distributed.backend"] == "auto"
    assert identity(old) == identity(new)  # the default setting: as a run without it
    gloo = BenchConfig(distributed=DDPConfig(backend="gloo"), workers=2)
    assert identity(flatten(to_dict(gloo))) != identity(new)
    assert config_hash(gloo) != config_hash(BenchConfig(distributed=DDPConfig(), workers=2))
    # config.json of a run logged before: the bare name is read as the strategy's config
    data = {**to_dict(BenchConfig()), "distributed": "multiworker"}
    assert from_dict(BenchConfig, data).distributed == MultiWorkerConfig()
    with pytest.raises(ConfigError, match="distributed.backend"):
        distributed_config({"name": "mirrored", "backend": "gloo"})


def test_the_settings_reach_the_frameworks() -> None:
    """What each setting turns into (auto: what bench chose before the setting existed)."""
    import tensorflow as tf

    from bench.trial.distributed import ddp, mirrored, multiworker

    def cfg(strategy: DistributedConfig) -> BenchConfig:
        return BenchConfig(distributed=strategy, workers=2)

    assert ddp.backend_of(cfg(DDPConfig()), gpu=False) == "gloo"
    assert ddp.backend_of(cfg(DDPConfig()), gpu=True) == "nccl"
    assert ddp.backend_of(cfg(DDPConfig(backend="gloo")), gpu=True) == "gloo"
    reduce = mirrored._all_reduce
    assert isinstance(reduce(cfg(MirroredConfig()), False), tf.distribute.ReductionToOneDevice)
    assert reduce(cfg(MirroredConfig()), True) is None  # TensorFlow's own choice on GPUs
    picked = reduce(cfg(MirroredConfig(all_reduce="hierarchical_copy")), True)
    assert isinstance(picked, tf.distribute.HierarchicalCopyAllReduce)
    impl = tf.distribute.experimental.CommunicationImplementation
    assert multiworker._communication(cfg(MultiWorkerConfig()), False) == impl.RING
    assert multiworker._communication(cfg(MultiWorkerConfig()), True) == impl.NCCL
    ring = MultiWorkerConfig(communication="ring")
    assert multiworker._communication(cfg(ring), True) == impl.RING


def test_each_strategys_facts_are_defined_once_on_its_typed_config() -> None:
    """One place per strategy: the registry is its typed configs (no table of its own), and
    no implementation module restates a fact (``whole_batch`` is the spec's, not a
    ``data_parallel`` flag beside it)."""
    import ast
    from pathlib import Path

    from bench.trial.distributed import registry

    assert all(registry.STRATEGIES[n] is c for n, c in STRATEGY_CONFIGS.items())
    assert list(registry.STRATEGIES) == list(STRATEGY_CONFIGS)
    facts = {"what", "frameworks", "runner", "gpu_only", "whole_batch", "stages", "asynchronous"}
    facts |= {"parity", "pinned_version_only", "parameter_servers", "multi_node", "data_parallel"}
    root = Path(__file__).resolve().parents[2] / "bench" / "distributed"
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    targets = item.targets if isinstance(item, ast.Assign) else []
                    targets += [item.target] if isinstance(item, ast.AnnAssign) else []
                    names = {t.id for t in targets if isinstance(t, ast.Name)}
                    found += [f"{path.name}:{node.name}.{n}" for n in names & facts]
    assert found == [], "a strategy's facts live on its typed config (bench.core.strategy_configs)"
    for name, cls in STRATEGY_CONFIGS.items():
        assert bool(cls.module) == (cls.runner == "coordinator"), name
        assert set(cls.gpu_only) <= set(cls.frameworks) >= set(cls.parity), name
