"""bench's Slurm launcher: Hydra's submitit Slurm launcher that survives jobs Slurm ends.

Selected by ``hydra/launcher=submitit_slurm`` (see :mod:`bench.launchers.slurm`, which holds the
configuration and the Slurm-side helpers).  It submits through its own submitit executor:
each job is sized by its own trial's ``nodes`` (one array per node count), a job that can
never start is cancelled (:class:`bench.launchers.slurm.PendingWatch`), and a job that Slurm ends
without a result (time limit, preemption, node failure, refused by sbatch) is recorded in
the sweep's store with the status its Slurm state means, and returned as that trial's row,
so the sweep goes on.
"""

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
    SlurmLauncher as _PluginSlurmLauncher,
)
from omegaconf import OmegaConf

from bench.launchers.base import TimeLimitReached, on_time_limit_warning
from bench.launchers.slurm import (
    NOT_SUBMITTED,
    UNSATISFIABLE,
    BenchSlurmConf,
    JobTimeLimit,
    PendingWatch,
    ended_state,
    status_for,
)


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

    def _executor(self) -> Any:
        """A submitit executor with this launcher's queue parameters (as the plugin's own
        launch makes it)."""
        import submitit

        params = dict(self.params)
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init["slurm_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster="slurm", **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{k if k in base else f"slurm_{k}": v for k, v in params.items()}
        )
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from bench.sweep.compose import to_bench_config

        assert self.config is not None and self.hydra_context is not None
        loader = self.hydra_context.config_loader
        configs = [
            to_bench_config(loader.load_sweep_config(self.config, list(overrides)))
            for overrides in job_overrides
        ]
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        executor = self._executor()
        jobs: list[Any] = [None] * len(job_overrides)
        refused: dict[int, str] = {}
        watch = PendingWatch([], self.unsatisfiable_after_s)
        with watch:
            # One array per node count: each job is sized by its own trial's `nodes`.
            for size in sorted({cfg.nodes for cfg in configs}):
                picked = [i for i, cfg in enumerate(configs) if cfg.nodes == size]
                executor.update_parameters(nodes=size)
                calls = [
                    (
                        list(job_overrides[i]),
                        "hydra.sweep.dir",
                        initial_job_idx + i,
                        f"job_id_for_{initial_job_idx + i}",
                        Singleton.get_state(),
                    )
                    for i in picked
                ]
                try:
                    got = executor.map_array(self, *zip(*calls, strict=True))
                except Exception as exc:  # noqa: BLE001 - e.g. more nodes than the partition has
                    print(f"bench: Slurm refused the nodes={size} job(s): {exc}", file=sys.stderr)
                    refused.update({i: str(exc) for i in picked})
                    continue
                for i, job in zip(picked, got, strict=True):
                    # submitit expects a result from each of the job's nodes x tasks; the
                    # trial runs once, on the first node (srun_args), and returns there.
                    jobs[i] = type(job)(folder=executor.folder, job_id=job.job_id, tasks=(0,))
                watch.add([str(jobs[i].job_id) for i in picked])
            ids = ", ".join(str(job.job_id) for job in jobs if job is not None)
            print(
                f"bench: {len(jobs)} trial(s) submitted to Slurm as job(s) {ids}; waiting",
                file=sys.stderr,
            )
            returns = []
            for i, (job, overrides) in enumerate(zip(jobs, job_overrides, strict=True)):
                try:
                    if job is None:
                        raise RuntimeError(refused[i])
                    returns.append(job.results()[0])
                except Exception as exc:  # noqa: BLE001 - recorded as the trial's result
                    returns.append(self._ended(job, list(overrides), configs[i], exc, watch))
        return returns

    def _context(self) -> Any:
        """The sweep's collaborators (the store the sweep opened, the launchers), which
        bench's sweeper hands this launcher with the task function; new ones otherwise."""
        from bench.sweep.session import SweepContext

        context = getattr(self.task_function, "keywords", {}).get("context")
        return context if isinstance(context, SweepContext) else SweepContext()

    def _ended(
        self, job: Any, overrides: list[str], cfg: Any, exc: Exception, watch: PendingWatch
    ) -> JobReturn:
        """The trial of a job that returned no result, recorded in its sweep's store with
        the status its Slurm state means; a completed job return holding its row (not
        FAILED: Hydra would abort the whole sweep on it)."""
        from bench.sweep.jobs import SweepRef, trial_label
        from bench.sweep.session import Sweep

        job_id = str(job.job_id) if job is not None else ""
        if job is None:
            state, why = NOT_SUBMITTED, f"Slurm did not accept the job: {exc}"
        elif job_id in watch.cancelled:
            state, why = UNSATISFIABLE, watch.why(job_id)
        else:
            state, error = ended_state(str(job.state).split()[0].upper(), str(exc))
            why = f"Slurm job {job_id} ended in state {state}: {error}"
        ended = JobReturn(overrides=overrides, status=JobStatus.COMPLETED)
        ref = SweepRef.from_overrides(overrides)
        if ref is not None:
            label = trial_label(cfg, overrides, ref.varying)
            sweep = Sweep.attach(cfg, ref.sweep_id, ref.total, self._context())
            ended.return_value = sweep.record_ended(cfg, label, status_for(state), why, job_id)
        return ended
