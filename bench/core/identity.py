"""A configuration's identity: the one definition of which runs measure the same thing.

The typed config says, field by field, how each key takes part (:class:`bench.core.fields.Identity`
in the field's metadata); this module reads those rules and nothing else decides it.  From
the identity come:

- :func:`config_hash`, the hash a trial run is tagged with and a sweep skips by: two
  configurations have one hash exactly when their identities are equal;
- :func:`logged_params`, the keys a trial run logs as MLflow params (the ones that can
  matter for it; the whole config is the run's ``config.json``);
- :func:`identity` of a run's params, by which the report groups runs (less the axes it
  compares along): runs logged with every key, before the params were pruned, have the
  identity of new runs of the same configuration.

The hash keeps the form it had before the rules were written down, so every configuration
keeps its hash: keys that decide nothing are hashed at their default (``canonical``, and
keys a run cannot use, such as ``launcher.docker.*`` under ``launcher=process``), and a
sub-config that was a plain name (``distributed``, ``tuning``) hashes as that name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bench.core.config import AUTO, BenchConfig, flatten, to_dict
from bench.core.fields import Identity, Uses
from bench.core.strategy_configs import STRATEGY_CONFIGS, DistributedConfig
from bench.core.zoo import task_of

# Params a run logs beside its config, never part of a configuration: a figure
# (num_parameters), a tuning=best search's pick (tuned.*), Hydra's own keys (older runs).
RUN_PARAMS = ("num_parameters",)
RUN_PARAM_PREFIXES = ("tuned.", "hydra.")

_KEEP, _CANONICAL, _DROP = "keep", "canonical", "drop"


@dataclass(frozen=True)
class _Key:
    """A flat config key: where it sits in the nested config, its rules (merged with those
    of the sub-configs above it), every ``used`` condition on the way, and its default."""

    path: tuple[str, ...]
    rules: Identity
    conditions: tuple[Uses, ...]
    default: Any


def _key_of(path: tuple[str, ...], rules: list[Identity], default: Any) -> _Key:
    merged = Identity(
        measured=all(r.measured for r in rules),
        logged=all(r.logged for r in rules),
        auto_only=any(r.auto_only for r in rules),
        new=any(r.new for r in rules),
        quiet_default=any(r.quiet_default for r in rules),
        canonical=any(r.canonical for r in rules),
    )
    return _Key(path, merged, tuple(r.used for r in rules if r.used is not None), default)


def _rules(f: dataclasses.Field[Any]) -> Identity:
    rules = f.metadata.get("identity", Identity())
    assert isinstance(rules, Identity)
    return rules


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[operator]


def _walk(cls: type, path: tuple[str, ...], above: list[Identity]) -> Iterator[_Key]:
    """Every leaf key of a config dataclass, with the rules of its field and those above."""
    for f in dataclasses.fields(cls):
        rules = [*above, _rules(f)]
        if above and above[-1].as_name and f.name != "name":
            rules.append(Identity(new=True))  # a setting of what was a plain name
        default = _default(f)
        if isinstance(default, DistributedConfig):
            # flattens to ``distributed``, its name; its settings depend on the strategy
            yield _key_of((*path, f.name, "name"), rules, default.name)
        elif dataclasses.is_dataclass(default):
            yield from _walk(type(default), (*path, f.name), rules)
        else:
            yield _key_of((*path, f.name), rules, default)


def _flat_name(path: tuple[str, ...]) -> str:
    return "distributed" if path == ("distributed", "name") else ".".join(path)


_SCHEMA = {_flat_name(k.path): k for k in _walk(BenchConfig, (), [])}
# Keys that hold a mapping (model.config): each of its fields flattens to a key of its own,
# part of the identity wherever it is set (an empty mapping flattens to nothing, so every
# configuration without one keeps its hash).
_MAPPINGS = tuple(f"{name}." for name, k in _SCHEMA.items() if isinstance(k.default, dict))
# The sub-configs that hash as their name alone (Identity.as_name).
_AS_NAME = tuple(f.name for f in dataclasses.fields(BenchConfig) if _rules(f).as_name)
_STRATEGY_RULES = [_rules(f) for f in dataclasses.fields(BenchConfig) if f.name == "distributed"]


def _text(value: Any) -> str:
    """A value as comparable text: a config's own values and a run's logged params alike."""
    return str(value).lower()


def _key(key: str, facts: Mapping[str, Any]) -> _Key | None:
    """A flat key's place and rules; None for a key the schema does not have."""
    if key in _SCHEMA:
        return _SCHEMA[key]
    if key.startswith(_MAPPINGS):  # a field of a mapping (model.config.<field>)
        mapping = next(m for m in _MAPPINGS if key.startswith(m))
        spec = _SCHEMA[mapping[:-1]]
        return _Key((*spec.path, *key[len(mapping) :].split(".")), spec.rules, spec.conditions,
                    None)  # fmt: skip
    prefix, _, setting = key.partition(".")
    if prefix != "distributed":
        return None
    strategy = STRATEGY_CONFIGS.get(str(facts.get("distributed")), DistributedConfig)()
    defaults = strategy.settings()
    if setting not in defaults:
        return None  # not a setting of the run's strategy: kept as it is
    return _key_of(("distributed", setting), [*_STRATEGY_RULES, Identity(new=True)],
                   defaults[setting])  # fmt: skip


def _facts(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The keys the rules read: the flat config, and ``model.task`` from the model registry
    (a model of your own declares it: :func:`bench.core.zoo.task_of`)."""
    name, source = str(flat.get("model.name", "")), str(flat.get("model.source", "bench"))
    task = task_of(name, source, str(flat.get("model.task") or ""))
    return {**flat, "model.task": task}


def _used(conditions: tuple[Uses, ...], facts: Mapping[str, Any]) -> bool:
    return all(
        (_text(facts.get(c.key, "")) in {_text(v) for v in c.values}) != c.unless
        for c in conditions
    )


def _role(key: str, spec: _Key | None, value: Any, facts: Mapping[str, Any]) -> str:
    """How a key of a flat config (``spec``: its :func:`_key`) takes part in its identity:
    kept, hashed at its default (canonical) or left out."""
    if spec is None:  # not a config key: a param of the run's own, or of an older schema
        return _DROP if key in RUN_PARAMS or key.startswith(RUN_PARAM_PREFIXES) else _KEEP
    rules = spec.rules
    if not rules.measured:
        return _DROP
    if rules.auto_only and _text(facts.get("steps_per_epoch")) != _text(AUTO):
        return _DROP
    if rules.canonical:
        return _CANONICAL
    if not _used(spec.conditions, facts):
        # hashed at its default, as before it had a condition; a key added later is left
        # out, as runs before it were hashed without it
        return _DROP if rules.new else _CANONICAL
    if rules.new and _text(value) == _text(spec.default):
        return _DROP
    return _KEEP


def _flat(source: BenchConfig | Mapping[str, Any]) -> Mapping[str, Any]:
    return flatten(to_dict(source)) if isinstance(source, BenchConfig) else source


def identity(source: BenchConfig | Mapping[str, Any]) -> dict[str, str]:
    """What decides what a trial measures, as text: of a config, or of a flat config or a
    run's logged params (with every key, or only those it logged).  The repeat index and the
    framework are part of it; the report leaves out the axes it compares along."""
    flat = _flat(source)
    facts = _facts(flat)
    return {k: str(v) for k, v in flat.items() if _role(k, _key(k, facts), v, facts) == _KEEP}


def config_hash(cfg: BenchConfig) -> str:
    """A stable hash of a configuration's :func:`identity` (16 hex digits)."""
    flat = flatten(to_dict(cfg))
    facts = _facts(flat)
    data: dict[str, Any] = {}
    for key, value in flat.items():
        spec = _key(key, facts)
        role = _role(key, spec, value, facts)
        if role == _DROP or spec is None:
            continue
        *parents, last = spec.path
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value if role == _KEEP else spec.default
    for name in _AS_NAME:
        if set(data.get(name, {})) == {"name"}:
            data[name] = data[name]["name"]
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def logged_params(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a flat config that a trial run logs as params: all but those that cannot
    matter for it (:attr:`Identity.used`), those never logged, and those at a default that
    a run without them had (:attr:`Identity.quiet_default`)."""
    facts = _facts(flat)
    out = {}
    for key, value in flat.items():
        spec = _key(key, facts)
        if spec is not None:
            if not spec.rules.logged or not _used(spec.conditions, facts):
                continue
            if spec.rules.quiet_default and _text(value) == _text(spec.default):
                continue
        out[key] = value
    return out
