"""One definition of a configuration's identity (bench.core.identity), checked as properties over
many seeded random configurations: two configurations have one config hash exactly when
their identities are equal, and two runs are one configuration in the report exactly when
their identities less the compared axes (the framework, the repeat index) are equal, whether
a run logged every key (before the params were pruned) or only those that can matter."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from bench.core.config import BenchConfig, flatten, to_dict
from bench.core.fields import Identity
from bench.core.identity import config_hash, identity, logged_params
from bench.core.strategy_configs import STRATEGY_CONFIGS
from bench.report.trials import to_trial
from bench.tracking import RunRecord

# Two or three values a key may take (its default among them, so that configurations often
# coincide): keys of every kind of rule, those of no rule too.
VALUES: dict[str, list[Any]] = {
    "framework.name": ["torch", "tf", "mxnet"],
    "framework.version": ["", "2.20.0"],
    "framework.installed": ["", "2.21.0+cpu"],
    "model.name": ["resnet50", "lenet5", "lstm", "transformer"],
    "model.source": ["bench", "stock"],
    "model.seq_len": [32, 64],
    "model.hidden": [128, 256],
    "data.name": ["synthetic", "digits", "cifar10"],
    "data.root": ["data", "/elsewhere"],
    "data.workers": [2, 4],
    "launcher.name": ["process", "docker", "inline"],
    "launcher.kill_grace_s": [5.0, 30.0],
    "launcher.memory_limit_mb": [0, 1024],
    "launcher.docker.gpus": ["", "all"],
    "launcher.docker.heartbeat_timeout_s": [15.0, 60.0],
    "optimizer.name": ["sgd", "adam"],
    "optimizer.momentum": [0.9, 0.5],
    "optimizer.lr": [0.01, 0.001],
    "tracking.uri": ["sqlite:///mlruns/mlflow.db", "http://x:5000"],
    "batch_size": [32, 64],
    "steps_per_epoch": [-1, 5],
    "min_window_s": [2.0, 0.5],
    "max_steps_per_epoch": [10_000, 50],
    "timing": ["auto", "step", "events"],
    "inter_threads": [0, 2],
    "channels_last": [False, True],
    "onednn": ["auto", "on"],
    "cudnn_benchmark": [False, True],
    "tuning.name": ["default", "best"],
    "tuning.budget_s": [600.0, 60.0],
    "tuning.keys": [[], ["threads"]],
    "telemetry.enabled": [True, False],
    "telemetry.interval_s": [0.1, 0.5],
    "repeat": [0, 1],
    "repeats": [1, 3, "auto"],
    "force": [False, True],
    "parity": [False, True],
    "claims": [[], [{"faster": "torch"}]],
    "scale": ["", "smoke"],
    "timeout_s": [600.0, 60.0],
    "equivalence_margin": [0.02, 0.05],
    "seed": [0, 1],
    "precision": ["fp32", "bf16"],
    "breakdown": [False, True],
    "workers": [1, 2],
    "distributed": ["none", "ddp", "mirrored", "kvstore_sync"],
    "distributed.backend": ["auto", "gloo"],
    "distributed.all_reduce": ["auto", "nccl"],
}


def _set(cfg: BenchConfig, key: str, value: Any) -> None:
    if key == "distributed":
        cfg.distributed = STRATEGY_CONFIGS[value]()
        return
    *path, last = key.split(".")
    node: Any = cfg
    for part in path:
        node = getattr(node, part)
    if hasattr(node, last):  # a strategy without this setting keeps none
        setattr(node, last, value)


def random_configs(seed: int, count: int) -> list[BenchConfig]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        cfg = BenchConfig()
        keys = rng.sample(sorted(VALUES), rng.randint(0, 7))
        for key in sorted(keys, key=lambda k: k != "distributed"):  # the strategy first
            _set(cfg, key, rng.choice(VALUES[key]))
        out.append(cfg)
    return out


def _frozen(mapping: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(mapping.items()))


def _one_to_one(pairs: list[tuple[Any, Any]]) -> bool:
    """Whether equal lefts go with equal rights and the other way round."""
    return len(set(pairs)) == len({a for a, _ in pairs}) == len({b for _, b in pairs})


CONFIGS = random_configs(seed=30, count=600)


def test_two_configurations_have_one_hash_exactly_when_their_identities_are_equal() -> None:
    pairs = [(config_hash(cfg), _frozen(identity(cfg))) for cfg in CONFIGS]
    assert len({h for h, _ in pairs}) > 100  # many configurations, and many coincide
    assert len({h for h, _ in pairs}) < len(CONFIGS) * 0.9
    assert _one_to_one(pairs)


def _run(cfg: BenchConfig, rng: random.Random) -> RunRecord:
    """A run of ``cfg`` as the store logs it now, or as it did with every key as a param;
    with the params a run logs beside its config."""
    flat = flatten(to_dict(cfg))
    params = {k: str(v) for k, v in (flat if rng.random() < 0.5 else logged_params(flat)).items()}
    params["num_parameters"] = str(rng.choice([61_706, 25_557_032]))
    if cfg.tuning.name == "best":
        params["tuned.threads"] = str(rng.choice([1, 2]))
    return RunRecord(f"{rng.getrandbits(128):032x}", "t", 0, params, {"bench.status": "ok"}, {})


def _less_compared_axes(cfg: BenchConfig) -> tuple[tuple[str, str], ...]:
    kept = {k: v for k, v in identity(cfg).items() if not k.startswith("framework.")}
    return _frozen({k: v for k, v in kept.items() if k != "repeat"})


def test_runs_are_one_report_group_exactly_when_their_identities_less_the_axes_are() -> None:
    rng = random.Random(31)
    pairs = [(to_trial(_run(cfg, rng)).config, _less_compared_axes(cfg)) for cfg in CONFIGS]
    assert _one_to_one(pairs)
    # One hash is one group: the runs a sweep skips as done are the runs the report pools.
    by_hash = {config_hash(cfg): config for cfg, (config, _) in zip(CONFIGS, pairs, strict=True)}
    for cfg, (config, _) in zip(CONFIGS, pairs, strict=True):
        assert by_hash[config_hash(cfg)] == config


def test_a_run_logged_with_every_key_has_the_identity_of_one_logged_with_fewer() -> None:
    for cfg in CONFIGS:
        every = {k: str(v) for k, v in flatten(to_dict(cfg)).items()}
        assert identity(every) == identity(logged_params(every)) == identity(cfg)


def test_keys_that_decide_nothing_change_neither_the_hash_nor_the_group() -> None:
    """launcher.kill_grace_s (the disagreement issue 30 names: once hashed but not grouped),
    the heartbeat, and keys a run cannot use (the docker settings under the process
    launcher, a sequence model's sizes on an image model, momentum with Adam)."""
    rng = random.Random(32)
    base = BenchConfig(steps_per_epoch=5)
    for key, value in [
        ("launcher.kill_grace_s", 30.0),
        ("launcher.docker.heartbeat_timeout_s", 60.0),
        ("launcher.docker.gpus", "all"),
        ("model.seq_len", 64),
        ("data.root", "/elsewhere"),
        ("telemetry.interval_s", 0.5),
    ]:
        other = dataclasses.replace(base)
        other.launcher = dataclasses.replace(base.launcher, docker=dataclasses.replace(
            base.launcher.docker))  # fmt: skip
        other.model, other.data = dataclasses.replace(base.model), dataclasses.replace(base.data)
        other.telemetry = dataclasses.replace(base.telemetry, enabled=False)
        plain = dataclasses.replace(other, telemetry=dataclasses.replace(other.telemetry))
        _set(other, key, value)
        assert config_hash(other) == config_hash(plain), key
        assert to_trial(_run(other, rng)).config == to_trial(_run(plain, rng)).config, key
    assert config_hash(base) == "41fbcc5ea59ecce3"  # pinned (test_config_hash_pins.py)
    docker = dataclasses.replace(base, launcher=dataclasses.replace(base.launcher, name="docker"))
    gpus = dataclasses.replace(docker, launcher=dataclasses.replace(docker.launcher))
    gpus.launcher.docker = dataclasses.replace(docker.launcher.docker, gpus="all")
    assert config_hash(gpus) != config_hash(docker)  # where it is used, it counts


def test_every_rule_of_the_schema_is_one_the_identity_reads() -> None:
    """Every field's metadata is an Identity (no other spelling slips past the rules)."""

    def walk(cls: type) -> list[Any]:
        out = []
        for f in dataclasses.fields(cls):
            out += [f.metadata["identity"]] if "identity" in f.metadata else []
            default = f.default_factory() if callable(f.default_factory) else f.default
            if dataclasses.is_dataclass(default):
                out += walk(type(default))
        return out

    rules = walk(BenchConfig)
    assert rules and all(isinstance(r, Identity) for r in rules)
