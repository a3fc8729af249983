"""bench's Slurm launcher: Hydra's submitit Slurm launcher that survives jobs Slurm ends.

Selected by ``hydra/launcher=submitit_slurm`` (see :mod:`bench.slurm`, which holds the
configuration and the Slurm-side helpers).
"""

import sys
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
    SlurmLauncher as _PluginSlurmLauncher,
)

from bench.launchers.base import TimeLimitReached, on_time_limit_warning
from bench.slurm import (
    ENDED_BY_SLURM,
    NOT_SUBMITTED,
    UNSATISFIABLE,
    BenchSlurmConf,
    EndedJob,
    JobTimeLimit,
    PendingWatch,
    ended_state,
    job_state,
)


class _NotSubmitted:
    """Stands for a job sbatch refused: it has no id, and no result."""

    job_id = ""

    def __init__(self, error: str) -> None:
        self.error = error

    def results(self) -> list[Any]:
        raise RuntimeError(self.error)


class SlurmLauncher(_PluginSlurmLauncher):
    def __init__(self, **params: Any) -> None:
        # bench's own setting, not one for submitit's executor
        self.unsatisfiable_after_s = float(
            params.pop("unsatisfiable_after_s", BenchSlurmConf.unsatisfiable_after_s)
        )
        super().__init__(**params)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The job's side: Slurm's warning before the time limit (SIGUSR2) means the time
        limit from the job's first moment.  Left to submitit, a warning that came while the
        job was still starting (importing, composing its config) ended it with a requeue
        error, and the trial was recorded as a failure instead of a timeout."""
        on_time_limit_warning()
        try:
            return super().__call__(*args, **kwargs)
        except TimeLimitReached:  # before the trial took over; submitit keeps an Exception
            raise JobTimeLimit from None

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        import submitit

        # The plugin creates its executor inside launch() and only returns once every job
        # has a result; intercept map_array to keep hold of the jobs it submits.
        ENDED_BY_SLURM.clear()
        submitted: list[Any] = []
        original = submitit.AutoExecutor.map_array

        # Each job is sized by its own trial's `nodes`: jobs are submitted in one array per
        # node count (the plugin would size every job of the sweep alike).
        sizes = [self._nodes_of(overrides) for overrides in job_overrides]

        def keep(executor: Any, fn: Any, *iterables: Any) -> Any:
            calls = list(zip(*iterables, strict=True))
            jobs: list[Any] = [None] * len(calls)
            for size in sorted(set(sizes)):
                picked = [i for i, n in enumerate(sizes) if n == size]
                executor.update_parameters(nodes=size)
                try:
                    got = original(executor, fn, *zip(*(calls[i] for i in picked), strict=True))
                except Exception as exc:  # noqa: BLE001 - e.g. more nodes than the partition has
                    print(f"bench: Slurm refused the nodes={size} job(s): {exc}", file=sys.stderr)
                    for i in picked:
                        jobs[i] = _NotSubmitted(str(exc))
                    continue
                for i, job in zip(picked, got, strict=True):
                    # submitit expects a result from each of the job's nodes x tasks; the
                    # trial runs once, on the first node (srun_args), and returns there.
                    jobs[i] = type(job)(folder=executor.folder, job_id=job.job_id, tasks=(0,))
            submitted.extend(jobs)
            watch.add([str(job.job_id) for job in jobs])
            ids = ", ".join(str(job.job_id) for job in jobs if job.job_id)
            print(
                f"bench: {len(jobs)} trial(s) submitted to Slurm as job(s) {ids}; waiting",
                file=sys.stderr,
            )
            return jobs

        submitit.AutoExecutor.map_array = keep  # type: ignore[method-assign,assignment]
        watch = PendingWatch([], self.unsatisfiable_after_s)
        try:
            with watch:
                try:
                    return super().launch(job_overrides, initial_job_idx)
                except Exception:  # noqa: BLE001 - some job ended without a result
                    pass
        finally:
            submitit.AutoExecutor.map_array = original  # type: ignore[method-assign]
        returns = []
        for job, overrides in zip(submitted, job_overrides, strict=True):
            try:
                returns.append(job.results()[0])
            except Exception as exc:  # noqa: BLE001 - recorded as the trial's result
                if str(job.job_id) in watch.cancelled:
                    state, why = UNSATISFIABLE, watch.why(str(job.job_id))
                elif job.job_id:
                    state, why = ended_state(job_state(str(job.job_id)), str(exc))
                else:
                    state, why = NOT_SUBMITTED, str(exc)
                ENDED_BY_SLURM.append(EndedJob(str(job.job_id), list(overrides), state, why))
                # Not FAILED: Hydra's sweeper would abort the whole sweep on it.
                ended = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
                ended._return_value = None
                returns.append(ended)
        return returns

    def _nodes_of(self, overrides: Sequence[str]) -> int:
        """The ``nodes`` of the trial these overrides make."""
        from bench.cli import validated_config

        known = validated_config(overrides)
        if known is not None:  # composed once already, when the sweep was validated
            return known.nodes
        assert self.config is not None and self.hydra_context is not None
        loader = self.hydra_context.config_loader
        cfg = loader.load_sweep_config(self.config, list(overrides))
        return int(cfg.get("nodes", 1))
