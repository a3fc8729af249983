"""How a field of the typed configuration (:mod:`bench.core.config`) takes part in a
configuration's identity: its :class:`Identity` rules, which :func:`keyed` attaches to the
field as metadata and :mod:`bench.core.identity` reads.  Imports nothing of bench."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Uses:
    """A key is used only where the (flat) key ``key`` has one of ``values`` (``unless``:
    none of them); ``model.task`` is the model's task (bench.trial.models), a fact of model.name."""

    key: str
    values: tuple[str, ...]
    unless: bool = False


@dataclass(frozen=True)
class Identity:
    """How a config key takes part in a configuration's identity, the one definition of
    which runs measure the same thing (:mod:`bench.core.identity` reads it from the field's
    ``metadata["identity"]``; a sub-config's rules apply to every key inside it).  A key
    without rules is part of the identity, hashed and logged as a param."""

    # False: says where or how a result is recorded or a sweep runs; never hashed.
    measured: bool = True
    # False: not logged as a run param (the whole config is the run's config.json).
    logged: bool = True
    # Part of the identity only under steps_per_epoch=auto (the auto window's settings).
    auto_only: bool = False
    # Added after runs were logged without it: part of the identity only away from its
    # default, so every configuration that leaves it alone keeps its hash.
    new: bool = False
    # Not logged as a param at its default (a run without it had the default).
    quiet_default: bool = False
    # Decides nothing, but was hashed before that was noticed: hashed at its default, so a
    # run with another value keeps the hash (and the group) of the run it measures the same as.
    canonical: bool = False
    # Where this does not hold the key cannot matter: not logged, not part of the identity,
    # hashed at its default (the hash runs had while they still hashed every key).
    used: Uses | None = None
    # A sub-config that was a plain name before it had settings: it hashes as its name alone
    # while none of its other keys is part of the identity, and those count only away from
    # their defaults.
    as_name: bool = False


def keyed(default: Any = dataclasses.MISSING, *, factory: Any = None, **rules: Any) -> Any:
    """A dataclass field with identity rules (:class:`Identity`)."""
    metadata = {"identity": Identity(**rules)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)
