"""Hydra's composition, remembered across this test process's in-process CLI cases (issue 54).

The config tables (tests/config/) run bench's own entry point hundreds of times in one process,
and Hydra composes the config from conf/ each time: it reads and merges the same YAML files
for the same group choices, ~70% of each case's time.  :func:`install` remembers two steps of
``ConfigLoaderImpl._load_configuration_impl`` by what they depend on:

- the defaults list (``create_defaults_list``), by the primary config's name, the group
  overrides (``model=hf``, ``hydra/job_logging=none``; Hydra's own :class:`Overrides` sorts
  them out of the rest on every call) and the sources' contents;
- the config merged from a defaults list (``_compose_config_from_defaults_list``), by that
  list and the sources' contents;
- the copy of the config repository Hydra makes for each composition
  (``CachingConfigRepository``) shares Hydra's ConfigStore, a process-wide singleton that
  each load copies from, instead of copying all of it (bench's typed schema) each time;
- a YAML file's parsed contents (``FileConfigSource.load_config``), by its path, size and
  modification time: each call still makes its own OmegaConf config of them.

Everything after them runs as before on every call: the value overrides are applied to the
merged config, then bench types it and checks it, so a case's exit status and message are
the ones it had without this.  "The sources' contents" is a stamp taken on every call: each
file of a file source (path, size, modification time), each node of Hydra's ConfigStore (by
identity: a node stored again is a new one), an installed package's configs (by name); a
source of another kind, or one that cannot be stamped, is not remembered.  What is remembered
and handed out are copies, so a caller's changes to a config never reach the next call.  A
composition that fails is not remembered: it fails the same way each time.

``BENCH_TESTS_HYDRA_MEMO=0`` turns it off (tests/unit/test_hydra_memo.py compares the two).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Iterable
from typing import Any

_ENV = "BENCH_TESTS_HYDRA_MEMO"
_DEFAULTS: dict[tuple[Any, ...], Any] = {}  # key -> DefaultsList
_MERGED: dict[tuple[Any, ...], Any] = {}  # key -> DictConfig
_FILES: dict[tuple[Any, ...], tuple[dict[str, Any], Any]] = {}  # file stamp -> (header, data)
_PINNED: dict[int, Any] = {}  # ConfigStore nodes whose id is in a key: kept, so ids stay unique
_ORIGINAL: dict[str, Callable[..., Any]] = {}
# FileConfigSource's load_config by class: Hydra's plugin scan executes its module afresh
# (hydra.core.plugins), so the class Hydra composes with is not the one an import gives.
_FILE_SOURCES: dict[type, Callable[..., Any]] = {}


def _walk_store(tree: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, int]]:
    for name, value in tree.items():
        if isinstance(value, dict):
            yield from _walk_store(value, f"{prefix}{name}/")
        else:
            _PINNED.setdefault(id(value), value)
            yield f"{prefix}{name}", id(value)


def _file_stamp(root: str) -> tuple[tuple[str, int, int], ...]:
    out = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            st = os.stat(path)
            out.append((path, st.st_size, st.st_mtime_ns))
    return tuple(out)


def sources_stamp(sources: Iterable[Any]) -> tuple[Any, ...] | None:
    """What the sources hold, as a comparable value; None where one cannot be stamped."""
    from hydra.core.config_store import ConfigStore

    out: list[Any] = []
    for source in sources:
        scheme = source.scheme()
        if scheme == "file":
            root = source.path.split("://", 1)[-1]
            out.append(("file", source.provider, root, _file_stamp(os.path.realpath(root))))
        elif scheme == "pkg":  # an installed package's own configs (Hydra's)
            out.append(("pkg", source.provider, source.path))
        elif scheme == "structured":
            store = tuple(sorted(_walk_store(ConfigStore.instance().repo)))
            out.append(("structured", source.provider, source.path, store))
        else:
            return None
    return tuple(out)


def _create_defaults_list(
    repo: Any,
    config_name: str | None,
    overrides_list: list[Any],
    prepend_hydra: bool,
    skip_missing: bool,
) -> Any:
    from hydra._internal.defaults_list import Overrides

    original = _ORIGINAL["create_defaults_list"]
    stamp = sources_stamp(repo.get_sources())
    if stamp is None:
        return original(repo, config_name, overrides_list, prepend_hydra, skip_missing)
    # Hydra's own split of the overrides: the group choices shape the defaults list, the
    # value overrides (handed back as given, these very objects) are applied after it.
    fresh = Overrides(repo=repo, overrides_list=overrides_list)
    values = {id(o) for o in fresh.config_overrides}
    groups = tuple(
        o.input_line for o in overrides_list if not o.is_sweep_override() and id(o) not in values
    )
    key = (stamp, config_name, prepend_hydra, skip_missing, groups)
    if key not in _DEFAULTS:
        made = original(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        _DEFAULTS[key] = copy.deepcopy(made)
        return made
    kept = copy.deepcopy(_DEFAULTS[key])
    kept.overrides.config_overrides = fresh.config_overrides
    return dataclasses.replace(kept, config_overrides=fresh.config_overrides)


def _compose_config_from_defaults_list(self: Any, defaults: list[Any], repo: Any) -> Any:
    original = _ORIGINAL["_compose_config_from_defaults_list"]
    stamp = sources_stamp(repo.get_sources())
    if stamp is None:
        return original(self, defaults, repo)
    key = (stamp, tuple(repr(d) for d in defaults))
    if key not in _MERGED:
        made = original(self, defaults, repo)
        _MERGED[key] = copy.deepcopy(made)
        return made
    return copy.deepcopy(_MERGED[key])


def _file_load_config(self: Any, config_path: str) -> Any:
    import yaml
    from hydra.plugins.config_source import ConfigResult
    from omegaconf import OmegaConf
    from omegaconf._utils import get_yaml_loader

    original = _FILE_SOURCES[type(self)]
    full_path = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
    try:
        st = os.stat(full_path)
    except OSError:
        return original(self, config_path)  # Hydra's own error
    key = (full_path, st.st_size, st.st_mtime_ns)
    if key not in _FILES:
        made = original(self, config_path)
        with open(full_path, encoding="utf-8") as f:  # what OmegaConf.load read, as data
            _FILES[key] = (dict(made.header), yaml.load(f, Loader=get_yaml_loader()))
        return made
    header, data = _FILES[key]
    return ConfigResult(
        config=OmegaConf.create() if data is None else OmegaConf.create(copy.deepcopy(data)),
        path=f"{self.scheme()}://{self.path}",
        provider=self.provider,
        header=dict(header),
    )


def _caching_repository_init(self: Any, delegate: Any) -> None:
    """Hydra 1.3's ``CachingConfigRepository.__init__``, the ConfigStore not copied."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    self.delegate = copy.deepcopy(delegate, {id(store): store})
    self.cache = {}


def _file_source_classes(imported: type) -> list[type]:
    """The file source class as imported and as Hydra's plugin scan made it."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource

    scanned = [c for c in Plugins.instance().discover(ConfigSource) if c.scheme() == "file"]
    return list(dict.fromkeys([imported, *scanned]))


def install() -> bool:
    """Remember Hydra's composition steps in this process (once; not where
    ``BENCH_TESTS_HYDRA_MEMO=0``); True where it is installed."""
    if os.environ.get(_ENV, "1") == "0":
        return False
    from hydra._internal import config_loader_impl as loader
    from hydra._internal.config_repository import CachingConfigRepository
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    if not _ORIGINAL:
        _ORIGINAL["CachingConfigRepository.__init__"] = CachingConfigRepository.__init__
        CachingConfigRepository.__init__ = _caching_repository_init  # type: ignore[method-assign]
        for cls in _file_source_classes(FileConfigSource):
            _FILE_SOURCES[cls] = cls.load_config
            cls.load_config = _file_load_config  # type: ignore[method-assign]
        _ORIGINAL["create_defaults_list"] = loader.create_defaults_list
        _ORIGINAL["_compose_config_from_defaults_list"] = (
            loader.ConfigLoaderImpl._compose_config_from_defaults_list
        )
        loader.create_defaults_list = _create_defaults_list  # type: ignore[assignment]
        loader.ConfigLoaderImpl._compose_config_from_defaults_list = (  # type: ignore[method-assign]
            _compose_config_from_defaults_list
        )
    return True


def uninstall() -> None:
    """Hydra's own steps again, and nothing remembered."""
    from hydra._internal import config_loader_impl as loader
    from hydra._internal.config_repository import CachingConfigRepository

    if _ORIGINAL:
        CachingConfigRepository.__init__ = _ORIGINAL.pop("CachingConfigRepository.__init__")  # type: ignore[method-assign]
        for cls, original in _FILE_SOURCES.items():
            cls.load_config = original  # type: ignore[method-assign]
        _FILE_SOURCES.clear()
        loader.create_defaults_list = _ORIGINAL.pop("create_defaults_list")  # type: ignore[assignment]
        loader.ConfigLoaderImpl._compose_config_from_defaults_list = _ORIGINAL.pop(  # type: ignore[method-assign]
            "_compose_config_from_defaults_list"
        )
    _DEFAULTS.clear()
    _MERGED.clear()
    _FILES.clear()
