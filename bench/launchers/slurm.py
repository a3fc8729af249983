"""Sweeps on a Slurm cluster, through Hydra's submitit launcher.

``-m hydra/launcher=submitit_slurm`` selects Hydra's own submitit Slurm launcher with bench's
defaults (:class:`BenchSlurmConf`: the job's time limit derived from ``timeout_s``).  Each
trial is one sbatch job running the same task function as a local sweep, so it logs to the
same MLflow experiment (the tracking store must be reachable from the compute nodes: a
server, or a sqlite file on a shared filesystem).

Its launcher (``hydra_plugins/bench_slurm_launcher``, where Hydra wants launchers to live)
differs from the plugin's in that a job that Slurm ends (time limit, preemption, node
failure) does not abort the sweep: the launcher records its trial with the status Slurm
gives (:func:`status_for`, :meth:`bench.sweep.session.Sweep.record_ended`).  A job that Slurm keeps
pending for a reason that no wait will clear (:func:`never_starts`) is cancelled after
``unsatisfiable_after_s`` (:class:`PendingWatch`) rather than holding the sweep forever.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from omegaconf import II

from bench.core.result import ERROR, KILLED, OOM, TIMEOUT


class JobTimeLimit(RuntimeError):
    """Raised in a job that Slurm's warning before its time limit (SIGUSR2) reached before
    its trial started: the trial is recorded as a timeout."""

    def __init__(self) -> None:
        super().__init__("Slurm's warning before the job's time limit came as the job started")


# The state noted for a trial whose job sbatch refused (recorded as an error).
NOT_SUBMITTED = "NOT_SUBMITTED"
# The state noted for a job cancelled because Slurm would never start it.
UNSATISFIABLE = "UNSATISFIABLE"

# Slurm job states (sacct) and the trial status each one means.
STATE_STATUS = {
    "TIMEOUT": TIMEOUT,
    "DEADLINE": TIMEOUT,
    "PREEMPTED": KILLED,
    "CANCELLED": KILLED,
    "NODE_FAIL": ERROR,
    "BOOT_FAIL": ERROR,
    "OUT_OF_MEMORY": OOM,
    "FAILED": ERROR,
    UNSATISFIABLE: ERROR,
}

# Pending reasons (squeue's %r) that waiting does not clear: the job asks for what its
# partition, account or QOS never allows, or depends on a job that can no longer succeed.
# Per-user running limits (QOSMaxJobsPerUserLimit, ...) and busy resources clear; these do not.
_NEVER = {
    "BadConstraints",
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "AccountNotAllowed",
    "QOSNotAllowed",
    "InvalidAccount",
    "InvalidQOS",
    "DependencyNeverSatisfied",
}
_NEVER_PER_JOB = re.compile(r"^(QOS|Assoc)Max\w*PerJob(Limit)?$")


def never_starts(reason: str) -> bool:
    """Whether a job pending for ``reason`` will stay pending however long it waits."""
    return reason in _NEVER or bool(_NEVER_PER_JOB.match(reason))


@dataclass
class BenchSlurmConf(SlurmQueueConf):
    """The plugin's Slurm settings with bench's defaults."""

    _target_: str = "hydra_plugins.bench_slurm_launcher.bench_slurm_launcher.SlurmLauncher"
    # timeout_s (and a tuning=best search's budget) in minutes, rounded up, plus one: the
    # trial's own timeout acts first and is
    # recorded as `timeout`; Slurm's limit is the backstop.
    timeout_min: int = II("bench_minutes:${timeout_s},${tuning.name},${tuning.budget_s}")
    # One job per trial on its `nodes` nodes (each job is sized by its own trial, see the
    # launcher), one task per node; the trial's `workers` (and parameter servers) start as
    # processes inside the allocation, so size cpus_per_task and gpus_per_node in a preset
    # (conf/slurm/) for the workers a sweep runs on each node.
    nodes: int = II("nodes")
    # The trial runs once, on the job's first node; with nodes > 1 it starts its own job
    # step across all of them (bench.trial.distributed.nodes).
    srun_args: list[str] = field(default_factory=lambda: ["--nodes=1", "--ntasks=1"])
    name: str = "bench"
    # No requeue at the time limit: a benchmark that ran out of time is a result.
    max_num_timeout: int = 0
    signal_delay_s: int = 30
    # A job pending this long for a reason that never clears (squeue: BadConstraints,
    # PartitionTimeLimit, DependencyNeverSatisfied, a per-job QOS limit, ...) is cancelled
    # and recorded as an error naming the reason; a negative value waits forever.
    unsatisfiable_after_s: float = 60.0


def register_launcher_config() -> None:
    """Replace the plugin's ``hydra/launcher=submitit_slurm`` entry with bench's.

    Hydra's plugin scan executes the plugin's config module again (re-registering its own
    entry), so the scan is run first: it happens once per process and is cached.
    """
    from hydra.core.plugins import Plugins

    Plugins.instance()
    ConfigStore.instance().store(
        group="hydra/launcher", name="submitit_slurm", node=BenchSlurmConf, provider="bench"
    )


def ended_state(state: str, error: str) -> tuple[str, str]:
    """The state to record for a job that returned no result, and why, from its state in
    Slurm's accounting and the error submitit gives for it (the job's traceback and the
    paths of its logs): a job stopped by the warning before its time limit is a TIMEOUT
    whatever its exit code made of it.  The traceback is cut to its last line."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    trace = [line for line in lines if not line.startswith(("-----", "You can check", "- /"))]
    logs = [line[2:] for line in lines if line.startswith("- /")]
    if any(JobTimeLimit.__name__ in line for line in trace):
        state = "TIMEOUT"
        why = str(JobTimeLimit())
    else:
        why = trace[-1] if trace else error
    if logs:
        why += f" (job logs: {', '.join(logs)})"
    return (state or "UNKNOWN"), why


def status_for(state: str) -> str:
    return STATE_STATUS.get(state, ERROR)


def partition_nodes(partition: str | None) -> tuple[str, int] | None:
    """The partition a job would go to (``partition``, or the cluster's default) and its
    node count, from ``sinfo``; None where Slurm cannot be asked from here."""
    if not shutil.which("sinfo"):
        return None
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%P %D", *(["-p", partition] if partition else [])],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [line.split() for line in out.splitlines() if len(line.split()) == 2]
    if not partition:  # the default partition is marked with a *
        rows = [r for r in rows if r[0].endswith("*")]
    if not rows:
        return None
    # sinfo may print one line per node state in the partition: add them up.
    return rows[0][0].rstrip("*"), sum(int(r[1]) for r in rows if r[0] == rows[0][0])


def pending_reasons(job_ids: Sequence[str]) -> dict[str, str]:
    """Pending jobs among ``job_ids`` and Slurm's reason for each (one row per array task)."""
    if not job_ids or not shutil.which("squeue"):
        return {}
    try:
        out = subprocess.run(
            ["squeue", "-h", "-r", "-t", "PD", "-o", "%i|%r", "-j", ",".join(job_ids)],
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = (line.split("|", 1) for line in out.splitlines() if "|" in line)
    return {job.strip(): reason.strip() for job, reason in rows}


class PendingWatch:
    """Watches a sweep's jobs while it waits for them: a job pending for a reason that
    :func:`never_starts` for ``after_s`` seconds is cancelled (``scancel``), and its reason
    kept in :attr:`cancelled` for the trial's record."""

    def __init__(
        self,
        job_ids: Sequence[str],
        after_s: float,
        every_s: float = 5.0,
        reasons: Callable[[Sequence[str]], dict[str, str]] = pending_reasons,
        cancel: Callable[[str], None] | None = None,
    ) -> None:
        self.job_ids = [j for j in job_ids if j]
        self.after_s, self.every_s = after_s, every_s
        self._reasons, self._cancel = reasons, cancel or _scancel
        self.cancelled: dict[str, str] = {}
        self._since: dict[str, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-slurm-pending", daemon=True)

    def add(self, job_ids: Sequence[str]) -> None:
        self.job_ids.extend(j for j in job_ids if j)

    def __enter__(self) -> PendingWatch:
        if self.after_s >= 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def check(self, now: float) -> None:
        """One look at the jobs still pending."""
        waiting = [j for j in self.job_ids if j not in self.cancelled]
        for job, reason in self._reasons(waiting).items():
            if not never_starts(reason):
                self._since.pop(job, None)
                continue
            seen, since = self._since.setdefault(job, (reason, now))
            if seen != reason:
                self._since[job] = (reason, now)
            elif now - since >= self.after_s:
                self._cancel(job)
                self.cancelled[job] = reason
                print(f"bench: Slurm job {job}: {self.why(job)}", file=sys.stderr)

    def why(self, job: str) -> str:
        """What to record for a job this watch cancelled."""
        return (
            f"Slurm would never start the job (pending, reason {self.cancelled[job]}); "
            f"cancelled after {self.after_s:g} s"
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check(time.monotonic())
            self._stop.wait(self.every_s)


def _scancel(job_id: str) -> None:
    subprocess.run(["scancel", job_id], capture_output=True, timeout=30, check=False)
