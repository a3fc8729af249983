"""Claims as data: statements about runs (a study's findings, or a user's expectations),
each checked against the runs its filter selects with the statistics of the report's
verdicts.  A claim file is a YAML list (``python -m bench.report --claims FILE``):

```yaml
- claim: PyTorch trains ResNet-18 faster than TensorFlow   # shown as written
  source: "seed001, section VI-A, Fig. 1: 'PyTorch outperformed ...'"  # where it comes from
  kind: comparison         # comparison | majority | trend | independence
  faster: torch            # comparison: the side claimed faster (lower metric) ...
  slower: tf               # ... and the other: a framework name, or a mapping of key: value
  #   faster: {framework: mxnet, distributed: kvstore_sync}   (sides that differ in more
  #   slower: {framework: tf, distributed: multiworker}        than the framework)
  by_at_least_pct: 10      # optional: faster by at least this much
  where: {model: resnet18, mode: train}
- claim: Inference time per sample falls as the batch grows
  kind: trend
  metric: ms_per_sample
  against: batch_size
  direction: decreases     # or increases
  up_to: 256               # optional: only up to this value of `against`
  where: {mode: infer}
- claim: GPU power does not depend on the batch size
  kind: independence
  metric: power_w
  against: batch_size
  margin_pct: 10           # the change, smallest to largest `against`, that counts as none
- claim: TensorFlow infers faster than PyTorch on the CPU, with a few exceptions
  kind: majority           # a comparison (its fields) that holds in most configurations
  faster: tf
  slower: torch
  per: model               # optional: checked on each model's runs apart, each must hold
  caveat: the study ran on one CPU core      # shown beside the verdict: the claim's scope
  requires: {device: cpu}  # what the stated cause needs of a run (bench.report.claim_requires)
- claim: TensorFlow is slower than PyTorch by average 2.65X
  kind: average            # a comparison of the geometric mean, over the configurations,
  faster: torch            #   of each one's ratio (an average the study states)
  slower: tf
  over: {model: [lenet5, alexnet, resnet18, resnet50]}   # optional: the average the study
  #   took spans these; runs that lack one read "not measured here" (not a part's average)
- claim: PyTorch outperforms MXNet on LeNet-5 irrespective of the training mode
  kind: comparison
  faster: torch            # a side listing several values (both MXNet modes) compares
  slower: {framework: mxnet, distributed: [kvstore_sync, kvstore_async]}  # each with the other
- claim: Data parallelism reduces the time per epoch
  kind: comparison
  faster: {distributed: [mirrored, ddp], workers: 2}
  slower: {distributed: none, workers: 1}
  batch: global            # pair runs by the batch a step trains on (2 x 32 against 64);
  #   the default, worker, pairs them by batch_size, each worker's (2 x 64 against 64)
```

``where`` keys are ``framework``, ``model``, ``mode``, ``device``, ``batch_size`` or any
logged param (``image_size``, ``distributed``, ``optimizer.name``...); a value may be a
list (any of).  ``metric`` is ``ms_per_sample`` (the default: lower is faster) or any
metric a run logged (per-epoch ones averaged over the epochs).  Only ok runs count.

Each claim gets one verdict: ``holds here``, ``contradicted here`` (with the measured
effect and interval), ``inconclusive`` (and why: too few runs, an unstable or not
comparable side, an interval that straddles the claim), or ``not measured here`` (no run
matches, or none has the metric: a GPU metric on CPU runs).  A comparison or a trend is
checked per configuration (everything else equal) and holds only where it holds in every
one; it is contradicted where any one contradicts it (a trend only in configurations with
3 or more values of ``against``: the others can show none).  A ``majority`` claim ("with a
few exceptions") is a comparison that holds where it holds in more than half of the
configurations, is contradicted where half or more contradict it, and lists the exceptions.
An ``average`` claim ("by average 2.65X") is a comparison of one number: the geometric mean
over the configurations of each one's ratio (slower / faster), with a 95% bootstrap interval
(each configuration's runs resampled); it holds where the interval lies above 1 (or above
``by_at_least_pct``), is contradicted where it lies below.  A side that lists several values
of a key (``distributed: [kvstore_sync, kvstore_async]``) compares each value with the other
side apart: "irrespective of the mode" holds only where it holds for each.  ``per: KEY``
checks the claim on each value of KEY apart (PyTorch faster "when running ResNet-18,
ResNet-152 and MobileNetV2": a majority for each model); it holds where each holds.
A claim is checked only on the runs that have what its ``requires:`` names; where none has
it, the claim reads ``not measured here`` with what the runs lack.  Paired runs must have equal
parameter counts (the same architecture), except in a comparison whose sides name the model
(VGG-16 against ResNet-50): each side must then be one architecture, and the effect names
both counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.analysis import stats
from bench.core.strategy_configs import replicas
from bench.report.claim_requires import describe as describe_requires
from bench.report.claim_requires import parse as parse_requires
from bench.report.claim_requires import unmet
from bench.report.sections.common import sample
from bench.report.trials import Trial, base_framework, group

HOLDS, CONTRADICTED = "holds here", "contradicted here"
INCONCLUSIVE, NOT_MEASURED = "inconclusive", "not measured here"
KINDS = ("comparison", "majority", "trend", "independence", "average")
BATCHES = ("worker", "global")  # Claim.batch
_FIELDS = {
    "comparison": {"faster", "slower", "by_at_least_pct", "batch"},
    "majority": {"faster", "slower", "by_at_least_pct", "batch"},
    "average": {"faster", "slower", "by_at_least_pct", "over", "batch"},
    "trend": {"against", "direction", "up_to"},
    "independence": {"against", "margin_pct"},
}
_COMMON = {"claim", "source", "kind", "where", "metric", "caveat", "requires", "per"}
_PAIRED = ("comparison", "majority", "average")  # the kinds that compare two sides
# The configuration keys a per-configuration result is labelled with.
_LABEL_KEYS = (
    "model.name", "mode", "batch_size", "image_size", "num_classes", "data.name", "distributed",
    "workers", "global_batch",
)  # fmt: skip


class ClaimError(ValueError):
    """A claim that cannot be checked as written; the message names it and the field."""


@dataclass
class Claim:
    text: str
    kind: str
    source: str = ""
    where: dict[str, list[str]] = field(default_factory=dict)
    metric: str = "ms_per_sample"
    faster: dict[str, list[str]] = field(default_factory=dict)  # the side's filter
    slower: dict[str, list[str]] = field(default_factory=dict)
    by_at_least_pct: float = 0.0
    against: str = ""
    direction: str = ""
    up_to: float = math.inf
    margin_pct: float = 0.0
    caveat: str = ""  # the claim's scope against the study's, shown beside its verdict
    requires: dict[str, Any] = field(default_factory=dict)  # bench.report.claim_requires
    per: str = ""  # checked on each value of this key apart (each must hold)
    over: dict[str, list[str]] = field(default_factory=dict)  # what an average must span
    # Which batch paired runs share: "worker" (each worker's, batch_size as logged: a
    # strategy that adds workers adds samples, weak scaling) or "global" (the batch every
    # step trains on, split between the workers: strong scaling, batch_size x workers, or
    # batch_size where each worker sees the whole batch: model parallelism).
    batch: str = "worker"

    @property
    def scope(self) -> str:
        """The caveat and the requirements, as the report's caveat column shows them."""
        needs = describe_requires(self.requires)
        return " ".join(p for p in (self.caveat, f"({needs})" if needs else "") if p)


@dataclass
class Checked:
    claim: Claim
    verdict: str
    effect: str  # the measured effect and its interval, or why there is none
    runs: int  # ok runs the claim's filter selected


def parse(items: Any) -> list[Claim]:
    """The claims of a YAML list (already loaded); :class:`ClaimError` names the first one
    that cannot be checked, and why."""
    if not isinstance(items, list):
        raise ClaimError("claims: a YAML list of claims, each a mapping")
    return [_parse_one(i, item) for i, item in enumerate(items, 1)]


def _parse_one(i: int, item: Any) -> Claim:
    name = f"claim {i}"
    if not isinstance(item, dict):
        raise ClaimError(f"{name}: a mapping with kind, where, ...; got {item!r}")
    name = f"claim {i} ({item.get('claim', item.get('kind', '?'))!s})"
    kind = str(item.get("kind", ""))
    if kind not in KINDS:
        raise ClaimError(f"{name}: kind: one of {', '.join(KINDS)}; got {kind!r}")
    unknown = set(item) - _COMMON - _FIELDS[kind]
    if unknown:
        raise ClaimError(
            f"{name}: {', '.join(sorted(unknown))}: not a field of a {kind} claim (its "
            f"fields: {', '.join(sorted(_COMMON | _FIELDS[kind]))})"
        )
    where = item.get("where") or {}
    if not isinstance(where, dict):
        raise ClaimError(f"{name}: where: a mapping of key: value (or [values]); got {where!r}")
    claim = Claim(
        text=str(item.get("claim") or f"{kind} claim {i}"),
        kind=kind,
        source=str(item.get("source", "")),
        where=_filter(where),
        metric=str(item.get("metric", "ms_per_sample")),
        caveat=" ".join(str(item.get("caveat", "")).split()),
        per=str(item.get("per") or ""),
        over=_filter(item.get("over") or {}),
        batch=str(item.get("batch", "worker")),
    )
    if claim.batch not in BATCHES:
        raise ClaimError(f"{name}: batch: one of {', '.join(BATCHES)}; got {claim.batch!r}")
    try:
        claim.requires = parse_requires(item.get("requires") or {})
        if kind in _PAIRED:
            claim.faster, claim.slower = _side(item["faster"]), _side(item["slower"])
            claim.by_at_least_pct = float(item.get("by_at_least_pct", 0.0))
            if claim.faster == claim.slower or claim.by_at_least_pct < 0:
                raise ClaimError(
                    f"{name}: faster and slower: two different sides (a framework, or a "
                    "mapping of key: value); by_at_least_pct >= 0"
                )
        else:
            claim.against = str(item["against"])
        if kind == "trend":
            claim.direction = str(item["direction"])
            if claim.direction not in ("decreases", "increases"):
                raise ClaimError(f"{name}: direction: decreases or increases")
            claim.up_to = float(item.get("up_to", math.inf))
        if kind == "independence":
            claim.margin_pct = float(item["margin_pct"])
            if not claim.margin_pct > 0:
                raise ClaimError(f"{name}: margin_pct: above 0")
    except KeyError as missing:
        raise ClaimError(f"{name}: {missing.args[0]}: missing (a {kind} claim needs it)") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ClaimError):
            raise
        raise ClaimError(f"{name}: {exc}") from None
    return claim


def _filter(mapping: dict[Any, Any]) -> dict[str, list[str]]:
    return {
        str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in mapping.items()
    }


def _side(value: Any) -> dict[str, list[str]]:
    """A comparison's side: a framework name, or a mapping of key: value (or [values])."""
    if isinstance(value, dict):
        if not value:
            raise TypeError("a side's mapping names at least one key")
        return _filter(value)
    if isinstance(value, list | tuple) or value is None:
        raise TypeError(f"a side is a framework name or a mapping; got {value!r}")
    return {"framework": [str(value)]}


def side_name(side: dict[str, list[str]]) -> str:
    """A side as the claim's text shows it: ``torch``, or ``tf distributed=ps_async``."""
    shown = ["|".join(side["framework"])] if "framework" in side else []
    shown += [f"{k}={'|'.join(v)}" for k, v in side.items() if k != "framework"]
    return " ".join(shown)


def load(path: Path) -> list[Claim]:
    import yaml

    try:
        return parse(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as exc:
        raise ClaimError(f"claims: {path} is not YAML: {exc}") from None


# --- checking ---------------------------------------------------------------------------------


# `where` keys that name a trial's own fields; any other key is a logged param.
_SHORT = ("framework", "model", "mode", "device", "batch_size")


def _value(t: Trial, key: str) -> str:
    if key == "framework":  # any version of it (framework.version names one)
        return base_framework(t.framework)
    return str(getattr(t, key)) if key in _SHORT else t.param(key)


def _in(t: Trial, where: dict[str, list[str]]) -> bool:
    return all(_value(t, k) in allowed for k, allowed in where.items())


def _matches(claim: Claim, t: Trial) -> bool:
    return (
        t.ok
        and _in(t, claim.where)
        and (claim.kind not in _PAIRED or _in(t, claim.faster) or _in(t, claim.slower))
    )


def _metric(claim: Claim) -> Callable[[Trial], float]:
    if claim.metric == "ms_per_sample":
        return lambda t: t.ms_per_sample
    return lambda t: t.mean_over_epochs(claim.metric)


def selected(claim: Claim, trials: Sequence[Trial]) -> list[Trial]:
    """The ok runs the claim's filter selects that have its metric."""
    value = _metric(claim)
    return [t for t in trials if _matches(claim, t) and math.isfinite(value(t))]


def check(claim: Claim, trials: Sequence[Trial]) -> Checked:
    matching = [t for t in trials if _matches(claim, t)]
    # What the claim's stated cause needs comes first: a run without it says nothing.
    lacking = {t.record.run_id: unmet(claim.requires, t) for t in matching}
    needs = "the claim needs " + "; ".join(dict.fromkeys(r for w in lacking.values() for r in w))
    left_out = sum(bool(why) for why in lacking.values())
    meeting = [t for t in matching if not lacking[t.record.run_id]]
    if matching and not meeting:
        return Checked(claim, NOT_MEASURED, needs, 0)
    value = _metric(claim)
    chosen = [t for t in meeting if math.isfinite(value(t))]
    if not chosen:
        why = (
            f"no ok run matches {claim.where or 'the claim'}"
            if not matching
            else f"none of the {len(meeting)} matching runs has {claim.metric}"
        )
        return Checked(claim, NOT_MEASURED, f"{needs} ({why})" if left_out else why, 0)
    verdict, effect = _per(claim, chosen)
    if left_out and verdict == NOT_MEASURED:  # a side, or every pair, lacks the cause
        return Checked(claim, NOT_MEASURED, f"{needs} ({effect})", 0)
    if left_out:
        effect += f" ({left_out} run(s) without what the claim requires left out)"
    return Checked(claim, verdict, effect, len(chosen))


def _per(claim: Claim, trials: list[Trial]) -> tuple[str, str]:
    """The claim's verdict, on each value of ``per`` apart where it names a key."""
    kind = {"comparison": _comparison, "majority": _comparison, "average": _average,
            "trend": _trend, "independence": _independence}[claim.kind]  # fmt: skip
    if not claim.per:
        return kind(claim, trials)
    parts = [(*kind(claim, members), f"{claim.per}={value}") for value, members
             in sorted(group(trials, lambda t: _value(t, claim.per)).items())]  # fmt: skip
    if all(v == NOT_MEASURED for v, _, _ in parts):
        return NOT_MEASURED, "; ".join(f"{label}: {effect}" for _, effect, label in parts)
    return _combine([p for p in parts if p[0] != NOT_MEASURED])


def _combine(parts: list[tuple[str, str, str]]) -> tuple[str, str]:
    """Per-configuration (verdict, effect, configuration label) -> one verdict."""
    if not parts:
        return NOT_MEASURED, "no configuration has both sides"
    against = [p for p in parts if p[0] == CONTRADICTED]
    if against:
        return CONTRADICTED, "; ".join(f"{label}: {effect}" for _, effect, label in against)
    if all(p[0] == HOLDS for p in parts):
        return HOLDS, "; ".join(f"{label}: {effect}" for _, effect, label in parts)
    return INCONCLUSIVE, "; ".join(f"{label}: {effect}" for v, effect, label in parts
                                   if v != HOLDS)  # fmt: skip


def _label(config: tuple[tuple[str, str], ...], claim: Claim, *skip: str) -> str:
    shown = [
        f"{k}={v}" for k, v in config if k in _LABEL_KEYS and k not in claim.where and k not in skip
    ]
    return " ".join(shown) or "one configuration"


def _comparison(claim: Claim, trials: list[Trial]) -> tuple[str, str]:
    value = _metric(claim)
    threshold = 1 + claim.by_at_least_pct / 100
    parts = []
    # Sides naming the model compare two architectures on purpose: their parameter counts
    # differ by design (each side must still be one architecture).
    across = "model" in claim.faster or "model" in claim.slower
    for fw, config, a, b, fast, slow in _paired(claim, trials):
        v = stats.compare(
            sample(fast, a, value), sample(slow, b, value), across_architectures=across
        )
        label = f"{fw} {_label(config, claim)}".strip()
        if _several(claim):
            label = f"{label} {fast} vs {slow}".strip()
        measured = (
            f"{slow}/{fast} {claim.metric} = {v.ratio:.3f} "
            f"[95% CI {v.ci_low:.3f}, {v.ci_high:.3f}], {len(a)} vs {len(b)} runs"
        )
        if across:
            measured += f" ({_parameters(a)} vs {_parameters(b)} parameters)"
        if v.kind in (stats.NOT_COMPARABLE, stats.NOT_TESTED):
            parts.append((INCONCLUSIVE, f"{measured}; {v.text}", label))
        elif v.ci_low > threshold and (v.kind == stats.FASTER and v.faster == fast):
            parts.append((HOLDS, measured, label))
        elif v.ci_high < threshold:
            parts.append((CONTRADICTED, measured, label))
        elif v.kind == stats.EQUIVALENT:  # shown to be no difference that matters
            parts.append((CONTRADICTED, f"{measured}; {v.text.split(' (')[0]}", label))
        else:
            parts.append((INCONCLUSIVE, f"{measured}; the interval straddles "
                          f"{threshold:.2f}", label))  # fmt: skip
    if not parts:
        return NOT_MEASURED, _unpaired(claim, trials)
    return _majority(parts) if claim.kind == "majority" else _combine(parts)


def _unpaired(claim: Claim, trials: list[Trial]) -> str:
    """Why a comparison found no configuration with both sides."""
    fast, slow = side_name(claim.faster), side_name(claim.slower)
    n_fast = sum(_in(t, claim.faster) for t in trials)
    n_slow = sum(_in(t, claim.slower) for t in trials)
    missing = [f"{n} with {claim.metric}" for n, k in ((fast, n_fast), (slow, n_slow)) if not k]
    if missing:
        return f"no ok run of {' nor '.join(missing)}"
    return f"{n_fast} run(s) of {fast} and {n_slow} of {slow}, but no configuration has both"


def _several(claim: Claim) -> bool:
    """Whether a side lists several values of a key (each compared apart)."""
    return any(len(v) > 1 for side in (claim.faster, claim.slower) for k, v in side.items())


def _variants(side: dict[str, list[str]], trials: list[Trial]) -> dict[str, list[Trial]]:
    """A side's runs, split by the values of each key the side lists several of; each part
    named as the side with its one value (``mxnet distributed=kvstore_async``)."""
    keys = [k for k, v in side.items() if len(v) > 1]

    def name(t: Trial) -> str:
        return side_name({k: ([_value(t, k)] if k in keys else v) for k, v in side.items()})

    return group([t for t in trials if _in(t, side)], name)


def _paired(
    claim: Claim, trials: list[Trial]
) -> list[tuple[str, Any, list[Trial], list[Trial], str, str]]:
    """Each configuration's runs of the two sides (everything but the sides' keys equal):
    (framework, configuration, faster side's runs, slower side's runs, their names), one
    entry for each pair of the sides' parts where a side lists several values of a key."""
    # The sides' keys may differ between paired runs; everything else must be equal.
    sides = {"model.name" if k == "model" else k for k in (*claim.faster, *claim.slower)}
    if "distributed" in sides:  # parameter servers are a layout of some strategies only
        sides.add("ps")
    # A framework's data cache is part of its side where each part of a side has one
    # setting (study 003: TensorFlow's tf.data cache on, PyTorch and MXNet without one).
    if "framework" in sides and all(
        len({t.param("data.cache") for t in part}) == 1
        for side in (claim.faster, claim.slower)
        for part in _variants(side, trials).values()
    ):
        sides.add("data.cache")
    # Sides that do not name the framework compare runs of one framework with each other.
    same = "framework" not in sides
    if claim.batch == "global":  # paired by the batch a step trains on, not each worker's
        sides |= {"batch_size", "workers"}

    def pairing(t: Trial) -> tuple[str, Any]:
        config = t.config_without(*sides)
        if claim.batch == "global":
            config = (*config, ("global_batch", str(global_batch(t))))
        return (t.framework if same else "", config)

    out = []
    for (fw, config), members in sorted(group(trials, pairing).items()):
        for fast, a in sorted(_variants(claim.faster, members).items()):
            for slow, b in sorted(_variants(claim.slower, members).items()):
                if fast != slow:
                    out.append((fw, config, a, b, fast, slow))
    return out


def global_batch(t: Trial) -> int:
    """The samples one step of ``t`` trains on: batch_size from each of its replicas
    (:func:`bench.core.strategy_configs.replicas`)."""
    count = replicas(t.param("distributed", "none"), _int(t, "workers"), _int(t, "nodes"))
    return int(t.param("batch_size", "0") or 0) * count


def _int(t: Trial, key: str) -> int:
    return int(t.param(key, "1") or 1)


def _average(claim: Claim, trials: list[Trial]) -> tuple[str, str]:
    """The geometric mean, over the configurations, of each one's ratio slower/faster, and
    its bootstrap interval; one verdict for each pair of the sides' parts, combined."""
    value = _metric(claim)
    threshold = 1 + claim.by_at_least_pct / 100
    per_pair: dict[tuple[str, str], list[tuple[list[float], list[float]]]] = {}
    spanned: dict[str, set[str]] = {k: set() for k in claim.over}
    short = 0
    for _fw, _config, a, b, fast, slow in _paired(claim, trials):
        if min(len(a), len(b)) < 2:
            short += 1
            continue
        per_pair.setdefault((fast, slow), []).append(([value(t) for t in a],
                                                      [value(t) for t in b]))  # fmt: skip
        for key in claim.over:
            spanned[key] |= {_value(t, key) for t in (*a, *b)}
    lacking = {k: [v for v in want if v not in spanned[k]] for k, want in claim.over.items()}
    if per_pair and any(lacking.values()):
        said = "; ".join(f"{k}={'/'.join(v)}" for k, v in lacking.items() if v)
        had = "; ".join(f"{k}={'/'.join(sorted(s))}" for k, s in spanned.items())
        return NOT_MEASURED, f"the study's average spans {said} too (these runs: {had})"
    if not per_pair:
        if short:
            return INCONCLUSIVE, f"{short} configuration(s) with both sides, none 2 runs a side"
        return NOT_MEASURED, _unpaired(claim, trials)
    parts = []
    for (fast, slow), configs in sorted(per_pair.items()):
        ratio, low, high = geometric_mean_ratio(configs)
        measured = (
            f"{slow}/{fast} {claim.metric}, geometric mean over {len(configs)} "
            f"configuration(s) = {ratio:.3f} [95% CI {low:.3f}, {high:.3f}], "
            f"{sum(len(a) + len(b) for a, b in configs)} runs"
        )
        label = f"{fast} vs {slow}" if _several(claim) else "the average"
        if low > threshold:
            parts.append((HOLDS, measured, label))
        elif high < threshold:
            parts.append((CONTRADICTED, measured, label))
        else:
            parts.append((INCONCLUSIVE, f"{measured}; the interval straddles {threshold:.2f}",
                          label))  # fmt: skip
    return _combine(parts)


def geometric_mean_ratio(
    configs: Sequence[tuple[Sequence[float], Sequence[float]]],
    resamples: int = 4000,
    seed: int = stats.SEED,
) -> tuple[float, float, float]:
    """exp(mean over configurations of log(mean(b) / mean(a))) and its 95% percentile
    bootstrap interval, each configuration's two sides resampled on their own (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    logs = np.zeros(resamples)
    point = 0.0
    for a, b in configs:
        xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        point += math.log(xb.mean() / xa.mean())
        ma = xa[rng.integers(0, len(xa), (resamples, len(xa)))].mean(axis=1)
        mb = xb[rng.integers(0, len(xb), (resamples, len(xb)))].mean(axis=1)
        logs += np.log(mb / ma)
    k = len(configs)
    low, high = np.percentile(logs / k, [100 * stats.ALPHA / 2, 100 * (1 - stats.ALPHA / 2)])
    return math.exp(point / k), float(math.exp(low)), float(math.exp(high))


def _majority(parts: list[tuple[str, str, str]]) -> tuple[str, str]:
    """Per-configuration results -> one verdict for "in most configurations": holds where
    more than half hold, contradicted where half or more contradict; the exceptions listed."""
    held = sum(p[0] == HOLDS for p in parts)
    against = sum(p[0] == CONTRADICTED for p in parts)
    exceptions = "; ".join(f"{label}: {v}, {effect}" for v, effect, label in parts if v != HOLDS)
    counted = (
        f"holds in {held} of {len(parts)} configurations, contradicted in {against}; "
        f"the exceptions: {exceptions or 'none'}"
    )
    if 2 * held > len(parts):
        return HOLDS, counted
    if 2 * against >= len(parts):
        return CONTRADICTED, counted
    return INCONCLUSIVE, counted


def _parameters(trials: list[Trial]) -> str:
    counts = sorted({t.num_parameters for t in trials if t.num_parameters})
    return "/".join(f"{n / 1e6:.1f}M" for n in counts) or "?"


def _x(t: Trial, claim: Claim) -> float:
    try:
        return float(_value(t, claim.against))
    except ValueError:
        return math.nan


def _series(claim: Claim, trials: list[Trial]) -> dict[Any, list[Trial]]:
    """The runs per line of the claim: one framework and configuration, ``against`` free."""
    usable = [t for t in trials if math.isfinite(_x(t, claim)) and _x(t, claim) <= claim.up_to]
    key = claim.against if claim.against != "model" else "model.name"
    return group(usable, lambda t: (t.framework, t.config_without(key)))


def _trend(claim: Claim, trials: list[Trial]) -> tuple[str, str]:
    value = _metric(claim)
    parts = []
    short = 0  # lines with fewer than 3 values of `against`: no evidence either way
    for (framework, config), members in sorted(_series(claim, trials).items()):
        if len({_x(t, claim) for t in members}) < 3:
            short += 1
            continue
        label = f"{framework} {_label(config, claim, claim.against)}".strip()
        found = stats.trend([_x(t, claim) for t in members], [value(t) for t in members],
                            claim.metric, claim.against)  # fmt: skip
        if found.direction == claim.direction:
            parts.append((HOLDS, found.text, label))
        elif found.direction:
            parts.append((CONTRADICTED, found.text, label))
        else:
            parts.append((INCONCLUSIVE, found.text, label))
    if not parts:
        why = f"no configuration has 3 or more values of {claim.against} (of {short})"
        return INCONCLUSIVE, why
    return _combine(parts)


def _independence(claim: Claim, trials: list[Trial]) -> tuple[str, str]:
    value = _metric(claim)
    margin = claim.margin_pct / 100
    parts = []
    for (framework, config), members in sorted(_series(claim, trials).items()):
        label = f"{framework} {_label(config, claim, claim.against)}".strip()
        xs = sorted({_x(t, claim) for t in members})
        if len(xs) < 2:
            parts.append((INCONCLUSIVE, f"one {claim.against} value only", label))
            continue
        low = [value(t) for t in members if _x(t, claim) == xs[0]]
        high = [value(t) for t in members if _x(t, claim) == xs[-1]]
        if min(len(low), len(high)) < 2:
            parts.append((INCONCLUSIVE, f"{len(low)} vs {len(high)} runs at {claim.against} "
                          f"{xs[0]:g} and {xs[-1]:g}; use repeats >= 4", label))  # fmt: skip
            continue
        ratio, lo, hi = stats.bootstrap_ratio(low, high)
        measured = (
            f"{claim.metric} at {claim.against} {xs[-1]:g} / at {xs[0]:g} = {ratio:.3f} "
            f"[95% CI {lo:.3f}, {hi:.3f}], margin +/-{claim.margin_pct:g}%"
        )
        if 1 - margin <= lo and hi <= 1 + margin:
            parts.append((HOLDS, measured, label))
        elif hi < 1 - margin or lo > 1 + margin:
            parts.append((CONTRADICTED, measured, label))
        else:
            parts.append((INCONCLUSIVE, f"{measured}: the interval leaves the margin", label))
    return _combine(parts)
