"""Model parallelism's split: balanced cuts, each stage on its device, the same numbers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from bench.trial import models
from bench.trial.distributed.model_parallel import balanced_cut, split_torch
from tests.conftest import REPO


def test_the_cut_balances_parameters_among_the_allowed_points() -> None:
    assert balanced_cut([10, 10, 10, 10], [1, 2, 3]) == 2
    assert balanced_cut([100, 1, 1, 1], [1, 2, 3]) == 1
    assert balanced_cut([10, 10, 10, 10], [3]) == 3
    with pytest.raises(ValueError, match="no point where it can be cut"):
        balanced_cut([1, 2], [])


class Recorder(torch.nn.Module):
    """Wraps a child and records the device of what it is given."""

    def __init__(self, inner: torch.nn.Module, seen: list[str]) -> None:
        super().__init__()
        self.inner, self.seen = inner, seen

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(str(x.device))
        return self.inner(x)


@pytest.mark.parametrize(
    "name",
    ["lenet5", "resnet18", pytest.param("vgg16", marks=pytest.mark.slow)],  # vgg16: 4 s
)
def test_torch_split_keeps_the_model_and_its_numbers(name: str) -> None:
    # A GPU cannot exist here: the two "devices" are the CPU twice, which checks the cut,
    # the hooks and the arithmetic; the CUDA placement itself runs only on a 2-GPU machine.
    torch.manual_seed(0)
    model = models.build("torch", name, 10, 32, "bench").eval()  # eval: dropout off
    reference = models.build("torch", name, 10, 32, "bench").eval()
    reference.load_state_dict(model.state_dict())
    total = sum(p.numel() for p in model.parameters())
    cpu = torch.device("cpu")
    stages = split_torch(model, [cpu, cpu])
    assert sum(stages) == total and min(stages) > 0
    first = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    x = torch.randn(2, first.in_channels, 32, 32)
    torch.testing.assert_close(model(x), reference(x))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_torch_split_moves_each_childs_inputs_to_its_device() -> None:
    seen: list[str] = []
    model = torch.nn.Sequential(
        Recorder(torch.nn.Linear(4, 8), seen),
        torch.nn.ReLU(),
        Recorder(torch.nn.Linear(8, 2), seen),
    )
    stages = split_torch(model, [torch.device("cpu"), torch.device("meta")])
    assert stages == [4 * 8 + 8, 8 * 2 + 2]
    assert model[0].inner.weight.device.type == "cpu"
    assert model[2].inner.weight.device.type == "meta"
    # "meta" holds no data, so the whole model cannot run; each stage's child can.
    assert model[2](torch.randn(3, 8)).device.type == "meta"  # its CPU input was moved
    assert model[0](torch.randn(3, 4)).device.type == "cpu"
    assert seen == ["meta", "cpu"]


@pytest.mark.slow
def test_keras_split_places_the_second_stage_on_the_second_device() -> None:
    """Logical CPU devices must be configured before TensorFlow starts: a fresh process."""
    script = textwrap.dedent(
        """
        import tensorflow as tf
        from bench.trial.distributed.model_parallel import _tf_devices, keras_cuts, split_keras
        from bench.core.config import BenchConfig
        import keras
        from bench.trial import models

        devices = _tf_devices(BenchConfig(device="cpu"))
        with tf.device(devices[0]):
            model = models.build("tf", "resnet18", 10, 32, "bench")
        total = model.count_params()
        x = tf.random.normal((2, 32, 32, 3))
        before = model(x, training=False).numpy()
        opt = keras.optimizers.SGD(0.01, momentum=0.9)
        stages = split_keras(model, devices, opt)
        assert sum(stages) == sum(int(tf.size(w)) for w in model.trainable_weights), stages
        assert min(stages) > 0.25 * sum(stages), stages
        ops = model._operations
        on_1 = [any("CPU:1" in w.value.device for w in op.weights) for op in ops]
        cut = on_1.index(True)
        assert cut in keras_cuts(model)
        for op in ops:
            where = {"CPU:1" in w.value.device for w in op.weights}
            assert where <= {ops.index(op) >= cut}, op.name
        after = model(x, training=False).numpy()
        assert abs(after - before).max() < 1e-5
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        variables = model.trainable_variables

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                value = loss(y, model(x, training=True))
            opt.apply_gradients(zip(tape.gradient(value, variables), variables))
        step(x, tf.constant([1, 2]))
        slots = [v for v in opt.variables if "momentum" in v.path]
        assert {("CPU:1" in s.value.device) for s in slots} == {True, False}
        print("ok", stages)
        """
    )
    got = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.startswith("ok")
