"""``python -m bench``: Hydra composes the matrix; each job is one trial.

Hydra's own launcher iterates the jobs.  :class:`BenchCallback` wraps the whole sweep: it
composes and validates every job's config before the first trial starts, opens the MLflow
parent run, and prints the summary at the end.  The task function :func:`main` turns one
job's config into a typed :class:`BenchConfig` and hands it to the :class:`Sweep`.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from bench.config import BenchConfig, ConfigError, validate
from bench.sweep import Sweep

ConfigStore.instance().store(name="bench_schema", node=BenchConfig)
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


def _job_overrides(config: DictConfig) -> list[list[str]] | None:
    """Every job's overrides, expanded as Hydra's basic sweeper will; None for other sweepers."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not str(config.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    params = config.hydra.sweeper.get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    parsed = OverridesParser.create().parse_overrides(args)
    batches = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for batch in batches for job in batch]


def _sweep_configs(config: DictConfig) -> list[tuple[str, BenchConfig]] | None:
    from hydra.core.global_hydra import GlobalHydra

    jobs = _job_overrides(config)
    if jobs is None:
        return None
    loader = GlobalHydra.instance().config_loader()
    _state["varying"] = _varying(jobs)
    out = []
    for overrides in jobs:
        cfg = to_bench_config(loader.load_sweep_config(config, overrides))
        out.append((trial_label(cfg, overrides), cfg))
    return out


def _check_all(configs: list[tuple[str, BenchConfig]]) -> None:
    problems: list[str] = []
    for label, cfg in configs:
        try:
            validate(cfg)
        except ConfigError as exc:
            prefix = f"[{label}] " if len(configs) > 1 else ""
            problems += [f"{prefix}{p}" for p in exc.problems]
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
        _check_all([(trial_label(cfg, []), cfg)])
        _state["sweep"] = Sweep(cfg, 1, _sweep_name(), list(config.hydra.overrides.task))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        configs = _sweep_configs(config)
        if configs is None:  # another sweeper: each job is checked when it starts
            return
        if not configs:
            _fail(["the sweep has no trials"])
        _check_all(configs)
        _state["sweep"] = Sweep(
            configs[0][1], len(configs), _sweep_name(), list(config.hydra.overrides.task)
        )

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


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(config: DictConfig) -> float | None:
    cfg = to_bench_config(config)
    try:
        validate(cfg)
    except ConfigError as exc:
        _fail(exc.problems)
    hc = HydraConfig.get()
    if _state["sweep"] is None:  # a job started by a launcher in another process
        _state["sweep"] = Sweep(cfg, None, _sweep_name(), list(hc.overrides.task))
    sweep: Sweep = _state["sweep"]
    label = trial_label(cfg, list(hc.overrides.task))
    result = sweep.run(cfg, label, Path(hc.runtime.output_dir))
    if result is None:
        return None
    return result.summary.get("trial_samples_per_s")


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
