"""A sweep's jobs composed into typed configs (:class:`~bench.core.config.BenchConfig`): Hydra
composes, :func:`to_bench_config` types and checks the keys, :func:`compose_all` does every
job of a sweep, naming each one that cannot be composed.  Validation is
:func:`bench.sweep.jobs.check_all`'s.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from bench.core.config import FRAMEWORKS, BenchConfig, ConfigError
from bench.core.frameworks import own_environment
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
        if isinstance(child, DictConfig) and dataclasses.is_dataclass(sub):
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
    from bench.trial.data import cifar_present

    return cifar_present(int(_root_.num_classes), str(_root_.data.root)) or "synthetic"


def register_resolvers() -> None:
    """The resolvers bench's configs use that need more than the config itself (done on
    import; the CLI calls it too, so that ``--cfg job --resolve`` resolves them)."""
    if not OmegaConf.has_resolver("bench_cifar_if_present"):
        OmegaConf.register_new_resolver("bench_cifar_if_present", _cifar_if_present)


register_resolvers()


def to_bench_config(
    config: DictConfig,
    owned: bool = False,
    check_keys: bool = True,
    to_object: Callable[[DictConfig], Any] = OmegaConf.to_object,
) -> BenchConfig:
    """The typed config of one job (Hydra's own ``hydra`` node dropped); a key the schema
    does not know, or a value that cannot be resolved, is a :class:`ConfigError`.
    ``owned``: ``config`` is a copy of the caller's, that may be changed; ``check_keys``
    False: its keys are known to be the schema's (:class:`Composer` checks each base once);
    ``to_object``: OmegaConf's, or one that gives the same answer (:class:`_Typed`)."""
    if "hydra" in config.keys():  # `in config` raises and catches inside (a tenth of a job)
        config = config if owned else config.copy()
        with open_dict(config):
            config.pop("hydra", None)
    try:
        problems = _unknown_keys(config, BenchConfig) if check_keys else []
        if problems:
            raise ConfigError(problems)
        obj = to_object(config)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or "config"
        raise ConfigError([f"{key}: {str(exc).splitlines()[0]}"]) from exc
    assert isinstance(obj, BenchConfig)
    from bench.tracking import take_credentials
    from bench.trial.distributed.registry import resolve

    # A password in tracking.uri goes to MLflow's credential variables, never further.
    obj.tracking.uri = take_credentials(obj.tracking.uri)

    if obj.framework.name in FRAMEWORKS:
        from bench.core.versions import normalize

        obj.framework.version = normalize(obj.framework.name, obj.framework.version)
        obj.framework.installed = installed_build(obj)
    if obj.model.source == "py":
        obj.model.digest = builder_digest(obj)
    if obj.model.source == "hf":  # a size in the config's spelling onto bench's key
        from bench.trial.models import hf_lm

        problems = hf_lm.canonical(obj.model)
        if problems:
            raise ConfigError(problems)
    return resolve(obj)


def builder_digest(cfg: BenchConfig) -> str:
    """``model.digest`` of a composed config of model=py: its builders' module sources,
    hashed as they are now (bench.trial.models.custom.digest); '' where a module cannot be found
    (validation names it)."""
    from bench.trial.models import custom

    try:
        return custom.digest(cfg.model)
    except Exception:  # noqa: BLE001 - refused, with the reason, by bench.checks.own_models
        return ""


def installed_build(cfg: BenchConfig) -> str:
    """``framework.installed`` of a composed config: for ``framework.version=installed`` the
    version (and CUDA/cuDNN build) that the trial's interpreter has, refused where it has
    none; for the pinned version, the same where the interpreter has another version than
    the pin (a bench installed beside a site's torch), so that its runs never pass for the
    pin's; '' otherwise.  A container runs its image's build: ''."""
    from bench.core import versions
    from bench.envs import interpreters

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
    if own_environment(fw.name):  # its own environment is bench's, made from its own lock
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
    composer = Composer(compose)
    for done, job in enumerate(jobs):
        if progress is not None:
            progress(done, len(jobs))
        given = pairs(job)
        shown = " ".join(f"{k}={given[k]}" for k in keys if k in given)
        prefix = f"[{shown}] " if len(jobs) > 1 else ""
        try:
            cfg = composer(job)
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


def config_groups() -> frozenset[str]:
    """The names of bench's config groups (a folder of conf/, or a group registered in
    Hydra's ConfigStore: ``distributed``, ``hydra``): an override of one picks an option."""
    from hydra.core.config_store import ConfigStore

    from bench.core.paths import data

    folders = {p.name for p in data("conf").iterdir() if p.is_dir()}
    stored = {k for k, v in ConfigStore.instance().repo.items() if isinstance(v, dict)}
    return frozenset(folders | stored)


class Composer:
    """Composes a sweep's jobs as Hydra does, in about a millisecond a job rather than a
    tenth of a second or more.  Hydra composes a job in two parts: the defaults list, which
    only the overrides of config groups decide (``model=resnet50``, ``+experiment=...``,
    ``scale=paper``, ``hydra/...``), then each plain ``key=value`` override applied to the
    result.  So Hydra composes once per distinct set of group overrides, and each job's plain
    overrides are applied with Hydra's own code for that second part (its checks and
    messages included) to that base, copy-on-write: only the top-level nodes the job's
    overrides reach (``optimizer`` for ``optimizer.lr=...``, ``seed``) are copied into the
    base for the job and the base's own nodes put back after it, so the base is never
    changed and never copied whole (a copy of the whole base was two thirds of a job's time);
    the typed config is built from the base's fixed nodes converted once (:class:`_Typed`).
    Overrides of Hydra's own node (``hydra.sweep.dir=...``) decide nothing of a job's
    configuration and are left out; the launcher composes each job in full when it runs it."""

    def __init__(self, compose: Callable[[list[str]], DictConfig]) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.compose = compose
        self.groups = config_groups()
        self.parser = OverridesParser.create()
        self.parsed: dict[str, Any] = {}  # override text -> Hydra's parsed Override
        self.bases: dict[tuple[str, ...], DictConfig] = {}
        self.typed: dict[tuple[str, ...], _Typed] = {}  # each base's fixed nodes, typed
        self.checked: set[tuple[str, ...]] = set()  # bases whose keys are the schema's

    def _parse(self, text: str) -> Any:
        found = self.parsed.get(text)
        if found is None:
            found = _plain_int(text)
            if found is None:
                (found,) = self.parser.parse_overrides([text])
            self.parsed[text] = found
        return found

    def _picks_a_group(self, override: Any) -> bool:
        key = str(override.key_or_group)
        return override.package is not None or "/" in key or key in self.groups

    def base(self, groups: tuple[str, ...]) -> DictConfig:
        """The config Hydra composes from ``groups`` alone, without its ``hydra`` node."""
        found = self.bases.get(groups)
        if found is None:
            found = self.compose(list(groups))
            with open_dict(found):
                found.pop("hydra", None)
            OmegaConf.set_struct(found, True)
            self.bases[groups] = found
        return found

    def __call__(self, job: Sequence[str]) -> BenchConfig:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        parsed = [self._parse(text) for text in job]
        groups = tuple(o.input_line for o in parsed if self._picks_a_group(o))
        plain = [
            o
            for o in parsed
            if not self._picks_a_group(o) and not str(o.key_or_group).startswith("hydra.")
        ]
        config = self.base(groups)
        # Keys the schema lacks come from the groups' options or from ``+key=...``: a base
        # is checked once, a job again only where it adds keys of its own.
        adds = any(o.is_add() for o in plain)
        typed = self.typed.get(groups)
        if typed is None:
            typed = self.typed[groups] = _Typed(config)
        touched = {_top(str(o.key_or_group)) for o in plain}
        with _copied_on_write(config, touched):
            ConfigLoaderImpl._apply_overrides_to_config(plain, config)
            check = adds or groups not in self.checked
            cfg = to_bench_config(config, True, check, lambda c: typed.to_object(c, touched))
        if not adds:
            self.checked.add(groups)
        return cfg


# ``key=INTEGER``, the override a long sweep varies most (``seed=range(0,10000)``), in the
# spelling Hydra's grammar reads as an integer (not ``007``, ``+5`` or ``1_000``, left to it).
_PLAIN_INT = re.compile(
    r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(-?(?:0|[1-9][0-9]*))"
)


def _plain_int(text: str) -> Any:
    """Hydra's parsed override of ``text`` where it is ``key=INTEGER``, without Hydra's
    parser (a millisecond or more an override), else None; equal to the parser's answer."""
    found = _PLAIN_INT.fullmatch(text)
    if found is None:
        return None
    from hydra.core.override_parser.types import Override, OverrideType, ValueType

    return Override(
        type=OverrideType.CHANGE,
        key_or_group=found.group(1),
        value_type=ValueType.ELEMENT,
        _value=int(found.group(2)),
        input_line=text,
    )


class _Typed:
    """``OmegaConf.to_object`` of a base's jobs, each top-level node of the base with no
    interpolation anywhere under it converted once, not once a job: its typed value is the
    same in every job that does not override it (a copy of it is handed out, the config's
    objects being mutable).  The other nodes (an interpolation's value may depend on the
    job, ``data.name: ${bench_cifar_if_present:}``) and those the job's overrides reach are
    converted for the job, as OmegaConf's own conversion does (``DictConfig._to_object``);
    anything unusual (a missing value, a failed conversion) is left to OmegaConf itself,
    for its answer and its message."""

    def __init__(self, base: DictConfig) -> None:
        from omegaconf._utils import get_structured_config_init_field_names, is_structured_config

        self.fixed: dict[str, Any] = {}
        kind = base._metadata.object_type
        self.kind = kind if is_structured_config(kind) else None
        if self.kind is None:
            return
        self.init = set(get_structured_config_init_field_names(self.kind))
        for key, node in base.__dict__["_content"].items():
            if _fixed(node):
                try:
                    self.fixed[key] = (
                        OmegaConf.to_object(node) if _container(node) else node._value()
                    )
                except OmegaConfBaseException:
                    continue

    def to_object(self, config: DictConfig, touched: set[str]) -> Any:
        if self.kind is None or config._metadata.object_type is not self.kind:
            return OmegaConf.to_object(config)
        init: dict[str, Any] = {}
        late: dict[str, Any] = {}
        try:
            for key, node in config.__dict__["_content"].items():
                if key in self.fixed and key not in touched:
                    value = copy.deepcopy(self.fixed[key])
                else:
                    node = node._dereference_node()
                    if node._is_missing():
                        return OmegaConf.to_object(config)
                    value = OmegaConf.to_object(node) if _container(node) else node._value()
                (init if key in self.init else late)[key] = value
            found = self.kind(**init)
        except Exception:  # noqa: BLE001 - OmegaConf's own conversion says what is wrong
            return OmegaConf.to_object(config)
        for key, value in late.items():
            setattr(found, key, value)
        return found


def _container(node: Any) -> bool:
    from omegaconf import Container

    return isinstance(node, Container)


def _fixed(node: Any) -> bool:
    """Whether nothing under ``node`` is an interpolation or missing: its value is its own."""
    if node._is_interpolation() or node._is_missing():
        return False
    content = node.__dict__.get("_content") if _container(node) else None
    children = content.values() if isinstance(content, dict) else content
    return all(_fixed(c) for c in children) if isinstance(children, Iterable) else True


def _top(key: str) -> str:
    """The top-level key of an override's dotted key (``optimizer`` of ``optimizer.lr``)."""
    return re.split(r"[.\[]", key, maxsplit=1)[0]


@contextlib.contextmanager
def _copied_on_write(config: DictConfig, keys: set[str]) -> Iterator[None]:
    """Within the block, ``config``'s top-level nodes under ``keys`` are copies of its own
    (which keep ``config`` as their parent, so interpolations resolve against the job's
    values); after it, whatever the block did (set, added, deleted a key, or failed half
    way), ``config`` holds exactly its own nodes again, in their order."""
    content = config.__dict__["_content"]
    own = dict(content)
    for key in keys & own.keys():
        content[key] = copy.deepcopy(own[key])  # the copy's parent is ``config``, as its own's
    try:
        yield
    finally:
        content.clear()
        content.update(own)
