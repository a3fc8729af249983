"""A sweep's bad input is said once per problem, naming the jobs that have it
(bench.sweep.jobs.check_all): a tracking.uri that every job shares is one line, not one per
job; a problem of a few jobs names them."""

from __future__ import annotations

import pytest

from bench.core.config import BenchConfig, ConfigError, ModelConfig, TrackingConfig
from bench.sweep.jobs import _jobs_prefix, check_all


def test_a_problem_every_job_shares_is_said_once() -> None:
    bad = TrackingConfig(uri="ftp://store.example/mlruns")
    configs = [(f"batch_size={b}", BenchConfig(batch_size=b, tracking=bad)) for b in range(1, 6)]
    with pytest.raises(ConfigError) as caught:
        check_all(configs)
    uri = [p for p in caught.value.problems if "tracking.uri" in p]
    assert len(uri) == 1, caught.value.problems
    assert uri[0].startswith("[all 5 jobs] tracking.uri: scheme 'ftp' is not supported")


def test_a_problem_of_some_jobs_names_them() -> None:
    configs = [
        ("model=lenet5", BenchConfig(model=ModelConfig(name="lenet5"))),
        ("model=nope", BenchConfig(model=ModelConfig(name="nope"))),
    ]
    with pytest.raises(ConfigError) as caught:
        check_all(configs)
    assert all(p.startswith("[model=nope] ") for p in caught.value.problems), caught.value


def test_the_prefix_names_up_to_three_jobs() -> None:
    assert _jobs_prefix(["a"], 1) == ""
    assert _jobs_prefix(["a", "b"], 2) == "[a, b] "
    assert _jobs_prefix(["a", "b", "c", "d", "e"], 9) == "[a, b, c and 2 more] "
    assert _jobs_prefix(["a", "b", "c", "d"], 4) == "[all 4 jobs] "
