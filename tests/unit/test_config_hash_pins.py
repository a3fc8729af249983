"""Runs already in a store stay comparable: an unchanged configuration keeps its config hash.
The values are the hashes bench computed for these configurations before the re-layering
(fe11a87); a change of the schema that would move them must map old runs explicitly."""

from __future__ import annotations

import dataclasses

import pytest

from bench.core.config import (
    BenchConfig,
    DataConfig,
    FrameworkConfig,
    LauncherConfig,
    ModelConfig,
    OptimizerConfig,
    TelemetryConfig,
    TuningConfig,
    distributed_config,
)
from bench.core.identity import config_hash, identity
from bench.core.strategy_configs import DDPConfig, MirroredConfig


def B() -> BenchConfig:  # noqa: N802 - reads as the class it stands for
    """The default configuration as it was when these hashes were pinned: 5 steps per
    epoch (the default is now -1, auto, a different measurement with hashes of its own)."""
    return BenchConfig(steps_per_epoch=5)


PINNED = [
    ("default", B(), "41fbcc5ea59ecce3"),
    (
        "lenet5 tf batch 42",
        dataclasses.replace(
            B(), batch_size=42, framework=FrameworkConfig("tf"), model=ModelConfig(name="lenet5")
        ),
        "38d3423f3b30d2b0",
    ),
    (
        "ddp 2x2 nodes",
        dataclasses.replace(B(), distributed=distributed_config("ddp"), workers=2, nodes=2),
        "d94d2938e5734d87",
    ),
    (
        "mxnet kvstore_sync ps1",
        dataclasses.replace(
            B(),
            framework=FrameworkConfig("mxnet"),
            distributed=distributed_config("kvstore_sync"),
            workers=2,
            ps=1,
        ),
        "50d147c733da7dc5",
    ),
    (
        "docker cifar10 adam",
        dataclasses.replace(
            B(),
            launcher=LauncherConfig(name="docker"),
            data=DataConfig(name="cifar10"),
            optimizer=OptimizerConfig(name="adam", lr=0.001),
        ),
        "1c6e56eec256d1f2",
    ),
]


# Pinned when the identity's rules moved into the fields' metadata (issue 30, bench.core.identity):
# the hashes bench.core.config.config_hash gave before, one per kind of rule.
PINNED += [
    ("auto steps (today's default)", BenchConfig(), "2551d893289f1ba2"),
    ("auto window, repeat 1", BenchConfig(min_window_s=0.5, max_steps_per_epoch=50, repeat=1),
     "bcf94d3223ec2e49"),
    ("tuning best", dataclasses.replace(B(), tuning=TuningConfig("best", budget_s=60.0)),
     "63749b96c71bb99a"),
    ("timing events", dataclasses.replace(B(), timing="events"), "0cfcc971e63962d9"),
    ("inter_threads channels_last onednn",
     dataclasses.replace(B(), inter_threads=2, channels_last=True, onednn="on"),
     "8ea738de8fd4b50d"),
    ("tf version", dataclasses.replace(B(), framework=FrameworkConfig("tf", "2.20.0")),
     "67c08e6681022a5c"),
    ("installed", dataclasses.replace(
        B(), framework=FrameworkConfig("torch", "installed", "2.11.0+cu130 cuda=13.0")),
     "46b4b12f7de6e228"),
    ("ddp gloo", dataclasses.replace(B(), distributed=DDPConfig(backend="gloo"), workers=2),
     "719c652e0caba1aa"),
    ("mirrored default setting", dataclasses.replace(
        B(), framework=FrameworkConfig("tf"), distributed=MirroredConfig(), workers=2),
     "a3e17d83086c744c"),
    ("lstm sizes", dataclasses.replace(B(), model=ModelConfig("lstm", seq_len=64, hidden=256)),
     "3f3172ae18ea7e24"),
    ("no telemetry", dataclasses.replace(B(), telemetry=TelemetryConfig(enabled=False)),
     "888516053d75f4dc"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "cfg", "pinned"), PINNED, ids=[p[0] for p in PINNED])
def test_an_unchanged_configuration_keeps_its_hash(
    name: str, cfg: BenchConfig, pinned: str
) -> None:
    assert config_hash(cfg) == pinned


def test_where_a_run_is_logged_is_not_hashed() -> None:
    cfg = B()
    cfg.tracking.uri, cfg.timeout_s, cfg.force, cfg.report = "http://x:5000", 5.0, True, True
    assert config_hash(cfg) == "41fbcc5ea59ecce3"


def test_the_auto_windows_settings_are_hashed_only_with_auto_steps() -> None:
    """min_window_s and max_steps_per_epoch change what an auto trial measures, and nothing
    of a trial with a fixed step count (whose hash is what it was before they existed)."""
    fixed = dataclasses.replace(B(), min_window_s=9.0, max_steps_per_epoch=7)
    assert config_hash(fixed) == config_hash(B()) == "41fbcc5ea59ecce3"
    auto = BenchConfig()
    assert auto.steps_per_epoch == -1
    assert config_hash(auto) != config_hash(B())
    assert config_hash(dataclasses.replace(auto, min_window_s=0.5)) != config_hash(auto)
    assert config_hash(dataclasses.replace(auto, max_steps_per_epoch=50)) != config_hash(auto)


def test_the_report_groups_runs_by_the_identity_the_hash_uses() -> None:
    """One definition (bench.core.identity.identity): runs that differ only in keys the hash leaves
    out (parity, allow_mixed_devices, the auto window's settings under a fixed step count)
    are one configuration in the report; the window settings count under auto."""
    from bench.core.config import BenchConfig, flatten, to_dict
    from bench.report.trials import to_trial
    from bench.tracking import RunRecord

    def run(**changes: object) -> RunRecord:
        cfg = dataclasses.replace(BenchConfig(), **changes)  # type: ignore[arg-type]
        params = {k: str(v) for k, v in flatten(to_dict(cfg)).items()}
        tags = {"bench.config_hash": config_hash(cfg), "bench.status": "ok"}
        return RunRecord("1" * 32, "t", 0, params, tags, {})

    fixed = to_trial(run(steps_per_epoch=5)).config
    assert to_trial(run(steps_per_epoch=5, parity=True, allow_mixed_devices=True)).config == fixed
    assert to_trial(run(steps_per_epoch=5, min_window_s=9.0)).config == fixed
    auto = to_trial(run(steps_per_epoch=-1)).config
    assert to_trial(run(steps_per_epoch=-1, min_window_s=9.0)).config != auto
    flat = flatten(to_dict(BenchConfig()))
    assert "parity" not in identity(flat) and "tracking.uri" not in identity(flat)
    assert "min_window_s" in identity(flat)  # the default is auto


def test_keys_that_decide_nothing_leave_the_hash_alone() -> None:
    from bench.core.config import flatten, to_dict

    base = B()
    patient = dataclasses.replace(base, launcher=LauncherConfig(kill_grace_s=30.0))
    patient.launcher.docker.heartbeat_timeout_s = 60.0
    assert config_hash(patient) == config_hash(base) == "41fbcc5ea59ecce3"
    flat = identity(flatten(to_dict(patient)))
    assert "launcher.kill_grace_s" not in flat
    assert "launcher.docker.heartbeat_timeout_s" not in flat
    assert identity(flatten(to_dict(base))) == flat  # one configuration in the report
