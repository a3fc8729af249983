"""MXNet's parameter server on this machine: ``distributed=kvstore_sync`` / ``kvstore_async``.

The trial's process (``python -m bench.trial.worker`` in MXNet's environment) becomes the job's
launcher, as MXNet's ``tools/launch.py`` is: it starts a scheduler, ``ps`` servers and
``workers`` workers, each ``python -m bench.trial.distributed.kvstore ROLE`` with MXNet's rendezvous
variables (``DMLC_ROLE``, ``DMLC_PS_ROOT_URI=127.0.0.1``, ``DMLC_PS_ROOT_PORT``: a free port,
``DMLC_NUM_SERVER``, ``DMLC_NUM_WORKER``).  A scheduler or server process only imports mxnet,
which serves its role and exits.  A worker runs :func:`bench.trial.loop.run_trial` with
``kvstore=dist_sync`` (the servers update once every worker has pushed: all-worker
synchronous SGD) or ``dist_async`` (the servers apply each worker's push on arrival), on
its shard of a labelled data set, and writes its records into ``kvstore/worker{i}/``.

Threads: with ``threads=0`` each worker gets usable cores / ``workers`` (at least 1) intra-op
threads; the scheduler and servers one each.  The servers run the optimizer.

Figures.  Per epoch, as the workers report it: ``samples_per_s`` is global, the sum of the
workers' own rates over their timed windows (so ``samples`` is every worker's samples and
``epoch_time_s`` the slowest worker's window), ``worker{i}_samples_per_s`` each worker's
rate; step-time percentiles are the slowest worker's; ``time_comm_ms``, ``ps_push_ms`` and
``ps_pull_ms`` are the workers' mean of a communication probe run after each window (see
``MXNetSession.after_window``); other figures are the workers' mean (sums for FLOP/s, CPU
use and memory).  Whole-trial: ``trial_samples_per_s`` and ``global_samples_per_s`` are the
sum of the workers' rates, the untimed phases and artifacts are worker 0's.

Nothing is left behind: every process is in the trial's process group (the host's timeout
or Ctrl-C stops the group), each dies with this process (PR_SET_PDEATHSIG), a role that
exits early or a worker that fails stops all of them, and the scheduler and servers are
stopped once the workers are done.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.core import metrics
from bench.core.config import BenchConfig, to_dict, usable_cpus
from bench.core.result import ERROR, OK, EpochCallback, EpochRecord, TrialResult
from bench.trial.distributed import launch
from bench.trial.distributed.base import Proc
from bench.trial.runtime import child, processes
from bench.trial.runtime.hooks import NO_HOOKS, TrialHooks
from bench.trial.runtime.protocol import (
    CONFIG,
    EVENTS,
    RESULT,
    EventReader,
    clear,
    read_config,
    read_result,
    tail,
    write_config,
)

ROOT = "kvstore"  # under the trial's working directory
POLL_S = 0.2
# After a worker fails, the others get this long to finish on their own before being stopped.
FAILURE_GRACE_S = 2.0
# Per-epoch figures summed over the workers (the rest are averaged).
SUMMED = (
    metrics.ACHIEVED_FLOPS_PER_S,
    metrics.CPU_UTIL_PCT,
    metrics.HOST_RSS_MB,
    metrics.ENERGY_J,
    metrics.CPU_ENERGY_J,
)


def worker_threads(cfg: BenchConfig) -> int:
    return cfg.threads if cfg.threads > 0 else max(1, usable_cpus() // cfg.workers)


class _Job:
    """The scheduler, servers and workers of one kvstore trial, started and stopped through
    :mod:`bench.trial.distributed.launch` like every other strategy's processes."""

    def __init__(self, cfg: BenchConfig, root: Path) -> None:
        self.cfg, self.root = cfg, root
        self.roles: list[launch.Running] = []
        self.port = processes.free_port()

    def env(self, role: str, threads: int, index: int = 0) -> dict[str, str]:
        return dict(
            os.environ,
            DMLC_ROLE=role,
            DMLC_PS_ROOT_URI="127.0.0.1",
            DMLC_PS_ROOT_PORT=str(self.port),
            DMLC_NUM_SERVER=str(self.cfg.ps),
            DMLC_NUM_WORKER=str(self.cfg.workers),
            DMLC_NODE_HOST="127.0.0.1",  # every node on the loopback interface
            OMP_NUM_THREADS=str(threads),
            BENCH_LOCAL_RANK=str(index),
            **{processes.ENV_PARENT_PID: str(os.getpid())},
            PYTHONUNBUFFERED="1",
        )

    def start(self, role: str, name: str, args: list[str], env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", "bench.trial.distributed.kvstore", role, *args]
        self.roles += launch.spawn([Proc(name, argv)], self.root, env)

    def stop(self, grace_s: float) -> None:
        """SIGTERM every role still running (and what they started), SIGKILL what is left
        after ``grace_s``."""
        launch.stop_all(self.roles, grace_s)


def merge_epoch(records: list[EpochRecord]) -> EpochRecord:
    """One global record from the workers' records of the same epoch (index = worker)."""
    losses = [r.loss for r in records if r.loss is not None]
    merged = EpochRecord(
        epoch=records[0].epoch,
        steps=records[0].steps,
        samples=sum(r.samples for r in records),
        epoch_time_s=max(r.epoch_time_s for r in records),
        samples_per_s=sum(r.samples_per_s for r in records),
        step_time_p50_ms=max(r.step_time_p50_ms for r in records),
        step_time_p90_ms=max(r.step_time_p90_ms for r in records),
        step_time_p99_ms=max(r.step_time_p99_ms for r in records),
        loss=statistics.fmean(losses) if losses else None,
    )
    keys = sorted({key for r in records for key in r.extra})
    for key in keys:
        values = [r.extra[key] for r in records if key in r.extra]
        merged.extra[key] = sum(values) if key in SUMMED else statistics.fmean(values)
    for i, r in enumerate(records):
        merged.extra[f"worker{i}_samples_per_s"] = r.samples_per_s
    return merged


def merge(cfg: BenchConfig, results: list[TrialResult | None], problem: str) -> TrialResult:
    """One trial result from the workers' (None: a worker that wrote none)."""
    done = [r for r in results if r is not None]
    first = done[0] if done else None
    merged = TrialResult(
        status=OK,
        framework=cfg.framework.name,
        model=cfg.model.name,
        mode=cfg.mode,
    )
    if first is not None:
        merged.device, merged.threads = first.device, first.threads
        merged.num_parameters = first.num_parameters
        merged.phases = dict(first.phases)
        merged.environment = dict(first.environment)
        merged.marks = dict(first.marks)
        merged.files = [f"{ROOT}/worker0/{name}" for name in first.files]
    merged.environment.pop("kvstore_rank", None)
    merged.environment.update(
        kvstore=cfg.distributed.kvstore,
        kvstore_servers=str(cfg.ps),
        kvstore_workers=str(cfg.workers),
        # The rank the scheduler gave each worker process (worker{i} is the i-th started).
        kvstore_ranks=",".join(
            r.environment.get("kvstore_rank", "?") if r else "?" for r in results
        ),
    )
    if len(done) == len(results):
        count = min(len(r.epochs) for r in done)
        merged.epochs = [merge_epoch([r.epochs[e] for r in done]) for e in range(count)]
    errors = [
        f"worker {i}: {'no result' if r is None else r.status}: {r.error if r else ''}".rstrip()
        for i, r in enumerate(results)
        if r is None or r.status != OK
    ]
    if problem or errors:
        statuses = [r.status for r in done if r.status != OK]
        merged.status = statuses[0] if statuses else ERROR
        merged.error = "\n".join([problem, *errors]).strip()[-20000:]
        return merged
    rates = [r.summary[metrics.TRIAL_SAMPLES_PER_S] for r in done]
    merged.summary = dict(done[0].summary)
    merged.summary[metrics.TRIAL_SAMPLES_PER_S] = sum(rates)
    merged.summary[metrics.GLOBAL_SAMPLES_PER_S] = sum(rates)
    merged.summary[metrics.TRIAL_TIME_S] = max(r.summary[metrics.TRIAL_TIME_S] for r in done)
    merged.summary[metrics.PEAK_HOST_RSS_MB] = max(
        r.summary.get(metrics.PEAK_HOST_RSS_MB, 0.0) for r in done
    )
    for key in (
        metrics.TRIAL_STEP_TIME_P50_MS,
        metrics.TRIAL_STEP_TIME_P90_MS,
        metrics.TRIAL_STEP_TIME_P99_MS,
    ):
        merged.summary[key] = max(r.summary[key] for r in done)
    if metrics.FINAL_LOSS in merged.summary:
        merged.summary[metrics.FINAL_LOSS] = statistics.fmean(
            r.summary[metrics.FINAL_LOSS] for r in done
        )
    if metrics.TRIAL_ACHIEVED_FLOPS_PER_S in merged.summary:
        merged.summary[metrics.TRIAL_ACHIEVED_FLOPS_PER_S] = sum(
            r.summary[metrics.TRIAL_ACHIEVED_FLOPS_PER_S] for r in done
        )
    for i, rate in enumerate(rates):
        merged.summary[f"worker{i}_trial_samples_per_s"] = rate
    return merged


def run(
    cfg: BenchConfig,
    on_epoch: EpochCallback | None,
    workdir: Path | None,
    hooks: TrialHooks = NO_HOOKS,
) -> TrialResult:
    """Start the job, stream the workers' merged epochs to ``on_epoch``, merge the results.
    Each worker runs with ``hooks``."""
    with tempfile.TemporaryDirectory(prefix="bench-kvstore-") as tmp:
        return _run(cfg, on_epoch, Path(tmp) if workdir is None else workdir, hooks)


def _run(
    cfg: BenchConfig, on_epoch: EpochCallback | None, workdir: Path, hooks: TrialHooks
) -> TrialResult:
    root = workdir / ROOT
    root.mkdir(parents=True, exist_ok=True)
    worker_cfg = dataclasses.replace(cfg, threads=worker_threads(cfg))
    write_config(root / CONFIG, to_dict(worker_cfg))
    hooks.write(root)  # beside the workers' config, where they read them
    job = _Job(cfg, root)
    dirs = [root / f"worker{i}" for i in range(cfg.workers)]
    events = [EventReader(d / EVENTS) for d in dirs]
    emitted = 0
    problem = ""

    def emit() -> None:
        nonlocal emitted
        for e in range(emitted, min(len(ev.epochs) for ev in events)):
            if on_epoch is not None:
                on_epoch(merge_epoch([ev.epochs[e] for ev in events]))
            emitted = e + 1

    try:
        job.start("scheduler", "scheduler", [], job.env("scheduler", 1))
        for k in range(cfg.ps):
            job.start("server", f"server{k}", [], job.env("server", 1))
        for i, d in enumerate(dirs):
            d.mkdir(exist_ok=True)
            clear(d, EVENTS, RESULT)
            job.start("worker", f"worker{i}", [str(d)], job.env("worker", worker_threads(cfg), i))
        workers = job.roles[-cfg.workers :]
        failed_at: float | None = None
        while True:
            for ev in events:
                ev.poll()
            emit()
            codes = [w.popen.poll() for w in workers]
            if all(code is not None for code in codes):
                break
            for role in job.roles[: -cfg.workers]:  # scheduler and servers outlive the workers
                if role.popen.poll() is not None and not problem:
                    problem = f"the {role.proc.name} exited early (code {role.popen.returncode}):\n"
                    problem += tail(role.log, 25)
            for w, d, code in zip(workers, dirs, codes, strict=True):
                result = read_result(d / RESULT) if code is not None else None
                if code is not None and (result is None or result.status != OK) and not problem:
                    problem = f"{w.proc.name} ended (code {code}) without a complete result:\n"
                    problem += tail(w.log, 25)
            if problem:
                failed_at = failed_at or time.monotonic()
                if time.monotonic() - failed_at > FAILURE_GRACE_S:
                    break
            time.sleep(POLL_S)
    finally:
        job.stop(grace_s=5.0)
    for ev in events:
        ev.poll()
    emit()
    result = merge(cfg, [read_result(d / RESULT) for d in dirs], problem)
    result.files += [f"{ROOT}/{role.proc.name}.log" for role in job.roles]
    return result


# --- the roles' own processes -----------------------------------------------------------------


def _worker(workdir: Path) -> int:
    from bench.trial.distributed.base import collective_timeout_s
    from bench.trial.loop import run_trial
    from bench.trial.runtime.agree import agree_max

    cfg = read_config(workdir.parent / CONFIG)
    hooks = TrialHooks.read(workdir.parent)  # what the job's launcher wrote beside it

    def agree(steps: int) -> int:  # every worker times the same number of steps
        return agree_max(
            workdir.parent / "auto_steps", cfg.workers, steps, collective_timeout_s(cfg)
        )

    index = int(workdir.name.removeprefix("worker"))  # its share of the parity check's batches

    def trial(c: BenchConfig, on_epoch: EpochCallback | None, out: Path | None) -> TrialResult:
        return run_trial(c, on_epoch, out, rank=index, agree=agree, hooks=hooks)

    child.serve(cfg, workdir, trial)
    return 0


def main(argv: list[str]) -> int:
    child.start()  # every role dies with the job's launcher
    role = argv[0]
    if role in ("scheduler", "server"):
        import mxnet  # noqa: F401 - with DMLC_ROLE set, importing mxnet serves the role and exits

        return 0
    return _worker(Path(argv[1]))


if __name__ == "__main__":
    child.exit_now(main(sys.argv[1:]))
