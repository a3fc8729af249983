"""framework=jax (issue 35): the adapter trains and infers with bench's Keras models on Keras'
JAX backend, each check in a child process of its own (Keras picks its backend once per
process, and this one may hold it on TensorFlow's)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from bench.trial.frameworks import xla_flags

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from bench.trial import frameworks
    from bench.core.config import (
        BenchConfig, DataConfig, FrameworkConfig, ModelConfig, OptimizerConfig,
    )
    from bench.trial.data import synthetic

    cfg = BenchConfig(
        framework=FrameworkConfig(name="jax"),
        model=ModelConfig(name=sys.argv[4], source=sys.argv[3]),
        mode=sys.argv[1], batch_size=8, image_size=32, data=DataConfig(num_batches=2),
        optimizer=OptimizerConfig(name=sys.argv[2], lr=0.01, momentum=0.9, weight_decay=1e-4),
    )
    frameworks.before_import(cfg, 1)
    adapter = frameworks.load("jax")
    adapter.configure(cfg, 1)
    session = adapter.prepare(cfg, synthetic(cfg))
    losses = []
    for _ in range(int(sys.argv[5])):  # the same few batches again and again
        for _ in range(int(sys.argv[6])):
            session.step(session.next_batch())
        session.sync()
        losses.append(session.take_mean_loss())
    env = adapter.environment()
    import os
    tasks = [open(f"/proc/self/task/{t}/comm").read().strip()
             for t in os.listdir("/proc/self/task")]
    print(json.dumps({"eigen_pool": tasks.count("tf_XLAEigen"),
        "losses": losses, "params": session.num_parameters, "device": session.device,
        "finite": session.output_finite(), "backend": env["keras_backend"],
        "threads": env["intra_op_threads"], "tensorflow": "tensorflow" in sys.modules,
        "flax": "flax" in sys.modules,
    }))
    """
)


def run(
    mode: str,
    optimizer: str = "sgd",
    source: str = "bench",
    model: str = "lenet5",
    rounds: int = 8,
    steps: int = 5,
) -> dict:
    """``rounds`` mean losses, each over ``steps`` steps (lenet5's loss must fall over 40)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, optimizer, source, model, str(rounds), str(steps)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("source", ["bench", "flax"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_lenet5_trains_on_jax_and_its_loss_falls(optimizer: str, source: str) -> None:
    """The Keras model (model.source=bench) and the Flax NNX one (model.source=flax)."""
    from bench.trial.models import MODELS

    out = run("train", optimizer, source)
    losses = out["losses"]
    assert all(loss is not None and loss == loss for loss in losses), losses
    assert losses[-1] < 0.9 * losses[0], losses
    assert out["backend"] == "jax" and out["device"] == "cpu" and out["finite"]
    assert out["threads"] == "1" and not out["tensorflow"]  # no TF in a jax trial
    assert out["eigen_pool"] == 1  # XLA's CPU client: one intra-op thread, as asked
    assert out["flax"] == (source == "flax")  # Flax only where the trial builds its model
    # The parameter count the other adapters report: torch's lenet5's.
    torch_model = MODELS["lenet5"].builder("torch")(num_classes=10, image_size=32)
    torch_params = sum(p.numel() for p in torch_model.parameters() if p.requires_grad)
    assert out["params"] == torch_params == MODELS["lenet5"].reference_params


@pytest.mark.parametrize("source", ["bench", "flax"])
def test_inference_on_jax_has_no_loss(source: str) -> None:
    out = run("infer", source=source)
    assert out["losses"] == [None] * 8 and out["finite"]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_resnet18_trains_as_a_flax_model(optimizer: str) -> None:
    """BatchNorm's running statistics, mutated inside the jitted gradient (the merged
    model's Variables its own copies), and Adam's two state trees, each donated."""
    # Three steps: the second and third reuse the state the first one donated.
    out = run("train", optimizer, "flax", "resnet18", rounds=3, steps=1)
    assert len(out["losses"]) == 3
    assert all(loss is not None and loss == loss for loss in out["losses"]), out["losses"]
    assert out["finite"] and out["params"] == 11_181_642  # torch's resnet18, 10 classes


def test_xla_flags_set_eigen_threading_and_keep_the_rest() -> None:
    """intra_op_parallelism_threads is no XLA flag (the pool's size is NPROC): dropped."""
    flags = xla_flags("--xla_dump_to=/tmp/x intra_op_parallelism_threads=7", 2)
    assert flags.split() == ["--xla_dump_to=/tmp/x", "--xla_cpu_multi_thread_eigen=true"]
    assert xla_flags("", 1) == "--xla_cpu_multi_thread_eigen=false"
