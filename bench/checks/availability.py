"""The cells of a sweep this machine cannot run: a GPU trial on a host with none, a
multi-node trial outside an allocation, a strategy whose package is not built here (Horovod
before ``bench setup horovod``).  A sweep whose configs say ``skip_unavailable=true``
(the study presets) lists and skips them; anywhere else such a cell is refused as bad input
(:func:`bench.sweep.jobs.check_all`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from bench.core.config import BenchConfig


def not_here(cfg: BenchConfig, slurm: bool = False) -> str:
    """Why this machine cannot run a trial it was not built for (a GPU trial on a host with
    none, a multi-node trial outside an allocation), or "" where it can.  Only a sweep with
    ``skip_unavailable=true`` (a study preset) skips such cells; anywhere else they are
    refused as bad input, by :func:`check_all`."""
    from bench.trial.distributed.registry import MULTI_NODE, NONE

    # A strategy that never runs across nodes is refused anywhere (bench.checks.config), not
    # skipped as if another machine could run it (MXNet's kvstore modes, one-process ones).
    if cfg.nodes > 1 and not slurm and cfg.distributed.name in (NONE, *MULTI_NODE):
        from bench.trial.distributed.nodes import allocation_problem

        problem = allocation_problem(cfg)
        if problem:
            return (
                f"needs {cfg.nodes} nodes (hydra/launcher=submitit_slurm, or inside an allocation)"
            )
    if slurm:
        return ""
    package = cfg.distributed.built_by_setup
    if package and importlib.util.find_spec(package) is None:
        return f"needs {package}, not built here (`bench setup {package}` builds it, once)"
    from bench.checks import device as device_preflight
    from bench.trial.distributed.registry import STRATEGIES

    info = STRATEGIES.get(cfg.distributed.name)
    gpu_only = info is not None and cfg.framework.name in info.gpu_only
    if cfg.device == "cuda" or gpu_only:
        seen = device_preflight.seen(cfg)
        if cfg.device == "cuda" and seen.gpus == 0:
            return f"needs a GPU; {cfg.framework.name} sees none ({seen.detail})"
        if gpu_only and (cfg.device == "cpu" or seen.gpus < 2):
            where = "device=cpu" if cfg.device == "cpu" else f"{seen.gpus} seen: {seen.detail}"
            return (
                f"needs a GPU; {cfg.framework.name}'s distributed={cfg.distributed.name} runs on "
                f"2 CUDA devices ({where})"
            )
    return ""


def split_unavailable(
    composed: Sequence[tuple[str, list[str], BenchConfig]], slurm: bool = False
) -> tuple[list[tuple[str, list[str], BenchConfig]], list[tuple[str, str]]]:
    """The jobs this machine can run, and (label, why) of the cells it cannot, for the
    jobs whose config says ``skip_unavailable=true``; a cell that repeats is named once."""
    kept, skipped = [], []
    for label, job, cfg in composed:
        why = not_here(cfg, slurm) if cfg.skip_unavailable else ""
        cell = " ".join(word for word in label.split() if not word.startswith("repeat="))
        if not why:
            kept.append((label, job, cfg))
        elif (cell, why) not in skipped:
            skipped.append((cell, why))
    return kept, skipped
