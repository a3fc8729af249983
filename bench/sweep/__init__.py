"""Sweeps: from Hydra's jobs to trial runs, and from trial runs to a summary.

- :mod:`.jobs`: a sweep's jobs (the cartesian product, with interleaved repeats), each
  composed into a typed :class:`~bench.core.config.BenchConfig` and validated before any trial;
- :mod:`.session`: the parent run, one trial run per job, the summary table;
- :mod:`.driver`: what bench's sweeper (``hydra_plugins/bench_sweeper``) and the task function
  (:mod:`bench.cli`) each do with them.

The sweeper, the task function and the Slurm launcher share no module state: the sweeper
tells each job which sweep it belongs to through the job's environment
(``hydra.job.env_set``, applied by Hydra wherever the job runs), and each job returns its
summary row as its return value.  This ``__init__`` imports nothing.
"""
