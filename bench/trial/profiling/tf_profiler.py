"""TensorFlow: the phase breakdown and the profiled pass.

Breakdown.  The training step is one compiled ``tf.function``: nothing inside it can be
synchronized on or timed from Python.  So, as separately timed calls with ``session.sync()``
after each: ``next_batch()`` (``time_data_ms``); ``forward(x, y)``, a function compiled from
the same model, loss and ``jit_compile`` setting computing the loss (``time_forward_ms``);
``gradients(x, y)``, the same plus all the gradients (backward = it less forward); and the
session's own step function (optimizer = it less ``gradients``).  Backward and optimizer
are thus what each adds to the real step: a tape cannot outlive a compiled function, so
the backward pass cannot run on its own, and applying gradients in a function of its own
would have to pass them in (a copy, cold in the cache) where the real step uses them as
they are made.  The parts therefore add up to the data wait plus the real step function:
``breakdown_sum_pct`` compares that with whole steps timed on their own (``time_step_ms``),
which checks the timing, not the split.  Each call pays the function-call overhead, which
matters only for steps of a few milliseconds.

Profile.  ``tf.profiler.experimental`` records the steps into ``tf_profile/`` (open it with
TensorBoard's Profile tab: ``tensorboard --logdir tf_profile``).  The operator table is read
from the recorded XSpace (``*.xplane.pb``): on a GPU, kernel time on the device streams
attributed to the TensorFlow op that launched it; on the CPU, each op's own time on the
executor threads (its duration less that of ops nested in it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from bench.core.config import BenchConfig
from bench.trial.frameworks.tf_adapter import TFSession
from bench.trial.profiling.base import Profile, derived_phases
from bench.trial.profiling.operators import OpTime

TRACE_DIR = "tf_profile"


class Profiler:
    def splitter(self, session: TFSession, cfg: BenchConfig) -> Callable[[], dict[str, float]]:
        perf, sync = time.perf_counter, session.sync
        phases = _phases(session, cfg)
        with tf.device(session.tf_device):  # trace and run each function once, untimed
            batch = session.next_batch()
            for fn in phases.values():
                fn(batch)
            sync()

        def split() -> dict[str, float]:
            with tf.device(session.tf_device):
                t0 = perf()
                batch = session.next_batch()
                sync()
                took = {"data": perf() - t0}
                for name, fn in phases.items():
                    t0 = perf()
                    fn(batch)
                    sync()
                    took[name] = perf() - t0
            return took

        return split

    def phases(self, calls: dict[str, float]) -> dict[str, float]:
        return derived_phases(calls)

    def profile(self, session: TFSession, cfg: BenchConfig, steps: int, outdir: Path) -> Profile:
        logdir = outdir / TRACE_DIR
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=2, python_tracer_level=0, device_tracer_level=1
        )
        tf.profiler.experimental.start(str(logdir), options=options)
        try:
            for _ in range(steps):
                session.step(session.next_batch())
            session.sync()
        finally:
            tf.profiler.experimental.stop()
        session.take_mean_loss()
        planes = sorted(
            logdir.glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime
        )
        if not planes:
            raise RuntimeError(f"profile: TensorFlow's profiler wrote no .xplane.pb under {logdir}")
        ops, timeline = read_xspace(planes[-1])
        return Profile(ops, TRACE_DIR, timeline)


def _phases(session: TFSession, cfg: BenchConfig) -> dict[str, Any]:
    """The separately compiled calls, each taking a batch: forward, forward and gradients,
    and the session's own step function."""
    model, loss_fn, jit, step = session.model, session.loss_fn, session.jit, session._fn
    if not session.training:
        return {"forward": lambda batch: step(*batch)}
    optimizer = session.optimizer
    variables = model.trainable_variables
    scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    @tf.function(jit_compile=jit)
    def forward(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return loss_fn(y, model(x, training=True))

    @tf.function(jit_compile=jit)
    def gradients(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
            objective = optimizer.scale_loss(loss) if scaled else loss
        grads = tape.gradient(objective, variables)
        # One element of each gradient: all must be computed (nothing is pruned), and none
        # is copied out of the function.
        return tf.add_n([tf.cast(tf.reshape(g, [-1])[0], tf.float32) for g in grads])

    return {
        "forward": lambda batch: forward(*batch),
        "gradients": lambda batch: gradients(*batch),
        "step": lambda batch: step(*batch),
    }


def read_xspace(path: Path) -> tuple[list[OpTime], str]:
    """Operator self times from a TensorFlow profile; ("device" | "host") timeline used."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    devices = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    device_ops = [op for plane in devices for op in _device_ops(plane)]
    if device_ops:
        return device_ops, "device"
    hosts = [p for p in space.planes if p.name == "/host:CPU"]
    return [op for plane in hosts for op in _host_ops(plane)], "host"


def _host_ops(plane: Any) -> list[OpTime]:
    """TF ops on the host's threads: events named ``name:Type`` with display name ``Type``."""
    out: list[OpTime] = []
    for line in plane.lines:
        events = []
        for event in line.events:
            meta = plane.event_metadata[event.metadata_id]
            is_op = bool(meta.display_name) and meta.name.endswith(":" + meta.display_name)
            if is_op:
                events.append((event.offset_ps, event.duration_ps, meta))
        events.sort(key=lambda e: (e[0], -e[1]))
        # Self time: an op's duration less that of the ops directly nested in it.
        stack: list[list[Any]] = []  # [end_ps, meta, nested_ps, duration_ps]
        for start, duration, meta in events:
            while stack and stack[-1][0] <= start:
                out.append(_op(stack.pop()))
            if stack:
                stack[-1][2] += duration
            stack.append([start + duration, meta, 0, duration])
        while stack:
            out.append(_op(stack.pop()))
    return out


def _op(entry: list[Any]) -> OpTime:
    _, meta, nested_ps, duration_ps = entry
    name = meta.name[: -len(meta.display_name) - 1]
    return OpTime(meta.display_name, name, 1, max(duration_ps - nested_ps, 0) / 1e6)


def _device_ops(plane: Any) -> list[OpTime]:
    """Kernels and copies on the GPU's streams (they do not nest), each attributed to the
    TF op in its ``tf_op`` stat where it has one, else named as the device names it."""
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    out: list[OpTime] = []
    for line in plane.lines:
        if not line.name.startswith("Stream"):
            continue  # lines derived from the streams would count their time again
        for event in line.events:
            meta = plane.event_metadata[event.metadata_id]
            tf_op = ""
            for stat in (*event.stats, *meta.stats):
                if stat_names.get(stat.metadata_id) == "tf_op":
                    tf_op = stat.str_value or stat_names.get(stat.ref_value, "")
                    break
            name, _, op_type = tf_op.rpartition(":")
            operator = op_type or tf_op or meta.display_name or meta.name
            out.append(OpTime(operator, name, 1, event.duration_ps / 1e6))
    return out
