"""``python -m bench``: Hydra composes the matrix; each job is one trial.

This module registers the typed schema and bench's Hydra settings, and holds the task
function and the entry point; it keeps no state.  bench's sweeper
(``hydra_plugins/bench_sweeper``, the default ``hydra/sweeper``) composes and validates every
job before the first trial and owns the sweep (:func:`bench.sweep.driver.run_sweep`); the
task function runs one job's trial (:func:`bench.sweep.driver.run_job`).

Exit status: 0 when every trial is ok (or skipped), 1 when any failed, 2 for bad input (bench's
own checks and Hydra's refusals alike), 130 after Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import math
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bench.core import paths
from bench.core.config import TUNING_GRACE_S, BenchConfig
from bench.core.strategy_configs import STRATEGY_CONFIGS
from bench.sweep.compose import register_resolvers
from bench.sweep.jobs import BenchExit

if TYPE_CHECKING:
    from bench.sweep.session import SweepContext

_STORE = ConfigStore.instance()
_STORE.store(name="bench_schema", node=BenchConfig)
for _name, _strategy in STRATEGY_CONFIGS.items():  # the group `distributed`: typed options
    _STORE.store(group="distributed", name=_name, node=_strategy)


def _job_minutes(timeout_s: float, tuning: str = "default", budget_s: float = 0.0) -> int:
    """Slurm time limit for a trial: its launcher's limit (timeout_s, plus a tuning=best
    search's budget and grace) in minutes, rounded up, plus a minute, so the trial's own
    timeout acts first and Slurm's is the backstop."""
    limit = float(timeout_s)
    if tuning == "best":
        limit += float(budget_s) + TUNING_GRACE_S
    return math.ceil(limit / 60.0) + 1


def _framework_titles() -> str:
    """``bench --help``'s list of frameworks, from their specs (``PyTorch, TensorFlow, ...``)."""
    from bench.core.frameworks import FRAMEWORKS

    return ", ".join(spec.title for spec in FRAMEWORKS.values())


OmegaConf.register_new_resolver("bench_minutes", _job_minutes)
OmegaConf.register_new_resolver("bench_frameworks", _framework_titles)
register_resolvers()  # data.name: ${bench_cifar_if_present:}
try:  # `hydra/launcher=submitit_slurm` gets bench's defaults (bench/launchers/slurm.py)
    from bench.launchers.slurm import register_launcher_config

    register_launcher_config()
except ImportError:  # pragma: no cover - hydra-submitit-launcher is not installed
    pass
CONF_DIR = str(paths.data("conf"))


def task(config: DictConfig, context: SweepContext | None = None) -> object:
    """One Hydra job: one trial.  Kept importable by name (``main`` below is Hydra's wrapper
    of it), so launchers that pickle it, like submitit's, send a reference to this module.
    bench's sweeper passes its sweep's ``context`` (the store, the launchers); a plain run
    gets a new one."""
    from bench.sweep.driver import run_job
    from bench.sweep.session import SweepContext

    hc = HydraConfig.get()
    if str(hc.mode) == "RunMode.MULTIRUN" and "BenchSweeper" not in str(
        hc.sweeper.get("_target_", "")
    ):
        from bench.sweep.jobs import fail

        fail(
            ["hydra/sweeper: bench sweeps with its own sweeper (hydra/sweeper=bench, the default)"]
        )
    multirun = str(hc.mode) == "RunMode.MULTIRUN"
    index = int(hc.job.num) + 1 if multirun else 1
    # The overrides as typed: an interpolation in one is not resolved here.
    overrides = [str(o) for o in OmegaConf.to_container(hc.overrides.task, resolve=False) or []]
    return run_job(config, overrides, Path(hc.runtime.output_dir), index, context or SweepContext())


main = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")(task)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The first Ctrl-C or SIGTERM stops the sweep; any further one is ignored until the
    running trial is stopped and recorded and the parent run is closed (a second Ctrl-C
    must not cut that short and leave a process or an open run behind)."""
    from bench.trial.runtime.processes import note_interrupt

    note_interrupt()  # counted even where Python swallows the raise below (a finaliser)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(
        "bench: stopping (a running trial is stopped and recorded first; further Ctrl-C is "
        "ignored until then)",
        file=sys.stderr,
    )
    raise KeyboardInterrupt


# `bench TOOL ...`: the tools, each also `python -m bench.TOOL`.  A bare word is never a
# Hydra override (those are key=value), so the two cannot be confused.
TOOLS = {
    "report": "bench.cli.report",
    "sync": "bench.cli.sync",
    "images": "bench.cli.images",
    "reproduce": "bench.cli.reproduce",
    "models": "bench.cli.models",
    "parity": "bench.cli.parity",
    "data": "bench.cli.download",
    "setup": "bench.cli.setup",
    "ui": "bench.cli.ui",
}


def _without_credentials(args: list[str]) -> list[str]:
    """The command line with a tracking URI's credentials (``http://USER:PASSWORD@HOST``)
    moved to MLflow's variables before Hydra sees them: Hydra writes the overrides into its
    output folders (``.hydra/overrides.yaml``), and a password must not land there."""
    from bench.tracking.reach import take_credentials

    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") == "tracking.uri":
            quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] else ""
            inner = value[1:-1] if quote and len(value) > 1 else value
            arg = f"{key}={quote}{take_credentials(inner)}{quote}"
        out.append(arg)
    return out


def _credentials_left(args: list[str]) -> str:
    """The one line refusing a command line that still holds a URI's credentials once
    :func:`_without_credentials` took those it understands ('' if none is left): in a
    mapping (``tracking={uri:...}``), a sweep's list, any other key; Hydra would write them
    to its ``.hydra/`` files."""
    from bench.tracking.reach import PASSWORD_VAR, USERNAME_VAR, redact

    left = [arg for arg in args if redact(arg) != arg]
    if not left:
        return ""
    key = left[0].partition("=")[0].lstrip("+~") or "tracking.uri"
    return (
        f"{key}: a URI with credentials ({redact(left[0])[:120]}) is taken only as "
        f"tracking.uri=http(s)://USER:PASSWORD@HOST; otherwise set {USERNAME_VAR} and "
        f"{PASSWORD_VAR} and give the URI without them"
    )


def _config_dirs(args: list[str], conf_dir: str) -> list[Path]:
    """The folders Hydra may read configuration files from for ``args``: bench's own, and
    the user's (``--config-dir``/``-cd``, ``--config-path``/``-cp``, ``file://`` entries of a
    ``hydra.searchpath`` override)."""
    found = [conf_dir]
    for i, arg in enumerate(args):
        for flag in ("--config-dir", "-cd", "--config-path", "-cp"):
            if arg == flag and i + 1 < len(args):
                found.append(args[i + 1])
            elif arg.startswith(f"{flag}="):
                found.append(arg[len(flag) + 1 :])
        key, sep, value = arg.partition("=")
        if sep and key.lstrip("+~") == "hydra.searchpath":
            for entry in value.strip("[]").split(","):
                entry = entry.strip().strip("'\"")
                if entry.startswith("file://"):
                    found.append(entry[len("file://") :])
    return [Path(d) for d in dict.fromkeys(found) if Path(d).is_dir()]


def _credentials_in(value: object, key: str = "") -> tuple[str, str] | None:
    """The first (dotted key, value) of a loaded YAML document whose text holds a URI's
    credentials (an interpolation, ``${oc.env:...}``, is saved as written: none)."""
    from bench.tracking.reach import redact

    if isinstance(value, dict):
        items: list[tuple[object, object]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        text = str(value)
        return (key, text) if redact(text) != text and "${" not in text else None
    for k, v in items:
        found = _credentials_in(v, f"{key}.{k}" if key else str(k))
        if found:
            return found
    return None


def _credentials_in_files(args: list[str], conf_dir: str) -> str:
    """The one line refusing a configuration file that holds a URI's credentials (a preset's
    ``tracking.uri: http://USER:PASSWORD@HOST``, in bench's ``conf/`` or a folder of the
    user's), '' if none does: Hydra would copy it into the job's ``.hydra/config.yaml``
    before bench's code runs.  Every file Hydra could read for this command is looked at,
    chosen by it or not (a password kept in a configuration file is one already)."""
    import yaml

    from bench.tracking.reach import PASSWORD_VAR, USERNAME_VAR, redact

    for folder in _config_dirs(args, conf_dir):
        for path in sorted(folder.rglob("*.yaml")):
            if not path.is_file():  # a FIFO would block the read
                continue
            try:
                text = path.read_text(encoding="utf-8")
                if redact(text) == text:
                    continue  # the common case: no URI with credentials, not even in a comment
                found = _credentials_in(yaml.safe_load(text))
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                continue  # Hydra says what is wrong with it
            if found:
                key, value = found
                return (
                    f"{path}: {key}: a URI with credentials ({redact(value)[:120]}) in a "
                    f"configuration file (Hydra copies it into .hydra/config.yaml); set "
                    f"{USERNAME_VAR} and {PASSWORD_VAR} and give the URI without them"
                )
    return ""


# Keys that hold a mapping of free fields (model.config, model=hf's config class fields):
# ``model.config.rope_theta=...`` adds the field where Hydra's struct mode would want ``++``.
MAPPING_KEYS = ("model.config.",)


def _mapping_overrides(args: list[str]) -> list[str]:
    """The command line with each plain override of a mapping's field (``model.config.X=V``)
    as Hydra's add-or-override (``++model.config.X=V``)."""
    return [f"++{a}" if a.startswith(MAPPING_KEYS) and "=" in a else a for a in args]


def run() -> None:
    """``bench``: the sweep, ``bench plan`` and the tools.  Ctrl-C before a handler of bench's
    own is in place (while the command line is checked) is an interrupt too: one line, 130."""
    from bench.trial.runtime.processes import exit_with

    try:
        _run()
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        exit_with(130)
    except SystemExit as done:  # 130 stays 130 under python -m (exit_with says why)
        exit_with(done.code)


def _run() -> None:
    word = sys.argv[1] if len(sys.argv) > 1 else ""
    if word == "plan":  # a dry run of the sweep the rest of the line describes
        given = [a for a in sys.argv[2:] if a not in ("-m", "--multirun")]
        sys.argv = [sys.argv[0], "-m", *given, "hydra.sweeper.dry_run=true"]
        word = "-m"
    if word in TOOLS:
        import importlib

        try:  # Ctrl-C while a tool's imports load (a second or more) is an interrupt, no traceback
            code = importlib.import_module(TOOLS[word]).main(sys.argv[2:])
        except KeyboardInterrupt:
            print(f"bench {word}: interrupted", file=sys.stderr)
            code = 130
        sys.exit(code)
    if word and word[0] not in "-~" and "=" not in word:  # ~key deletes a key in Hydra
        print(
            f"bench: {word!r} is not a command ({', '.join(['plan', *TOOLS])}) nor an override "
            "(key=value, e.g. model=resnet50); see bench --help",
            file=sys.stderr,
        )
        sys.exit(2)
    from bench.cli.overrides import check

    problems = check(sys.argv[1:])
    if problems:  # in bench's words, before Hydra answers in its own (issue 50)
        for problem in problems:
            print(f"bench: {problem}", file=sys.stderr)
        sys.exit(2)
    given = _without_credentials(sys.argv[1:])
    left = _credentials_left(given) or _credentials_in_files(given, CONF_DIR)
    if left:  # before Hydra writes the command line or a file into its output folders
        print(f"bench: {left}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *_mapping_overrides(given)]
    from bench.cli.hydra_mode import one_composition
    from bench.trial.runtime.processes import interrupts

    heard = interrupts()
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with one_composition(sys.argv[1:], CONF_DIR):
            main()
    except BenchExit as done:  # an interrupt Python swallowed (a finaliser) still ends 130
        sys.exit(130 if interrupts() > heard else done.code)
    except SystemExit as refused:
        if interrupts() > heard:  # an interrupt that code below turned into an error
            print("bench: interrupted", file=sys.stderr)
            sys.exit(130)
        # Hydra refuses bad input (a wrong type, an unknown key or option) with exit 1, the
        # status of a failed trial; bad input is 2 here, whoever found it.
        sys.exit(2 if refused.code == 1 else refused.code)
    except KeyboardInterrupt:  # before any trial started
        print("bench: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception:
        # The handler's KeyboardInterrupt raised inside a library that wraps what it catches
        # (OmegaConf turned one into an AttributeError while a config was being merged):
        # still an interrupt, exit 130; any other error goes on as it is.
        if interrupts() <= heard:
            raise
        print("bench: interrupted", file=sys.stderr)
        sys.exit(130)
