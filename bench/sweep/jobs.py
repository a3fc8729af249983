"""A sweep's jobs, composed and validated before any trial starts.

:func:`expand` turns the parsed overrides into every job's overrides in launch order (the
cartesian product, first key varying slowest, as Hydra's basic sweeper orders it; with
``repeats`` > 1, rounds of it, alternately reversed).  :func:`bench.sweep.compose.compose_all`
composes each job into a typed :class:`~bench.core.config.BenchConfig` and :func:`check_all`
checks every one of them (bench.checks' two stages, once per distinct configuration): a
problem anywhere stops the sweep before its first trial, with exit status 2 and a message
naming the field (:func:`fail`).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from bench.core.config import BenchConfig, ConfigError
from bench.core.zoo import model_label

# The job's environment (hydra.job.env_set) that ties it to its sweep's parent run.
ENV_SWEEP, ENV_TOTAL, ENV_VARYING = "BENCH_SWEEP_RUN", "BENCH_SWEEP_TOTAL", "BENCH_SWEEP_VARYING"


class BenchExit(SystemExit):
    """bench's own exit, with its status (Hydra's refusals exit through ``sys.exit(1)``)."""


def fail(problems: Sequence[str]) -> NoReturn:
    print("bench: invalid configuration; no trial was started:", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    raise BenchExit(2)


@dataclass(frozen=True)
class SweepRef:
    """Which sweep a job belongs to: its parent run, its size, the keys it varies."""

    sweep_id: str
    total: int
    varying: tuple[str, ...]

    def overrides(self) -> list[str]:
        """The job overrides that hand this reference to the job's environment."""
        env = {
            ENV_SWEEP: self.sweep_id,
            ENV_TOTAL: str(self.total),
            ENV_VARYING: "+".join(self.varying),
        }
        return [f"++hydra.job.env_set.{key}='{value}'" for key, value in env.items()]

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> SweepRef | None:
        env = dict(os.environ) if env is None else env
        if not env.get(ENV_SWEEP):
            return None
        varying = tuple(k for k in env.get(ENV_VARYING, "").split("+") if k)
        return cls(env[ENV_SWEEP], int(env.get(ENV_TOTAL) or 0), varying)

    @classmethod
    def from_overrides(cls, overrides: Sequence[str]) -> SweepRef | None:
        """The reference among a job's overrides (as :meth:`overrides` wrote them)."""
        prefix = "++hydra.job.env_set."
        given = (o.removeprefix(prefix).partition("=") for o in overrides if o.startswith(prefix))
        return cls.from_env({key: value.strip("'") for key, _, value in given})


def pairs(overrides: Sequence[str]) -> dict[str, str]:
    """``key: value`` of a job's task overrides (Hydra's own ``hydra.*`` left out)."""
    out = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.lstrip("+~")
        if sep and not key.startswith("hydra."):
            out[key] = value
    return out


def varying(jobs: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The override keys whose value differs between jobs, in first-seen order."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for key, value in pairs(job).items():
            values.setdefault(key, set()).add(value)
    return tuple(k for k, v in values.items() if len(v) > 1)


def trial_label(cfg: BenchConfig, overrides: Sequence[str], keys: Sequence[str]) -> str:
    """A short name for a trial: framework, model and whatever the sweep varies.  The model
    is named as the report names it, with its source where it is not the zoo's
    (``model=hf:llama``, ``model=stock:resnet50``: :func:`bench.core.zoo.model_label`)."""
    given = pairs(overrides)
    built = cfg.framework.installed.split(" ", 1)[0] or cfg.framework.version
    version = f"=={built}" if built else ""
    m = cfg.model
    model = model_label({"model.name": m.name, "model.source": m.source, "model.builder": m.builder,
                         "model.torch": m.torch, "model.tf": m.tf})  # fmt: skip
    shown = [f"framework={cfg.framework.name}{version}", f"model={model}"]
    own = ("framework", "model", "model.name", "model.source", "framework.version")  # shown above
    shown += [f"{k}={given[k]}" for k in keys if k in given and k not in own]
    return " ".join(shown)


def expand(
    overrides: Sequence[Any], repeats: int, blocks: Sequence[Sequence[Any]] = ()
) -> list[list[str]]:
    """Every job's overrides in launch order, from a sweep's parsed overrides (Hydra's
    ``Override`` objects).  ``blocks`` (the sweeper's ``grid``, each a list of parsed
    overrides with the params before and the command line after it) make the matrix a union
    of products: each block's product, in order, a job that two blocks share run once.
    ``repeats`` > 1 runs the matrix in rounds: ``repeat=0`` over every configuration, then
    ``repeat=1`` over them in reverse order, and so on, so that a drift of the machine
    during the sweep falls evenly on every configuration."""
    jobs: list[list[str]] = []
    for block in blocks or [overrides]:
        for job in _product(block, repeats):
            if job not in jobs:
                jobs.append(job)
    if repeats <= 1:
        return jobs
    rounds = []
    for r in range(repeats):
        order = jobs if r % 2 == 0 else jobs[::-1]
        rounds += [[f"repeat={r}", *job] for job in order]
    return rounds


def _product(overrides: Sequence[Any], repeats: int) -> list[list[str]]:
    """The cartesian product of one list of parsed overrides, the first key varying
    slowest; a key given twice takes its last value (the command line's)."""
    keys = {o.key_or_group.lstrip("+~"): o for o in overrides}
    if "repeats" in keys and keys["repeats"].is_sweep_override():
        raise ConfigError(["repeats: give one number of runs per configuration, not a sweep"])
    if repeats > 1 and "repeat" in keys:
        raise ConfigError(
            [f"repeat: set by the sweeper when repeats > 1 (repeats={repeats}); leave it out"]
        )
    choices: dict[str, list[str]] = {}
    for o in overrides:
        key = o.get_key_element()
        if not o.is_sweep_override():
            choices[key] = [f"{key}={o.get_value_element_as_str()}"]
        elif o.is_discrete_sweep():
            choices[key] = [f"{key}={value}" for value in o.sweep_string_iterator()]
        else:
            raise ConfigError(
                [f"{key}: bench sweeps lists of values (a,b,c) or range(); got {o.input_line}"]
            )
    return [list(job) for job in itertools.product(*choices.values())]


def grid_blocks(params: Mapping[str, Any], grid: Any, arguments: Sequence[str]) -> list[list[str]]:
    """The override lists of a sweep with a ``grid`` (the sweeper's): params, then the
    block, then the command line, so that the command line wins over both (``model=lenet5``
    narrows every block to LeNet-5).  ``grid`` is a list of blocks (each a mapping of key:
    values; the matrix is the union of their products), or a mapping of named axes, each a
    list of such blocks: a block is then one alternative of every axis merged, and the
    matrix crosses the axes (a study's model-dataset pairs by its framework-strategy
    pairs)."""
    if isinstance(grid, Mapping):
        axes = [(str(name), _blocks(f"hydra.sweeper.grid.{name}", alternatives))
                for name, alternatives in grid.items()]  # fmt: skip
        if not axes:
            raise ConfigError(["hydra.sweeper.grid: a list of blocks, or a mapping of axes"])
        merged = [
            {k: v for block in combo for k, v in block.items()}
            for combo in itertools.product(*(blocks for _, blocks in axes))
        ]
    else:
        merged = _blocks("hydra.sweeper.grid", grid)
    return [
        [f"{k}={v}" for k, v in {**params, **block}.items()] + list(arguments) for block in merged
    ]


def _blocks(where: str, items: Any) -> list[dict[str, Any]]:
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise ConfigError([f"{where}: a list of blocks (mappings of key: values); got {items!r}"])
    out = []
    for i, block in enumerate(items, 1):
        if not isinstance(block, Mapping) or not block:
            raise ConfigError([f"{where}: block {i}: a mapping of key: values; got {block!r}"])
        # a YAML list of values is a sweep of them, as "a,b" is
        out.append({str(k): ",".join(map(str, v)) if isinstance(v, list) else v
                    for k, v in block.items()})  # fmt: skip
    return out


def _claim_problems(configs: Sequence[BenchConfig]) -> list[str]:
    """The sweep's claims parse (one list for the whole sweep), or why not."""
    from bench.report import claims

    first = configs[0].claims
    if any(cfg.claims != first for cfg in configs[1:]):
        return ["claims: one sweep checks one list of claims; the jobs' lists differ"]
    try:
        claims.parse(first)
    except claims.ClaimError as exc:
        return [f"claims: {exc}"]
    return []


def _jobs_prefix(labels: list[str], jobs: int) -> str:
    """Which jobs of a sweep of ``jobs`` a problem is said for: none named in a one-job
    sweep, every job's label up to three, then how many more (a problem that every job
    shares, such as a tracking.uri, is said once, not once per job)."""
    if jobs == 1:
        return ""
    if len(labels) == jobs and jobs > 3:
        return f"[all {jobs} jobs] "
    shown = ", ".join(labels[:3])
    more = f" and {len(labels) - 3} more" if len(labels) > 3 else ""
    return f"[{shown}{more}] "


def check_all(
    configs: Sequence[tuple[str, BenchConfig]],
    slurm: bool = False,
    partition: tuple[str, int] | None = None,
) -> None:
    """Check every trial of a sweep (``slurm``: its jobs go to Slurm, to ``partition``: its
    name and node count, where known) in bench's two stages, each once per distinct
    configuration: the rules the configuration alone decides (:mod:`bench.checks.config`),
    then what this machine allows it (:mod:`bench.checks.host`); raise one
    :class:`ConfigError` for all, each problem with the jobs that have it."""
    from bench.checks import config, host

    cfgs = [cfg for _, cfg in configs]
    keys = [config.key(cfg) for cfg in cfgs]
    distinct: dict[str, BenchConfig] = {}
    for key, cfg in zip(keys, cfgs, strict=True):
        distinct.setdefault(key, cfg)
    ruled = {key: config.rules(cfg) for key, cfg in distinct.items()}  # the config stage
    problems: list[str] = host.prepare(cfgs)  # the host stage, from here
    probed = {key: host.probes(cfg, ruled[key]) for key, cfg in distinct.items()}
    per_job: dict[str, list[str]] = {}  # each problem, with the jobs that have it
    for (label, cfg), key in zip(configs, keys, strict=True):
        for problem in [
            *config.said(ruled[key], probed[key]),
            *host.placement(cfg, slurm, partition),
        ]:
            per_job.setdefault(problem, []).append(label)
    problems += [_jobs_prefix(labels, len(configs)) + p for p, labels in per_job.items()]
    if not problems:  # a valid sweep's framework versions get their environments now
        problems += host.environments(cfgs)
    if not slurm:  # a Slurm sweep's trials run on other hosts, which answer for themselves
        problems += host.devices(configs)
    if configs:
        problems += _claim_problems(cfgs) + config.one_store(configs)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
