"""Sweeps on a Slurm cluster, through Hydra's submitit launcher.

``-m hydra/launcher=submitit_slurm`` selects Hydra's own submitit Slurm launcher with bench's
defaults (:class:`BenchSlurmConf`: the job's time limit derived from ``timeout_s``).  Each
trial is one sbatch job running the same task function as a local sweep, so it logs to the
same MLflow experiment (the tracking store must be reachable from the compute nodes: a
server, or a sqlite file on a shared filesystem).

Its launcher (``hydra_plugins/bench_slurm_launcher``, where Hydra wants launchers to live)
differs from the plugin's in one way: a job that Slurm ends (time
limit, preemption, node failure) does not abort the sweep.  It is noted in
:data:`ENDED_BY_SLURM`, and :mod:`bench.sweep` records its trial with the status Slurm gives.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from omegaconf import II

from bench.result import ERROR, KILLED, OOM, TIMEOUT


@dataclass
class EndedJob:
    job_id: str
    overrides: list[str]
    state: str
    error: str


# Jobs of the current sweep that ended without returning a result.
ENDED_BY_SLURM: list[EndedJob] = []


class JobTimeLimit(RuntimeError):
    """Raised in a job that Slurm's warning before its time limit (SIGUSR2) reached before
    its trial started: the trial is recorded as a timeout."""

    def __init__(self) -> None:
        super().__init__("Slurm's warning before the job's time limit came as the job started")


# The state noted for a trial whose job sbatch refused (recorded as an error).
NOT_SUBMITTED = "NOT_SUBMITTED"

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
}


@dataclass
class BenchSlurmConf(SlurmQueueConf):
    """The plugin's Slurm settings with bench's defaults."""

    _target_: str = "hydra_plugins.bench_slurm_launcher.bench_slurm_launcher.SlurmLauncher"
    # timeout_s in minutes, rounded up, plus one: the trial's own timeout acts first and is
    # recorded as `timeout`; Slurm's limit is the backstop.
    timeout_min: int = II("bench_minutes:${timeout_s}")
    # One job per trial on its `nodes` nodes (each job is sized by its own trial, see the
    # launcher), one task per node; the trial's `workers` (and parameter servers) start as
    # processes inside the allocation, so size cpus_per_task and gpus_per_node in a preset
    # (conf/slurm/) for the workers a sweep runs on each node.
    nodes: int = II("nodes")
    # The trial runs once, on the job's first node; with nodes > 1 it starts its own job
    # step across all of them (bench.distributed.nodes).
    srun_args: list[str] = field(default_factory=lambda: ["--nodes=1", "--ntasks=1"])
    name: str = "bench"
    # No requeue at the time limit: a benchmark that ran out of time is a result.
    max_num_timeout: int = 0
    signal_delay_s: int = 30


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


def job_state(job_id: str) -> str:
    """The job's state from Slurm's accounting (e.g. TIMEOUT); "" if unknown."""
    if not shutil.which("sacct"):
        return ""
    try:
        out = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    words = out.split()
    return words[0].upper() if words else ""  # e.g. "CANCELLED by 0" -> "CANCELLED"


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
