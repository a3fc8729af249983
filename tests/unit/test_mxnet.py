"""framework=mxnet without a trial: Gluon models at parity with PyTorch (counted and run in
MXNet's own environment, .venv-mxnet, by tests/mxnet_side.py, since the host never imports
mxnet), the worker side's imports there, validation, the interpreter choice, the merge of
workers' records and the image spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import images
from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError, distributed_config
from bench.core.result import EpochRecord
from bench.envs import interpreters
from bench.trial.distributed import kvstore
from bench.trial.models import MODELS, build, flops, mxnet_models

REPO = Path(__file__).resolve().parents[2]
PARITY_MODELS = ["lenet5", "alexnet", "resnet18", "resnet50"]
CLASSES = 10


def mxnet_python() -> str:
    problem = interpreters.problem("mxnet")
    assert not problem, problem  # scripts/setup.sh creates it; a missing one is a failure
    return interpreters.python_for("mxnet")


def run_in_mxnet_env(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [mxnet_python(), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_models_with_an_mxnet_build() -> None:
    assert set(PARITY_MODELS) <= set(mxnet_models())
    assert "lstm" not in mxnet_models()


@pytest.fixture(scope="module")
def gluon_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every MXNet model built in .venv-mxnet at its smallest input; the four study models
    also given a seeded PyTorch model's weights (with randomized BN statistics) and run."""
    torch = pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("gluon")
    request: dict[str, Any] = {}
    expected: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    for name in mxnet_models():
        size = MODELS[name].min_image_size
        request[name] = {"size": size, "classes": CLASSES}
        if name not in PARITY_MODELS:
            continue
        torch.manual_seed(0)
        model = build("torch", name, CLASSES, size).eval()
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.BatchNorm2d):
                    n = module.num_features
                    module.running_mean.copy_(torch.from_numpy(rng.normal(0, 0.1, n)))
                    module.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, n)))
                    module.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, n)))
        tensors = [
            v.numpy()
            for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")
        ]
        x = rng.standard_normal((2, 3, size, size)).astype(np.float32)
        with torch.no_grad():
            expected[name] = model(torch.from_numpy(x)).numpy()
        weights = tmp / f"{name}.npz"
        np.savez(weights, x=x, **{f"p{i:04d}": t.astype(np.float32) for i, t in enumerate(tensors)})
        request[name].update(weights=str(weights), out=str(tmp / f"{name}.npy"))
    (tmp / "request.json").write_text(json.dumps(request))
    proc = run_in_mxnet_env(str(REPO / "tests" / "mxnet_side.py"), str(tmp / "request.json"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, out in expected.items():
        report[name]["expected"] = out
        report[name]["got"] = np.load(request[name]["out"])
    return report


@pytest.mark.parametrize("name", PARITY_MODELS)
@pytest.mark.slow
def test_gluon_counts_equal_pytorch_and_torchvision(name: str, gluon_report: dict) -> None:
    import torch  # the fixture skipped without it

    size = MODELS[name].min_image_size
    model = build("torch", name, CLASSES, size)
    params = sum(p.numel() for p in model.parameters())
    assert gluon_report[name]["params"] == params
    head = (model[-1].in_features + 1) * (MODELS[name].reference_num_classes - CLASSES)
    assert gluon_report[name]["params"] + head == MODELS[name].reference_params
    assert gluon_report[name]["flops"] == flops.torch_flops_per_sample(model, size)
    del torch


@pytest.mark.parametrize("name", PARITY_MODELS)
@pytest.mark.slow
def test_gluon_with_pytorch_weights_gives_pytorchs_outputs(name: str, gluon_report: dict) -> None:
    """Architecture identity: layer order, padding, pooling bins, flatten order, BN settings."""
    entry = gluon_report[name]
    assert "mismatch" not in entry, entry["mismatch"]
    assert entry["tensors"][0] == entry["tensors"][1]
    expected, got = entry["expected"], entry["got"]
    assert got.shape == expected.shape == (2, CLASSES)
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4 * scale)


@pytest.mark.slow
def test_every_gluon_model_has_the_reference_count(gluon_report: dict) -> None:
    for name, entry in gluon_report.items():
        spec = MODELS[name]
        if spec.reference_num_classes == CLASSES:
            assert entry["params"] == spec.reference_params, name


def test_worker_side_imports_no_host_framework_in_mxnet_env() -> None:
    code = (
        "import sys, bench.trial.worker, bench.trial.loop, bench.trial.data, bench.trial.monitors\n"
        "import bench.trial.distributed.kvstore, bench.trial.frameworks.mxnet_adapter\n"
        "import bench.trial.profiling.mxnet_profiler\n"
        "heavy = ('torch', 'tensorflow', 'keras', 'hydra', 'omegaconf', 'mlflow')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
        "import numpy, mxnet; print(numpy.__version__, mxnet.__version__)"
    )
    proc = run_in_mxnet_env("-c", code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded, versions = proc.stdout.strip().splitlines()[-2:]
    assert loaded == "[]"
    numpy_version, mxnet_version = versions.split()
    assert mxnet_version == "1.9.1" and numpy_version.startswith("1.23.")


def test_the_host_never_imports_mxnet() -> None:
    code = (
        "import sys, bench.cli, bench.launchers.process, bench.cli.models\n"
        "from bench.core.config import BenchConfig\n"
        "from bench.checks.preflight import validate\n"
        "cfg = BenchConfig(); cfg.framework.name = 'mxnet'; cfg.model.name = 'lenet5'\n"
        "validate(cfg); print('mxnet' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "False"


def test_the_interpreter_per_framework(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_MXNET_PYTHON", raising=False)
    assert interpreters.python_for("torch") == interpreters.python_for("tf") == sys.executable
    assert interpreters.python_for("mxnet") == str(REPO / ".venv-mxnet" / "bin" / "python")
    monkeypatch.setenv("BENCH_MXNET_PYTHON", "/nowhere/python")
    assert interpreters.python_for("mxnet") == "/nowhere/python"
    cfg = mx_cfg()
    with pytest.raises(ConfigError, match=r"framework: mxnet runs in its own environment .*"
                       r"bench setup mxnet"):  # fmt: skip
        validate(cfg)


def mx_cfg(**fields: Any) -> BenchConfig:
    cfg = BenchConfig()
    cfg.framework.name, cfg.model.name = "mxnet", "lenet5"
    for key, value in fields.items():
        setattr(cfg, key, distributed_config(value) if key == "distributed" else value)
    return cfg


@pytest.mark.parametrize(
    ("fields", "model", "problem"),
    [
        ({}, "lstm", "model: lstm has no mxnet build"),
        ({"distributed": "kvstore_sync", "workers": 2}, "lenet5", "ps: distributed=kvstore_sync"),
        ({"workers": 2}, "lenet5", "workers: 2 workers on 1 node(s) need a distributed"),
        ({"distributed": "kvstore_device", "ps": 1}, "lenet5", "ps: parameter servers are used"),
        (
            {"distributed": "kvstore_async", "ps": 1, "nodes": 2},
            "lenet5",
            "nodes: distributed=kvstore_async runs on one node",
        ),
        ({"distributed": "kvstore_sync", "ps": 1, "mode": "infer"}, "lenet5", "mode: distrib"),
        ({"distributed": "allreduce"}, "lenet5", "distributed: 'allreduce' is not allowed"),
        ({"precision": "bf16"}, "lenet5", "precision: framework=mxnet trains in fp32 only"),
        ({"compile": True}, "lenet5", "compile: framework=mxnet always runs hybridized"),
    ],
)
def test_bad_mxnet_and_kvstore_settings_name_their_field(
    fields: dict[str, Any], model: str, problem: str
) -> None:
    cfg = mx_cfg(**fields)
    cfg.model.name = model
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert any(p.startswith(problem) for p in err.value.problems), err.value.problems


def test_kvstore_needs_mxnet_and_the_process_launcher() -> None:
    cfg = BenchConfig()
    cfg.distributed, cfg.workers, cfg.ps = distributed_config("kvstore_sync"), 2, 1
    with pytest.raises(ConfigError, match=r"distributed: 'kvstore_sync' \(MXNet kvstore dist_sync"):
        validate(cfg)
    inline = mx_cfg()
    inline.launcher.name = "inline"
    with pytest.raises(ConfigError, match="launcher: inline runs the trial inside bench's own"):
        validate(inline)
    validate(mx_cfg(distributed="kvstore_sync", workers=2, ps=1))
    validate(mx_cfg(distributed="kvstore_device", workers=2))


def record(epoch: int, rate: float, time_s: float, **extra: float) -> EpochRecord:
    samples = round(rate * time_s)
    return EpochRecord(epoch, 4, samples, time_s, rate, 10.0, 12.0, 13.0, 2.0, dict(extra))


def test_workers_records_merge_into_a_global_one() -> None:
    merged = kvstore.merge_epoch(
        [
            record(1, 100.0, 1.0, time_comm_ms=4.0, ps_push_ms=3.0, achieved_flops_per_s=5.0),
            record(1, 50.0, 2.0, time_comm_ms=6.0, ps_push_ms=5.0, achieved_flops_per_s=2.5),
        ]
    )
    assert merged.samples_per_s == 150.0 and merged.samples == 200
    assert merged.epoch_time_s == 2.0
    assert merged.extra["worker0_samples_per_s"] == 100.0
    assert merged.extra["worker1_samples_per_s"] == 50.0
    assert merged.extra["time_comm_ms"] == 5.0 and merged.extra["ps_push_ms"] == 4.0
    assert merged.extra["achieved_flops_per_s"] == 7.5


def test_a_failed_worker_fails_the_trial() -> None:
    from bench.core.result import OK, OOM, TrialResult

    cfg = mx_cfg(distributed="kvstore_sync", workers=2, ps=1)
    ok = TrialResult(OK, "mxnet", "lenet5", "train", epochs=[record(1, 10.0, 1.0)])
    ok.summary = {"trial_samples_per_s": 10.0, "trial_time_s": 1.0}
    oom = TrialResult(OOM, "mxnet", "lenet5", "train", error="MemoryError")
    merged = kvstore.merge(cfg, [ok, oom], "")
    assert merged.status == OOM and "worker 1: oom: MemoryError" in merged.error
    gone = kvstore.merge(cfg, [ok, None], "worker1 ended (code -9)")
    assert gone.status == "error" and "worker 1: no result" in gone.error


def test_mxnet_image_spec() -> None:
    spec = images.BuildSpec("mxnet", "cpu")
    files = images.context_files(spec)
    assert {"docker/mxnet.Dockerfile", "docker/constraints-mxnet.txt"} <= set(files)
    assert "bench/trial/frameworks/mxnet_adapter.py" in files
    assert images.DEFAULT_BASES[("mxnet", "cpu")] == "python:3.11-slim-bookworm"
    dockerfile = (REPO / "docker" / "mxnet.Dockerfile").read_text()
    assert "constraints-mxnet.txt" in dockerfile and "mxnet-cu117" in dockerfile
    arg = [line for line in dockerfile.splitlines() if line.startswith("ARG BASE_IMAGE=")]
    assert arg == [f"ARG BASE_IMAGE={images.DEFAULT_BASES[('mxnet', 'cuda')]}"]


def test_mxnet_pins_are_one_file_for_venv_and_image() -> None:
    pins = {}
    for line in (REPO / "docker" / "constraints-mxnet.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[name] = version
    assert pins["mxnet"] == pins["mxnet-cu117"] == "1.9.1"
    assert pins["numpy"].startswith("1.23.")
    assert not {"torch", "tensorflow", "mlflow", "hydra-core"} & set(pins)
    assert "docker/constraints-mxnet.txt" in (REPO / "scripts" / "setup_mxnet.sh").read_text()


_ONE_STEP = r"""
import json, sys
import numpy as np
from bench.core.config import BenchConfig, OptimizerConfig, DataConfig
from bench.trial import data as data_mod
from bench.trial.frameworks import mxnet_adapter as m

name, lr, momentum, wd = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cfg = BenchConfig(
    model=BenchConfig().model.__class__(name="lenet5"), batch_size=8, image_size=32,
    optimizer=OptimizerConfig(name=name, lr=lr, momentum=momentum, weight_decay=wd),
    data=DataConfig(num_batches=1), telemetry=BenchConfig().telemetry.__class__(enabled=False),
)
s = m.MXNetSession(cfg, data_mod.load(cfg))
batch = s.next_batch()
params = [p for p in s.net.collect_params().values() if p.grad_req != "null"]
before = [p.data().asnumpy().copy() for p in params]
s.forward_backward(batch)  # the summed per-sample gradients, as step() computes them
grads = [p.grad().asnumpy().copy() for p in params]
s.trainer.step(s.update_batch)
after = [p.data().asnumpy() for p in params]
out = []
for b, g, a in zip(before, grads, after):
    g = g / cfg.batch_size + wd * b  # the batch's mean gradient, plus PyTorch's L2 term
    if name == "sgd":  # first step: the momentum buffer is the gradient
        want = b - lr * g
    else:  # Adam's first step, PyTorch's arithmetic (bias-corrected m and v)
        want = b - lr * g / (np.abs(g) + 1e-8)
        # MXNet adds epsilon before its bias correction (in effect eps / sqrt(1 - beta2^t),
        # 3e-7 at the first step): compare only where that cannot matter.
        keep = np.abs(g) > 1e-3
        b, a, want = b[keep], a[keep], want[keep]
        if not b.size:
            continue
    scale = float(np.abs(want - b).max()) or 1.0
    out.append(float(np.abs(a - want).max()) / scale)
print(json.dumps(max(out)))
"""


@pytest.mark.parametrize(
    ("name", "momentum", "wd"), [("sgd", 0.9, 0.0), ("sgd", 0.9, 5e-4), ("adam", 0.0, 0.0)]
)
def test_one_optimizer_step_is_pytorchs_update(name: str, momentum: float, wd: float) -> None:
    """One update of MXNet's trainer moves each weight by exactly PyTorch's first step on the
    batch's mean gradient.  (It once divided the gradient by the batch size twice: SGD then
    learnt about 32 times slower, and Adam's near scale-invariance hid it.)"""
    done = run_in_mxnet_env("-c", _ONE_STEP, name, "0.01", str(momentum), str(wd))
    assert done.returncode == 0, done.stderr[-3000:]
    deviation = json.loads(done.stdout.strip().splitlines()[-1])
    assert deviation < 1e-3, f"the update is off by {deviation:.3g} of its size"
