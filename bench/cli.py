"""``python -m bench``: Hydra composes the matrix; each job is one trial.

Hydra's own launcher iterates the jobs.  :class:`BenchCallback` wraps the whole sweep: it
composes and validates every job's config before the first trial starts, opens the MLflow
parent run, and prints the summary at the end.  The task function :func:`main` turns one
job's config into a typed :class:`BenchConfig` and hands it to the :class:`Sweep`.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from bench.config import BenchConfig, ConfigError
from bench.launchers.base import on_time_limit_warning
from bench.preflight import validate
from bench.sweep import Sweep

ConfigStore.instance().store(name="bench_schema", node=BenchConfig)


def _job_minutes(timeout_s: float) -> int:
    """Slurm time limit for a trial: timeout_s in minutes, rounded up, plus a minute, so the
    trial's own timeout acts first and Slurm's is the backstop."""
    return math.ceil(float(timeout_s) / 60.0) + 1


OmegaConf.register_new_resolver("bench_minutes", _job_minutes)
try:  # `hydra/launcher=submitit_slurm` gets bench's defaults (bench/slurm.py)
    from bench.slurm import register_launcher_config

    register_launcher_config()
except ImportError:  # pragma: no cover - hydra-submitit-launcher is not installed
    pass
SWEEP_INFO = ".bench-sweep.json"
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")

_state: dict[str, Any] = {"sweep": None, "exit": 0, "varying": []}


def _pairs(overrides: list[str]) -> dict[str, str]:
    out = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep:
            out[key.lstrip("+~")] = value
    return out


def _varying(jobs: list[list[str]]) -> list[str]:
    """The override keys whose value differs between jobs, in first-seen order."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for key, value in _pairs(job).items():
            values.setdefault(key, set()).add(value)
    return [k for k, v in values.items() if len(v) > 1]


def trial_label(cfg: BenchConfig, overrides: list[str]) -> str:
    """A short name for a trial: framework, model and whatever the sweep varies."""
    pairs = _pairs(overrides)
    shown = [f"framework={cfg.framework.name}", f"model={cfg.model.name}"]
    shown += [
        f"{k}={pairs[k]}"
        for k in _state["varying"]
        if k in pairs and k not in ("framework", "model")
    ]
    return " ".join(shown)


def to_bench_config(cfg: DictConfig) -> BenchConfig:
    """The typed config of one job (Hydra's own ``hydra`` node dropped)."""
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.pop("hydra", None)
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, BenchConfig)
    return obj


def _fail(problems: list[str]) -> None:
    print("bench: invalid configuration; no trial was started:", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    sys.exit(2)


def expand_jobs(overrides: list[Any], repeats: int) -> list[list[str]]:
    """Every job's overrides in launch order, from a sweep's parsed overrides.

    The cartesian product, first key varying slowest (as Hydra's basic sweeper makes it),
    run ``repeats`` times in rounds: ``repeat=0`` over every configuration, then
    ``repeat=1`` over them in reverse order, and so on, so that a drift of the machine
    during the sweep falls evenly on every configuration.  The ``bench`` sweeper
    (hydra_plugins/bench_sweeper) launches this list and the validation below checks it.
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    keys = {o.key_or_group.lstrip("+~"): o for o in overrides}
    if "repeats" in keys and keys["repeats"].is_sweep_override():
        raise ConfigError(["repeats: give one number of runs per configuration, not a sweep"])
    if repeats > 1 and "repeat" in keys:
        raise ConfigError(
            [f"repeat: set by the sweeper when repeats > 1 (repeats={repeats}); leave it out"]
        )
    jobs = [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
    if repeats <= 1:
        return jobs
    rounds = []
    for r in range(repeats):
        order = jobs if r % 2 == 0 else jobs[::-1]
        rounds += [[f"repeat={r}", *job] for job in order]
    return rounds


def _job_overrides(config: DictConfig) -> list[list[str]] | None:
    """Every job's overrides, expanded as the basic or the bench sweeper will; None for
    other sweepers."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    target = str(config.hydra.sweeper.get("_target_", ""))
    repeats = int(config.get("repeats", 1))
    if not target.endswith(("BasicSweeper", "BenchSweeper")):
        return None
    if target.endswith("BasicSweeper") and repeats > 1:
        raise ConfigError(
            ["repeats: needs bench's sweeper (hydra/sweeper=bench, the default), not Hydra's basic"]
        )
    params = config.hydra.sweeper.get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    parsed = OverridesParser.create().parse_overrides(args)
    return expand_jobs(parsed, repeats if target.endswith("BenchSweeper") else 1)


def _sweep_configs(config: DictConfig) -> list[tuple[str, BenchConfig]] | None:
    from hydra.core.global_hydra import GlobalHydra

    try:
        jobs = _job_overrides(config)
    except ConfigError as exc:
        _fail(exc.problems)
    if jobs is None:
        return None
    loader = GlobalHydra.instance().config_loader()
    _state["varying"] = _varying(jobs)
    out = []
    for overrides in jobs:
        cfg = to_bench_config(loader.load_sweep_config(config, overrides))
        out.append((trial_label(cfg, overrides), cfg))
    return out


def validated_config(overrides: Sequence[str]) -> BenchConfig | None:
    """The config of the sweep's job with ``overrides``, as composed and validated at the
    sweep's start (for a launcher); None if this process did not start that sweep."""
    sweep = _state["sweep"]
    return None if sweep is None else sweep.configs.get(tuple(overrides))


def _check_all(
    configs: list[tuple[str, BenchConfig]],
    slurm: bool = False,
    partition: tuple[str, int] | None = None,
) -> None:
    """Validate every trial of a run or sweep (``slurm``: its jobs go to Slurm, to
    ``partition``: its name and node count, where known)."""
    problems: list[str] = []
    for label, cfg in configs:
        prefix = f"[{label}] " if len(configs) > 1 else ""
        try:
            validate(cfg)
        except ConfigError as exc:
            problems += [f"{prefix}{p}" for p in exc.problems]
        if cfg.nodes > 1 and not slurm:  # the jobs run here: this must be an allocation
            from bench.distributed.nodes import allocation_problem

            problem = allocation_problem(cfg)
            problems += [f"{prefix}{problem}"] if problem else []
        if slurm and partition is not None and cfg.nodes > partition[1]:
            problems.append(
                f"{prefix}nodes: {cfg.nodes} nodes asked for; Slurm partition "
                f"{partition[0]} has {partition[1]}"
            )
    first = configs[0][1].tracking
    for label, cfg in configs[1:]:
        if (cfg.tracking.uri, cfg.tracking.experiment) != (first.uri, first.experiment):
            problems.append(
                f"[{label}] tracking: one sweep logs to one tracking.uri and experiment"
            )
    if problems:
        _fail(list(dict.fromkeys(problems)))


class BenchCallback(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        cfg = to_bench_config(config)
        if cfg.repeats > 1:
            _fail([f"repeats: {cfg.repeats} runs of a configuration are a sweep; add -m"])
        _check_all([(trial_label(cfg, []), cfg)])
        _state["sweep"] = Sweep(cfg, 1, _sweep_name(), list(config.hydra.overrides.task))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        configs = _sweep_configs(config)
        if configs is None:  # another sweeper: each job is checked when it starts
            if int(config.get("repeats", 1)) > 1:
                _fail(["repeats: needs bench's sweeper (hydra/sweeper=bench, the default)"])
            return
        if not configs:
            _fail(["the sweep has no trials"])
        launcher = str(config.hydra.launcher.get("_target_", ""))
        slurm = "slurm" in launcher.lower()
        partition = None
        if slurm and any(cfg.nodes > 1 for _, cfg in configs):
            from bench.slurm import partition_nodes

            partition = partition_nodes(config.hydra.launcher.get("partition"))
        _check_all(configs, slurm, partition)
        sweep = Sweep(configs[0][1], len(configs), _sweep_name(), list(config.hydra.overrides.task))
        _state["sweep"] = sweep
        if not launcher.endswith("BasicLauncher"):  # jobs run in other processes or hosts
            sweep.remote = True
            info = {"sweep_id": sweep.sweep_id, "total": len(configs), "varying": _state["varying"]}
            directory = Path(str(config.hydra.sweep.dir))
            directory.mkdir(parents=True, exist_ok=True)
            (directory / SWEEP_INFO).write_text(json.dumps(info))
            jobs = _job_overrides(config) or []
            sweep.configs = {tuple(job): cfg for job, (_, cfg) in zip(jobs, configs, strict=True)}

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._end()

    @staticmethod
    def _end() -> None:
        sweep = _state["sweep"]
        if sweep is not None:
            _state["exit"] = sweep.finish()


def _sweep_name() -> str:
    import time

    return "sweep-" + time.strftime("%Y%m%d-%H%M%S")


def task(config: DictConfig) -> float | None:
    """One Hydra job: one trial.  Kept importable by name (``main`` below is Hydra's wrapper
    of it), so launchers that pickle it, like submitit's, send a reference to this module
    rather than a copy of its state."""
    cfg = to_bench_config(config)
    try:
        validate(cfg)
    except ConfigError as exc:
        _fail(exc.problems)
    hc = HydraConfig.get()
    if os.environ.get("SLURM_JOB_ID"):  # Slurm warns with SIGUSR2 before its time limit
        on_time_limit_warning()
    if _state["sweep"] is None:  # a job started by a launcher in another process
        info_path = Path(str(hc.sweep.dir)) / SWEEP_INFO
        if info_path.is_file():  # that sweep's parent run was opened by the submitting host
            info = json.loads(info_path.read_text())
            _state["varying"] = info["varying"]
            _state["sweep"] = Sweep.attach(cfg, info["sweep_id"], info["total"])
        else:
            _state["sweep"] = Sweep(cfg, None, _sweep_name(), list(hc.overrides.task))
    sweep: Sweep = _state["sweep"]
    label = trial_label(cfg, list(hc.overrides.task))
    result = sweep.run(cfg, label, Path(hc.runtime.output_dir))
    if result is None:
        return None
    return result.summary.get("trial_samples_per_s")


main = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")(task)


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run() -> None:
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        main()
    except KeyboardInterrupt:
        sweep = _state["sweep"]
        if sweep is not None:
            sweep.finish(killed=True)
        print(
            "bench: interrupted; the running trial was stopped and recorded as killed",
            file=sys.stderr,
        )
        sys.exit(130)
    sys.exit(_state["exit"])
