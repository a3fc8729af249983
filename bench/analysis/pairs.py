"""Which configurations of a sweep are the two sides of a comparison: the pairs that differ in
exactly one compared key.  One rule for the rounds of ``repeats=auto``
(:func:`bench.sweep.rounds.comparisons`, which adds a claim's sides) and for the report's
verdicts on those pairs (:mod:`bench.report.sections.other_pairs`).

A configuration is a tuple of ``key=value`` strings (a job's overrides, or a run's
identity).  Keys that describe the workload rather than a choice between sides (model,
batch, input size, mode, device, data set, seed) are never the key a pair differs in: the
report does not pit ResNet-50 against VGG-16.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NOT_COMPARED = (
    "model", "model.name", "batch_size", "image_size", "mode", "device", "data", "data.name",
    "num_classes", "seed", "+experiment", "scale",
)  # fmt: skip

Config = tuple[str, ...]


@dataclass(frozen=True)
class Comparison:
    a: Config
    b: Config
    key: str  # the override they differ in
    label: str  # e.g. "model=lenet5: framework tf vs torch"


def split(config: Config) -> dict[str, str]:
    """A configuration's ``key=value`` strings as a mapping."""
    return dict(o.split("=", 1) for o in config if "=" in o)


def varies(key: str, parsed: Sequence[tuple[Config, dict[str, str]]]) -> bool:
    """Whether ``key`` varies among ``parsed`` (a key every configuration shares says nothing)."""
    return len({p.get(key) for _, p in parsed}) > 1


def one_key(configs: Sequence[Config]) -> list[Comparison]:
    """Every pair of ``configs`` that differ in exactly one compared key (not NOT_COMPARED),
    in the order of ``configs``.  Configurations are bucketed by the key they may differ in
    and everything else, so a sweep of thousands of configurations costs no more than
    going over each once per key."""
    parsed = [(c, split(c)) for c in configs]
    buckets: dict[tuple[str, tuple[tuple[str, str], ...]], list[int]] = {}
    for i, (_, p) in enumerate(parsed):
        for key in p:
            if key.lstrip("+~") not in NOT_COMPARED:
                rest = tuple(sorted((k, v) for k, v in p.items() if k != key))
                buckets.setdefault((key, rest), []).append(i)
    found = sorted(
        (i, j, key)
        for (key, _), members in buckets.items()
        for x, i in enumerate(members)
        for j in members[x + 1 :]
        if parsed[i][1][key] != parsed[j][1][key]
    )
    keys = {k for _, p in parsed for k in p}
    varying = {k for k in keys if varies(k, parsed)}
    out = []
    for i, j, key in found:
        (ca, a), (cb, b) = parsed[i], parsed[j]
        shared = [f"{k}={v}" for k, v in a.items() if k != key and k in varying]
        where = " ".join(shared) or "the sweep"
        out.append(Comparison(ca, cb, key, f"{where}: {key} {a[key]} vs {b[key]}"))
    return out
