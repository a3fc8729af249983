"""``distributed=model_parallel``: the model split into two stages on two devices.

One process holds the model; its layers are cut in two at the point that balances the
parameter counts best, the first stage on device 0 and the second on device 1, and the
activations (and their gradients) cross between the devices inside every step.  It is plain
model parallelism as the CIFAR-10 study ran it: no micro-batch pipelining, so the stages
run one after the other and both see every sample (each stage's rate is the trial's rate).

- PyTorch: the model's top-level children are split at the balanced cut; each child moves
  its inputs to its own device (a forward pre-hook), and the output comes back to device 0
  for the loss.  Needs 2 CUDA devices; there is no faithful CPU stand-in in one process.
- TensorFlow: the functional model's layers are split at a cut where a single tensor crosses
  (nothing before the cut is used after it); the second stage's variables (and the optimizer
  slots for them) are created on device 1 and its layers run under ``tf.device``.  On GPUs
  it uses 2 GPUs; on the CPU, 2 logical CPU devices, the stand-in the mirrored strategy uses.

Each stage's parameter count is logged (``stage0_parameters``, ``stage1_parameters``), and
on GPUs each device's peak memory so far, per epoch (``stage{i}_peak_mem_mb``).  Its
``scaling_efficiency`` is the throughput relative to the same model on one device
(1.0: the split costs nothing).
"""

from __future__ import annotations

import functools
from typing import Any

from bench.core.config import BenchConfig
from bench.core.frameworks import TF
from bench.trial.distributed import common
from bench.trial.distributed.base import OneProcess, Rank

STAGES = 2


def balanced_cut(sizes: list[int], allowed: list[int]) -> int:
    """The index ``k`` in ``allowed`` (stage 0 = items ``[0, k)``) whose stage-0 parameter
    count is closest to half of the total."""
    if not allowed:
        raise ValueError("the model has no point where it can be cut into two stages")
    total = sum(sizes)
    return min(allowed, key=lambda k: (abs(2 * sum(sizes[:k]) - total), k))


class ModelParallel(OneProcess):
    name = "model_parallel"

    def check(self, cfg: BenchConfig, gpu: bool, gpus: int) -> list[str]:
        if cfg.framework.name == TF:
            from bench.trial.distributed.common import tf_checks

            problems = tf_checks(cfg)
            if gpu and gpus < STAGES:
                problems.append(
                    f"distributed: model_parallel puts its 2 stages on 2 GPUs; {gpus} visible "
                    "(device=cpu runs them on 2 logical CPU devices)"
                )
            return problems
        if not gpu or gpus < STAGES:
            where = "the CPU" if not gpu else f"{gpus} GPU"
            return [
                "distributed: model_parallel with framework=torch puts its 2 stages on 2 CUDA "
                f"devices; this trial would run on {where}. framework=tf runs it on 2 logical "
                "CPU devices"
            ]
        return []

    def step_batches(self, cfg: BenchConfig) -> int:
        return 1

    def prepare(self, adapter: Any, cfg: BenchConfig, data: Any, rank: Rank) -> Any:
        if cfg.framework.name == TF:
            names = _tf_devices(cfg)
            session = adapter.prepare(cfg, data)
            stage_sizes = split_keras(session.model, names, getattr(session, "optimizer", None))
            return _Session(session, cfg.batch_size, stage_sizes, list(names), _tf_sync)
        import torch

        devices = [torch.device("cuda", i) for i in range(STAGES)]
        session = adapter.prepare(cfg, data)
        stage_sizes = split_torch(session.model, devices)
        return _Session(session, cfg.batch_size, stage_sizes, devices, _torch_sync)


# PyTorch -----------------------------------------------------------------------------------


def _to(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, tuple | list):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def split_torch(model: Any, devices: list[Any]) -> list[int]:
    """Put the first stage of ``model``'s top-level children on ``devices[0]`` and the rest
    on ``devices[1]``; each child moves its inputs to its device, and the model's output
    returns to ``devices[0]``.  Returns each stage's parameter count."""
    children = list(model.children())
    sizes = [sum(p.numel() for p in child.parameters()) for child in children]
    weighted = [i for i, s in enumerate(sizes) if s]
    if len(weighted) < STAGES:
        raise ValueError(
            f"{type(model).__name__} has {len(weighted)} top-level part(s) with parameters; "
            "model_parallel needs at least 2 to split"
        )
    cut = balanced_cut(sizes, list(range(weighted[0] + 1, weighted[-1] + 1)))
    own = sum(p.numel() for p in model.parameters(recurse=False))
    model.to(devices[0])  # parameters of the model itself stay with the first stage
    for i, child in enumerate(children):
        device = devices[0] if i < cut else devices[1]
        child.to(device)
        child.register_forward_pre_hook(functools.partial(_inputs_to, device))
    model.register_forward_hook(lambda _m, _args, out: _to(out, devices[0]))
    return [own + sum(sizes[:cut]), sum(sizes[cut:])]


def _inputs_to(device: Any, _module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_to(a, device) for a in args)


def _torch_sync(devices: list[Any]) -> None:
    import torch

    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)


# TensorFlow --------------------------------------------------------------------------------


def _tf_devices(cfg: BenchConfig) -> list[str]:
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU") and cfg.device != "cpu":
        return [f"/gpu:{i}" for i in range(STAGES)]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(STAGES)]
    )
    return [f"/cpu:{i}" for i in range(STAGES)]


def keras_cuts(model: Any) -> list[int]:
    """The indices ``k`` into ``model``'s operations (topological order) where a cut leaves
    one tensor crossing: nothing in ``[0, k)`` but operation ``k-1`` feeds ``[k, ...)``."""
    ops = list(model._operations)  # a functional model's layers in topological order
    position = {id(op): i for i, op in enumerate(ops)}
    last_use = list(range(len(ops)))
    for i, op in enumerate(ops):
        for node in op._inbound_nodes:
            for tensor in node.input_tensors:
                j = position.get(id(tensor._keras_history.operation))
                if j is not None:
                    last_use[j] = max(last_use[j], i)
    cuts, reach = [], 0  # reach: the last user of anything in ops[0 : k-1]
    for k in range(1, len(ops)):
        if reach <= k - 1:
            cuts.append(k)
        reach = max(reach, last_use[k - 1])
    return cuts


def split_keras(model: Any, devices: list[str], optimizer: Any | None) -> list[int]:
    """Move the layers after the balanced cut to ``devices[1]``: their variables are created
    again there (same values) and their calls run under ``tf.device``; the optimizer's slots
    are created beside each variable.  Returns each stage's parameter count."""
    import tensorflow as tf

    ops = list(model._operations)
    sizes = [sum(int(tf.size(w)) for w in op.trainable_weights) for op in ops]
    weighted = [i for i, s in enumerate(sizes) if s]
    if len(weighted) < STAGES:
        raise ValueError(f"{model.name} has too few layers with weights to split")
    allowed = [k for k in keras_cuts(model) if weighted[0] < k <= weighted[-1]]
    cut = balanced_cut(sizes, allowed)
    for op in ops[cut:]:
        with tf.device(devices[1]):
            for variable in op.weights:
                variable._initialize(variable.value.read_value())
        op.call = _placed(op.call, devices[1])
    if optimizer is not None:
        if getattr(optimizer, "built", False):
            raise RuntimeError("the optimizer was built before the model was split")
        add = optimizer.add_variable_from_reference

        def beside(reference: Any, *args: Any, **kwargs: Any) -> Any:
            value = getattr(reference, "value", reference)
            with tf.device(value.device):
                return add(reference, *args, **kwargs)

        optimizer.add_variable_from_reference = beside
    return [sum(sizes[:cut]), sum(sizes[cut:])]


def _placed(call: Any, device: str) -> Any:
    import tensorflow as tf

    @functools.wraps(call)
    def placed(*args: Any, **kwargs: Any) -> Any:
        with tf.device(device):
            return call(*args, **kwargs)

    return placed


def _tf_sync(devices: list[str]) -> None:
    import tensorflow as tf

    if any("gpu" in d for d in devices):
        tf.test.experimental.sync_devices()


# The session -------------------------------------------------------------------------------


class _Session(common.CountedSteps):
    def __init__(
        self, inner: Any, batch: int, stage_sizes: list[int], devices: list[Any], sync: Any
    ) -> None:
        super().__init__(inner)
        self.batch, self.stage_sizes, self.devices, self._sync = batch, stage_sizes, devices, sync

    def sync(self) -> None:
        self.inner.sync()
        self._sync(self.devices)

    def epoch_extra(self, elapsed_s: float) -> dict[str, float]:
        rate = self.steps_rate(self.batch, elapsed_s)
        extra = {f"worker{i}_samples_per_s": rate for i in range(STAGES)}
        for i, size in enumerate(self.stage_sizes):
            extra[f"stage{i}_parameters"] = float(size)
        extra.update(_peak_memory(self.devices))
        return extra


def _peak_memory(devices: list[Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for i, device in enumerate(devices):
        if getattr(device, "type", "") == "cuda":
            import torch

            out[f"stage{i}_peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        elif isinstance(device, str) and "gpu" in device:
            import tensorflow as tf

            info = tf.config.experimental.get_memory_info(device.strip("/").upper())
            out[f"stage{i}_peak_mem_mb"] = info["peak"] / 2**20
    return out


STRATEGY = ModelParallel()
