"""A sweep's jobs composed into typed configs (:class:`~bench.config.BenchConfig`): Hydra
composes, :func:`to_bench_config` types and checks the keys, :func:`compose_all` does every
job of a sweep, naming each one that cannot be composed.  Validation is
:func:`bench.sweep.jobs.check_all`'s.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from bench.config import FRAMEWORKS, BenchConfig, ConfigError
from bench.sweep.jobs import pairs, trial_label, varying


def _unknown_keys(node: Any, schema: type, prefix: str = "") -> list[str]:
    """Keys in a composed config that the typed schema does not have (``+key=value`` adds
    them past Hydra's own check), each with the closest known key."""
    known = {f.name: f for f in dataclasses.fields(schema)}
    problems = []
    for key in node:
        name = f"{prefix}{key}"
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            problems.append(f"{name}: no such key{hint} (see `python -m bench --cfg job`)")
            continue
        child = node[key]
        sub = known[key].default_factory
        if isinstance(child, DictConfig) and sub is not dataclasses.MISSING:
            typed = OmegaConf.get_type(child)  # a group's option may be a subclass (a strategy)
            schema_of = (
                typed if isinstance(typed, type) and dataclasses.is_dataclass(typed) else None
            )
            problems += _unknown_keys(child, schema_of or type(sub()), f"{name}.")
    return problems


def _cifar_if_present(*, _root_: DictConfig) -> str:
    """``data.name: ${bench_cifar_if_present:}``: CIFAR-10 or -100 (by the job's
    num_classes) where its archive is under data.root, else synthetic batches of its shape;
    resolved per job, so the run logs what it trained on."""
    from bench.data import cifar_present

    return cifar_present(int(_root_.num_classes), str(_root_.data.root)) or "synthetic"


def register_resolvers() -> None:
    """The resolvers bench's configs use that need more than the config itself (done on
    import; the CLI calls it too, so that ``--cfg job --resolve`` resolves them)."""
    if not OmegaConf.has_resolver("bench_cifar_if_present"):
        OmegaConf.register_new_resolver("bench_cifar_if_present", _cifar_if_present)


register_resolvers()


def to_bench_config(config: DictConfig) -> BenchConfig:
    """The typed config of one job (Hydra's own ``hydra`` node dropped); a key the schema
    does not know, or a value that cannot be resolved, is a :class:`ConfigError`."""
    config = config.copy()
    with open_dict(config):
        config.pop("hydra", None)
    try:
        problems = _unknown_keys(config, BenchConfig)
        if problems:
            raise ConfigError(problems)
        obj = OmegaConf.to_object(config)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or "config"
        raise ConfigError([f"{key}: {str(exc).splitlines()[0]}"]) from exc
    assert isinstance(obj, BenchConfig)
    from bench.distributed.registry import resolve

    if obj.framework.name in FRAMEWORKS:
        from bench.versions import normalize

        obj.framework.version = normalize(obj.framework.name, obj.framework.version)
        obj.framework.installed = installed_build(obj)
    return resolve(obj)


def installed_build(cfg: BenchConfig) -> str:
    """``framework.installed`` of a composed config: for ``framework.version=installed`` the
    version (and CUDA/cuDNN build) that the trial's interpreter has, refused where it has
    none; for the pinned version, the same where the interpreter has another version than
    the pin (a bench installed beside a site's torch), so that its runs never pass for the
    pin's; '' otherwise.  A container runs its image's build: ''."""
    from bench import interpreters, versions

    fw = cfg.framework
    if cfg.launcher.name == "docker" or versions.own_release(fw.version):
        return ""
    if fw.version == versions.INSTALLED:
        found = interpreters.installed(fw.name)
        if not found:
            module = versions.MODULES[fw.name]
            raise ConfigError([
                f"framework.version: installed, but {module} is not importable by "
                f"{interpreters.python_for(fw.name)} (the interpreter that runs {fw.name} "
                "trials); install it there, or leave framework.version empty for the pinned "
                "version"
            ])  # fmt: skip
        return versions.build_text(found)
    if fw.name == "mxnet":  # its own environment is bench's, made from its own lock
        return ""
    found = interpreters.installed(fw.name)
    pin = versions.locked(fw.name)
    if found and pin and versions.base(found["version"]) != pin:
        return versions.build_text(found)
    return ""


def compose_all(
    compose: Callable[[list[str]], DictConfig],
    jobs: Sequence[Sequence[str]],
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[str, list[str], BenchConfig]]:
    """(label, overrides, config) of every job; every job that cannot be composed is named.
    ``progress(done, total)`` is told how many are composed, before each job and at the end."""
    keys = varying(jobs)
    out: list[tuple[str, list[str], BenchConfig]] = []
    problems: list[str] = []
    seen: dict[tuple[str, ...], BenchConfig] = {}
    for done, job in enumerate(jobs):
        if progress is not None:
            progress(done, len(jobs))
        given = pairs(job)
        shown = " ".join(f"{k}={given[k]}" for k in keys if k in given)
        prefix = f"[{shown}] " if len(jobs) > 1 else ""
        try:
            cfg = _composed(compose, job, seen)
        except ConfigError as exc:
            problems += [f"{prefix}{p}" for p in exc.problems]
            continue
        except Exception as exc:  # noqa: BLE001 - Hydra's composition errors, named per job
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            problems.append(f"{prefix}{first}")
            continue
        out.append((trial_label(cfg, job, keys), list(job), cfg))
    if progress is not None:
        progress(len(jobs), len(jobs))
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    return out


def _composed(
    compose: Callable[[list[str]], DictConfig],
    job: Sequence[str],
    seen: dict[tuple[str, ...], BenchConfig],
) -> BenchConfig:
    """``job`` composed and typed.  The jobs of a sweep's repeats differ only in the
    ``repeat=K`` that :func:`expand` puts first, so each configuration is composed once and
    its other repeats are copies with their own ``repeat`` (composing is 0.1-0.3 s a job:
    minutes for a study's repeats), unless the config interpolates ``repeat``."""
    if not job or not job[0].startswith("repeat="):
        return to_bench_config(compose(list(job)))
    key = tuple(job[1:])
    if key in seen:
        cfg = copy.deepcopy(seen[key])
        cfg.repeat = int(job[0].partition("=")[2])
        return cfg
    config = compose(list(job))
    cfg = to_bench_config(config)
    if not _interpolates(config, "repeat"):
        seen[key] = copy.deepcopy(cfg)  # later checks may set fields of the one handed out
    return cfg


def _interpolates(config: DictConfig, name: str) -> bool:
    """Whether a value of ``config`` (Hydra's own node aside) is an interpolation that
    mentions ``name``."""
    tree = OmegaConf.to_container(config, resolve=False)
    if isinstance(tree, dict):
        tree.pop("hydra", None)
    return any("${" in text and name in text for text in _strings(tree))


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node
