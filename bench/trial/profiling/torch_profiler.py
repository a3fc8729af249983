"""PyTorch: the phase breakdown and the profiled pass.

Breakdown.  PyTorch runs eagerly, so the session's own training step can be cut where its
phases meet, with ``session.sync()`` (``torch.cuda.synchronize``; nothing on the CPU) after
each: fetching the batch (``next_batch()``), forward and loss (``zero_grad`` included, as
in the step), backward (with the gradient scaler's scaling under fp16), and the optimizer
step (with the scaler's unscale/update).  Limits: on a GPU the syncs stop the CPU from
queueing the next phase while the current one runs, so the parts can add up to a little
more than an unsplit step, most for small models whose steps are bound by kernel launches;
with ``compile=true`` the compiled model runs forward and backward.

Profile.  ``torch.profiler`` records the steps (CPU, and CUDA kernels on a GPU); the trace is
exported as Chrome trace JSON (``trace.json``: open it in Perfetto, ui.perfetto.dev).
Operators are read from the recorded events with their parent chain as scope, so work
inside ``Optimizer.step`` or an autograd backward function can be categorized as such.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.autograd import DeviceType

from bench.core.config import BenchConfig
from bench.trial.frameworks.torch_adapter import TorchSession
from bench.trial.profiling.base import Profile
from bench.trial.profiling.operators import OpTime

TRACE_FILE = "trace.json"


class Profiler:
    def splitter(self, session: TorchSession, cfg: BenchConfig) -> Callable[[], dict[str, float]]:
        return lambda: self._split_step(session)

    def phases(self, calls: dict[str, float]) -> dict[str, float]:
        return dict(calls)  # the step's own phases, timed where they meet

    @staticmethod
    def _split_step(session: TorchSession) -> dict[str, float]:
        perf, sync = time.perf_counter, session.sync
        t0 = perf()
        x, y = session.next_batch()
        sync()
        t1 = perf()
        if not session.training:
            with torch.inference_mode(), session._autocast():
                session.forward(x)
            sync()
            return {"data": t1 - t0, "forward": perf() - t1}
        optimizer, scaler = session.optimizer, session.scaler
        optimizer.zero_grad(set_to_none=True)
        with session._autocast():
            loss = session.loss_fn(session.forward(x), y)
        sync()
        t2 = perf()
        if scaler is not None:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        sync()
        t3 = perf()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        sync()
        t4 = perf()
        return {"data": t1 - t0, "forward": t2 - t1, "backward": t3 - t2, "optimizer": t4 - t3}

    def profile(self, session: TorchSession, cfg: BenchConfig, steps: int, outdir: Path) -> Profile:
        from torch.profiler import ProfilerActivity, profile

        on_gpu = session.dev.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
        with profile(activities=activities) as prof:
            for _ in range(steps):
                session.step(session.next_batch())
            session.sync()
        session.take_mean_loss()
        prof.export_chrome_trace(str(outdir / TRACE_FILE))
        ops = []
        for event in prof.events():
            if event.device_type != DeviceType.CPU:
                continue  # a kernel: its time is counted as the self time of the op launching it
            self_us = event.self_device_time_total if on_gpu else event.self_cpu_time_total
            if self_us <= 0:
                continue
            chain = []
            parent = event.cpu_parent
            while parent is not None:
                chain.append(parent.name)
                parent = parent.cpu_parent
            ops.append(OpTime(event.name, "/".join(reversed(chain)), 1, float(self_us)))
        return Profile(ops, TRACE_FILE, "device" if on_gpu else "host")
