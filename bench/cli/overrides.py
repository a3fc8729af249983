"""The command line's overrides checked against the typed config and the conf groups
before Hydra sees them, so that an unknown key or group option gets one line in bench's
words (the nearest key or option, groups included; exit 2), not Hydra's advice
("To append to your config use +key=..."), its search path or its HYDRA_FULL_ERROR line.

Only what the text of an override says is checked here (its key, and a group's plain
options); values are the typed config's and bench's own checks' (:mod:`bench.checks.rules`).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.core import paths
from bench.core.config import BenchConfig
from bench.core.strategy_configs import STRATEGY_CONFIGS

# Hydra's own flags that take the next word as their value (which may hold a '=').
_FLAGS_WITH_VALUE = ("-sc", "--shell-completion")
# Nodes whose fields are free (a mapping): any key below them is the user's.
_MAPPINGS = ("model.config",)
_SPECIAL = "$([{'\"*"  # interpolations, sweep functions, lists: not plain option names


def groups(conf: Path | None = None, extra: Iterable[Path] = ()) -> dict[str, list[str]]:
    """Each config group a command line can pick an option of, with its options: the
    folders of bench's ``conf/`` and of the user's own config folders ``extra`` (their YAML
    files) and the typed strategies (``distributed``, registered in Hydra's ConfigStore by
    :mod:`bench.cli`)."""
    out: dict[str, set[str]] = {}
    for root in [conf or paths.data("conf"), *extra]:
        if not root.is_dir():
            continue
        for d in sorted(root.iterdir()):
            if d.is_dir() and any(d.glob("*.yaml")):
                out.setdefault(d.name, set()).update(p.stem for p in d.glob("*.yaml"))
    out.setdefault("distributed", set()).update(STRATEGY_CONFIGS)
    return {name: sorted(options) for name, options in sorted(out.items())}


def user_config_dirs(args: list[str]) -> list[Path] | None:
    """The user's own config folders a command line adds to Hydra's search path
    (``--config-dir``/``-cd DIR``, ``hydra.searchpath=[file://DIR,...]``), whose groups'
    options are the user's to pick; None where it names one whose options cannot be listed
    here (a ``pkg://`` entry, or ``--config-path``/``-cp``, which replaces bench's conf)."""
    dirs: list[Path] = []
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in ("-cp", "--config-path"):
            return None
        if flag in ("-cd", "--config-dir"):
            given = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            dirs.append(Path(given).expanduser())
        elif flag.lstrip("+") == "hydra.searchpath":
            for entry in value.strip("[]").split(","):
                entry = entry.strip().strip("'\"")
                if not entry:
                    continue
                if not entry.startswith("file://"):
                    return None
                dirs.append(Path(entry.removeprefix("file://")).expanduser())
    return dirs


def _fields(schema: type, prefix: str = "") -> dict[str, Any]:
    """Every key of a config dataclass (dotted), each with the node's dataclass where it
    is one; ``distributed`` holds the fields of every strategy's config."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(schema):
        name = f"{prefix}{f.name}"
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        out[name] = None
        if dataclasses.is_dataclass(default):
            schemas = [type(default)]
            if name == "distributed":
                schemas += list(STRATEGY_CONFIGS.values())
            out[name] = schemas
            for sub in schemas:
                out.update(_fields(sub, f"{name}."))
    return out


def known_keys() -> set[str]:
    """Every key an override may name (dotted), from the typed config."""
    return set(_fields(BenchConfig))


def _nearest(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(word, sorted(set(candidates)), n=n, cutoff=0.6)


def _options(value: str) -> list[str] | None:
    """The plain option names a group's override picks (a comma list sweeps them); None
    where the value is more than names (an interpolation, a sweep function, a list)."""
    if not value or any(c in value for c in _SPECIAL):
        return None
    return [v.strip() for v in value.split(",")]


def _unknown_option(group: str, value: str, options: list[str]) -> str:
    close = _nearest(value, options, n=1)
    hint = f"; did you mean {group}={close[0]}?" if close else ""
    return f"{group}={value}: {group} has no option {value!r}{hint} (options: {', '.join(options)})"


def _unknown_key(
    key: str, values: list[str] | None, keys: set[str], grp: dict[str, list[str]]
) -> str:
    parent, _, leaf = key.rpartition(".")
    siblings = {k.rpartition(".")[2] for k in keys if k.rpartition(".")[0] == parent}
    if not parent:
        siblings |= set(grp)
    close = _nearest(leaf, siblings)
    # A group whose options hold the value is the one meant (modle=lenet5: model=lenet5).
    meant = [c for c in close if not parent and c in grp and values and set(values) <= set(grp[c])]
    where = f"{parent}." if parent else ""
    if meant:
        hint = f"; did you mean {meant[0]}={','.join(values or [])}?"
    elif close:
        named = [f"{where}{c}" + (" (a group)" if not parent and c in grp else "") for c in close]
        hint = f"; did you mean {' or '.join(named)}?"
    else:
        hint = ""
    kind = "no such key" if parent else "no such key or group"
    return f"{key}: {kind}{hint} (see `bench --cfg job` for the keys)"


def check(args: list[str], conf: Path | None = None) -> list[str]:
    """The problems of a command line's overrides that Hydra would report in its own words:
    keys the typed config does not have (with or without ``+``/``++``/``~``) and options a
    group does not have, each naming the nearest key or option.  Hydra's own keys
    (``hydra.*``, ``hydra/...``), flags (``-m``, ``--cfg job``) and a key below a mapping
    (``model.config.*``) are left alone."""
    extra = user_config_dirs(args)
    if extra is None or any(a in _FLAGS_WITH_VALUE for a in args):
        return []
    grp = groups(conf, extra)
    keys = known_keys()
    problems = []
    for arg in args:
        if arg.startswith("-") or ("=" not in arg and not arg.startswith("~")):
            continue
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if not key or key.startswith(("hydra.", "hydra/")) or key == "hydra" or "/" in key:
            continue
        if key.startswith(tuple(f"{m}." for m in _MAPPINGS)):
            continue
        values = _options(value)
        if key in grp:
            if values is None or arg.startswith("~"):
                continue
            bad = [v for v in values if v and v not in grp[key]]
            if bad:
                problems.append(_unknown_option(key, bad[0], grp[key]))
            continue
        if key not in keys:
            problems.append(_unknown_key(key, values, keys, grp))
    return problems
