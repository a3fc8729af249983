"""Out of memory is a result, whatever words a framework or its kernel library uses for it:
under a memory cap (``launcher.memory_limit_mb``) a failed allocation inside oneDNN or
MXNet's storage manager is ``oom``, not ``error``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core.config import BenchConfig
from bench.core.result import OOM
from bench.launchers import process
from bench.trial import frameworks
from tests.unit.test_mxnet import run_in_mxnet_env


def test_torch_onednn_primitive_failure_is_oom_under_a_cap() -> None:
    adapter = frameworks.load("torch")
    failure = RuntimeError("could not create a primitive")
    assert adapter.is_oom(failure, capped=True)
    assert not adapter.is_oom(failure)  # without a cap it may be anything: an error
    assert adapter.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
    assert not adapter.is_oom(ValueError("out of memory"))


def test_tensorflow_resource_exhausted_is_oom() -> None:
    import tensorflow as tf

    adapter = frameworks.load("tf")
    assert adapter.is_oom(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating"))
    assert not adapter.is_oom(tf.errors.InvalidArgumentError(None, None, "bad shape"))


def test_mxnet_allocation_failure_is_oom_under_a_cap() -> None:
    code = (
        "import json, mxnet as mx\n"
        "from bench.trial.frameworks.mxnet_adapter import Adapter\n"
        "a = Adapter()\n"
        "e = mx.base.MXNetError('Failed to allocate CPU Memory')\n"
        "print(json.dumps([a.is_oom(e, capped=True), a.is_oom(e),"
        " a.is_oom(mx.base.MXNetError('std::bad_alloc'))]))\n"
    )
    done = run_in_mxnet_env("-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, False, True]


def test_lenet5_under_a_300_mb_cap_is_an_oom_result(tmp_path: Path) -> None:
    """The case found by hand: torch's lenet5 under a 300 MB heap cap fails in oneDNN."""
    cfg = BenchConfig(batch_size=4, epochs=1, steps_per_epoch=2, warmup_steps=1)
    cfg.model.name = "lenet5"
    cfg.telemetry.enabled = False
    cfg.launcher.memory_limit_mb = 300
    result = process.Launcher().launch(cfg, tmp_path, lambda e: None)
    assert result.status == OOM, result.error[-2000:]


@pytest.mark.parametrize("name", ["torch", "tf"])
def test_is_oom_takes_the_cap(name: str) -> None:
    assert not frameworks.load(name).is_oom(KeyError("x"), capped=True)


def test_a_framework_that_cannot_map_its_libraries_under_a_cap_is_an_oom_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen on Python 3.12 with torch's CUDA build under a 300 MB cap: the import fails
    with the loader's mmap error, before any adapter exists."""
    from bench.trial import loop as trial

    def load(name: str) -> None:
        raise ImportError("/x/torch/_C.so: failed to map segment from shared object")

    monkeypatch.setattr(trial.frameworks, "load", load)
    cfg = BenchConfig(batch_size=4, epochs=1, steps_per_epoch=2, warmup_steps=1)
    cfg.telemetry.enabled = False
    cfg.launcher.memory_limit_mb = 300
    assert trial.run_trial(cfg).status == OOM
    cfg.launcher.memory_limit_mb = 0  # without a cap it is a broken install, not memory
    assert trial.run_trial(cfg).status != OOM
