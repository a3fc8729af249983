"""MXNet: the phase breakdown and the profiled pass.

Breakdown.  A Gluon step is cut where its phases meet, with ``mx.nd.waitall()`` after each
(MXNet's engine runs everything asynchronously, on the CPU too): fetching the batch
(``next_batch()``, with the copy to the devices), forward and loss (under
``autograd.record()``, through the hybridized graph), backward, then the rest of the step
as ``MXNetSession.communicate`` splits it: ``optimizer`` alone on one device; ``comm``
(the device kvstore's gradient reduction) then ``optimizer`` with ``kvstore_device``; and
with the dist kvstores the push (the servers sum the workers' gradients and run the
optimizer) and the pull, together logged as communication, ``time_comm_ms`` (their split is
the per-epoch ``ps_push_ms`` and ``ps_pull_ms``).  Limits:
waiting after each phase stops MXNet from overlapping the gradients' push with the rest of
the backward pass, so with a kvstore the parts can add up to more than a whole step.

Profile.  ``mx.profiler`` records every operator (``profile_all``) into a Chrome trace
(``mxnet_profile.json``, for Perfetto or chrome://tracing), and its aggregate statistics give
the operator table: total time per operator name, on the engine's threads.  MXNet has no
call scopes for its operators: a backward operator is known by its name (``_backward_...``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import mxnet as mx
from mxnet import autograd

from bench.core.config import BenchConfig
from bench.trial.frameworks.mxnet_adapter import MXNetSession
from bench.trial.profiling.base import Profile
from bench.trial.profiling.operators import OpTime

TRACE_FILE = "mxnet_profile.json"


class Profiler:
    def splitter(self, session: MXNetSession, cfg: BenchConfig) -> Callable[[], dict[str, float]]:
        return lambda: self._split_step(session)

    def phases(self, calls: dict[str, float]) -> dict[str, float]:
        # Phases add up to the step (breakdown_sum_pct): push and pull are one phase here;
        # their split is logged per epoch (ps_push_ms, ps_pull_ms).
        out = {k: v for k, v in calls.items() if k not in ("push", "pull", "comm")}
        if {"push", "pull", "comm"} & calls.keys():
            out["comm"] = calls.get("push", 0.0) + calls.get("pull", 0.0) + calls.get("comm", 0.0)
        return out

    @staticmethod
    def _split_step(session: MXNetSession) -> dict[str, float]:
        perf, sync = time.perf_counter, session.sync
        t0 = perf()
        xs, ys = session.next_batch()
        sync()
        t1 = perf()
        if not session.training:
            for x in xs:
                session.net(x)
            sync()
            return {"data": t1 - t0, "forward": perf() - t1}
        with autograd.record():
            losses = [session.loss_fn(session.net(x), y) for x, y in zip(xs, ys, strict=True)]
        sync()
        t2 = perf()
        autograd.backward(losses)
        sync()
        t3 = perf()
        rest = session.communicate()
        return {"data": t1 - t0, "forward": t2 - t1, "backward": t3 - t2, **rest}

    def profile(self, session: MXNetSession, cfg: BenchConfig, steps: int, outdir: Path) -> Profile:
        mx.profiler.set_config(
            profile_all=True, aggregate_stats=True, filename=str(outdir / TRACE_FILE)
        )
        session.sync()
        mx.profiler.set_state("run")
        for _ in range(steps):
            session.step(session.next_batch())
        session.sync()
        mx.profiler.set_state("stop")
        session.take_mean_loss()
        stats = json.loads(mx.profiler.dumps(reset=True, format="json"))
        mx.profiler.dump()
        ops = []
        for domain, table in stats.get("Time", {}).items():
            if domain.startswith("MXNET_C_API"):
                continue  # the Python front end's API calls, which wrap the operators
            for name, row in table.items():
                if row.get("Total", 0) > 0:
                    ops.append(OpTime(name, domain, int(row["Count"]), 1e3 * float(row["Total"])))
        on_gpu = session.device.startswith("cuda")
        return Profile(ops, TRACE_FILE, "device" if on_gpu else "host")
