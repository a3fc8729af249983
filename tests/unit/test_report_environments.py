"""The report's Environments table names each framework's own version, from the tag its
spec names (bench.core.frameworks): jax and mxnet runs showed "-" while only torch's and
tf's tags were read."""

from __future__ import annotations

from bench.core.frameworks import FRAMEWORKS
from bench.report.trials import ENVIRONMENT_TAGS, framework_version


def test_every_framework_shows_its_own_version() -> None:
    env = {"torch_version": "2.13.0+cpu", "tensorflow_version": "2.21.0", "jax_version": "0.10.2"}
    assert framework_version("jax", env) == "0.10.2"
    assert framework_version("tf==2.20.0", {**env, "tensorflow_version": "2.20.0"}) == "2.20.0"
    assert framework_version("torch", env) == "2.13.0+cpu"
    assert framework_version("mxnet", env) == "-"  # no tag of its own in the run
    assert framework_version("unknown", env) == "-"


def test_every_frameworks_version_tag_is_read() -> None:
    assert {spec.tag for spec in FRAMEWORKS.values()} <= set(ENVIRONMENT_TAGS)
