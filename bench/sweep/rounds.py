"""``repeats=auto``: a sweep's rounds go on until every comparison in it is settled.

After each round from the second on, every comparison the sweep makes is looked at with
:func:`bench.analysis.sequential.look` (its error rate spent over the planned looks, so
looking after every round keeps its promise).  A comparison is a pair of configurations
that differ in one swept key, except the keys that describe the workload rather than a
choice between sides (model, batch, input size, mode, device, data set, seed): framework
against framework, version against version, tuning=default against best, a strategy
against another, and any other key swept on purpose.  A configuration stops once each of
its comparisons is settled (faster, equivalent, or futile: no verdict is reachable in the
rounds left); the others run another round, until ``max_repeats`` rounds or
``repeats_budget_s``.  Runs that are not ``ok`` never count as a sample.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from bench.analysis import pairs, sequential, stats
from bench.core.config import BenchConfig, flatten, to_dict
from bench.core.identity import identity

# The pairs of configurations that differ in one compared key: the report's rule too.
NOT_COMPARED = pairs.NOT_COMPARED
Comparison = pairs.Comparison
Config = pairs.Config


def config_of(job: Sequence[str], unmeasured: Collection[str] = ()) -> Config:
    """A job's configuration: its overrides without the round's ``repeat=`` and without those
    of ``unmeasured`` keys (:func:`unmeasured`)."""
    return tuple(
        o for o in job if not o.startswith("repeat=") and _override_key(o) not in unmeasured
    )


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def unmeasured(configs: Sequence[BenchConfig]) -> frozenset[str]:
    """The config keys no configuration of the sweep has in its identity
    (:func:`bench.core.identity.identity`, the report's grouping): a swept
    ``launcher.kill_grace_s`` or ``tracking.experiment`` changes nothing a run measures, so
    the rounds neither compare along it nor split a configuration by it, as the report
    groups such runs as one configuration.  A group override (``framework=tf``) is the
    group's ``name``."""
    measured = {key for cfg in configs for key in identity(cfg)}
    out: set[str] = set()
    for cfg in configs:
        for key in flatten(to_dict(cfg)):
            if key in measured:
                continue
            out.add(key)
            if key.endswith(".name") and key not in measured:
                out.add(key.removesuffix(".name"))  # the group override's own key
    return frozenset(out)


def round_of(job: Sequence[str]) -> int:
    for o in job:
        if o.startswith("repeat="):
            return int(o.split("=", 1)[1])
    return 0


def comparisons(configs: Sequence[Config], claims: Sequence[Any] = ()) -> list[Comparison]:
    """Every pair of ``configs`` that differ in exactly one compared key, and the pairs that
    a paired claim of the sweep (``claims:``, as bench.report.claims parses them) compares:
    its two sides, everything else equal, where sides may differ in more than one key
    (seed003's ``{framework: torch, distributed: ddp}`` against ``{framework: tf,
    distributed: multiworker}``)."""
    parsed = [(c, pairs.split(c)) for c in configs]
    out = pairs.one_key(configs)
    known = {frozenset((c.a, c.b)) for c in out}
    for c in _claimed(parsed, claims):
        if frozenset((c.a, c.b)) not in known:
            known.add(frozenset((c.a, c.b)))
            out.append(c)
    return out


def _key(override_key: str) -> str:
    """An override's key as a claim's filter names it (``+model.name`` -> ``model``)."""
    key = override_key.lstrip("+~")
    return "model" if key == "model.name" else key


def _has(config: dict[str, str], key: str, allowed: list[str], unset: bool) -> bool:
    """Whether ``config`` (its overrides) has one of ``allowed`` for the claim's ``key``; a key
    no override sets matches where ``unset`` (a ``where`` the defaults may satisfy)."""
    values = [v for k, v in config.items() if _key(k) == key]
    if not values:
        return unset
    if key == "framework":
        values = [v.split("==", 1)[0] for v in values]  # any version of it
    return any(v in allowed for v in values)


def _claimed(parsed: list[tuple[Config, dict[str, str]]], items: Sequence[Any]) -> list[Comparison]:
    """The pairs the sweep's paired claims compare (sides that differ in any keys)."""
    if not items:
        return []
    from bench.report import claims as claims_  # the report's own reading of a claim

    out = []
    for claim in claims_.parse(list(items)):
        paired = claim.kind in ("comparison", "majority", "average")
        if not paired or claim.metric != "ms_per_sample":
            continue  # the rounds measure time per sample
        sides = {*claim.faster, *claim.slower}
        where = [(c, a) for c, a in parsed
                 if all(_has(a, k, v, True) for k, v in claim.where.items())]  # fmt: skip
        fast = [
            (c, a) for c, a in where if all(_has(a, k, v, False) for k, v in claim.faster.items())
        ]
        slow = [
            (c, a) for c, a in where if all(_has(a, k, v, False) for k, v in claim.slower.items())
        ]
        for ca, a in fast:
            rest = {k: v for k, v in a.items() if _key(k) not in sides}
            for cb, b in slow:
                if cb == ca or {k: v for k, v in b.items() if _key(k) not in sides} != rest:
                    continue
                key = next((k for k in a if _key(k) == "framework" and a[k] != b.get(k)), None)
                key = key or next(k for k in a if _key(k) in sides)
                shared = [f"{k}={v}" for k, v in rest.items() if pairs.varies(k, parsed)]
                label = (f"{' '.join(shared) or 'the sweep'}: {claims_.side_name(claim.faster)} "
                         f"vs {claims_.side_name(claim.slower)} (claim: {claim.text})")  # fmt: skip
                out.append(Comparison(ca, cb, key, label))
    return out


@dataclass
class Status:
    comparison: Comparison
    look: sequential.Look | None  # None: a side has fewer than 2 ok runs
    settled: bool
    why: str
    # The last round is done and the comparison has no verdict (futile at the last look,
    # or a side unstable): it ends because max_repeats is reached, not because it settled.
    capped: bool = False
    noisy: bool = False  # a side is unstable by the report's rule (stats.UNSTABLE_CV)


def side_name(comparison: Comparison, side: Config) -> str:
    """A side as the progress lines name it: its value of the key the pair differs in."""
    return pairs.split(side).get(comparison.key, " ".join(side))


def unstable(comparison: Comparison, times: dict[Config, list[float]]) -> list[str]:
    """The sides the report would call unstable (stats.UNSTABLE_CV, the report's own rule),
    e.g. "torch unstable, CV 15%".  Under repeats=auto a noisy side is a reason for more
    rounds, not a verdict: the report applies the rule at the end."""
    out = []
    for side in (comparison.a, comparison.b):
        spread = stats.cv(times.get(side, []))
        if spread >= stats.UNSTABLE_CV:  # nan (fewer than 2 runs) is never unstable
            out.append(f"{side_name(comparison, side)} unstable, CV {100 * spread:.0f}%")
    return out


def settle(
    comparisons_: Sequence[Comparison],
    times: dict[Config, list[float]],
    rounds_done: int,
    max_rounds: int,
    margin: float,
    kept: dict[Comparison, Status] | None = None,
) -> list[Status]:
    """Each comparison's state after ``rounds_done`` rounds; ``times``: each configuration's
    ok runs as time per sample.  ``kept`` (updated here): the comparisons settled at an
    earlier look, each with the status it settled on.  Settled is sticky: a side that runs
    on for its other comparisons does not re-open a pair that has its verdict."""
    looks = max_rounds - 1
    out = []
    for c in comparisons_:
        if kept is not None and c in kept:
            out.append(kept[c])
            continue
        a, b = times.get(c.a, []), times.get(c.b, [])
        if min(len(a), len(b)) < 2:
            failed = rounds_done >= 2 and (not a or not b)  # a failure is a result, not noise
            why = "a side has no ok run" if failed else "fewer than 2 ok runs a side"
            capped = not failed and rounds_done >= max_rounds
            out.append(Status(c, None, failed or capped, why, capped))
            continue
        k = min(max(rounds_done - 1, 1), looks)
        seen = sequential.look(a, b, k, looks, margin)
        settled = seen.kind in sequential.SETTLED
        why = seen.why  # an open one says what more runs would likely do, and its assumption
        if seen.kind == sequential.OPEN:
            why += "; " + sequential.more_text(seen.more, seen.left)
        noisy = unstable(c, times)
        if noisy:  # the report would call the pair "not comparable": more rounds may help
            settled, why = False, f"{'; '.join(noisy)} ({seen.why})"
        capped = rounds_done >= max_rounds and (bool(noisy) or seen.kind == sequential.FUTILE)
        out.append(Status(c, seen, settled, why, bool(capped), bool(noisy)))
    if kept is not None:
        kept.update({s.comparison: s for s in out if s.settled and not s.capped})
    return out


def still_open(configs: Sequence[Config], statuses: Sequence[Status]) -> set[Config]:
    """The configurations with a comparison not settled yet."""
    return {
        side
        for s in statuses
        if not s.settled
        for side in (s.comparison.a, s.comparison.b)
        if side in configs
    }


# An earlier ok run reused by a rerun of the sweep ("skipped") is a sample like a new one:
# re-running a repeats=auto sweep continues from the rounds already in the store.
SAMPLES = ("ok", "skipped")


def times_of(rows: Sequence[tuple[Config, str, float | None]]) -> dict[Config, list[float]]:
    """(configuration, status, samples/s) rows as each configuration's ok times per sample
    (an ok run reused from the store included)."""
    out: dict[Config, list[float]] = {}
    for config, status, rate in rows:
        if status in SAMPLES and rate and rate > 0 and math.isfinite(rate):
            out.setdefault(config, []).append(1.0 / rate)
    return out


def tally(statuses: Sequence[Status]) -> str:
    """How the comparisons stand, e.g. "2 faster, 1 equivalent, 1 open"."""
    kinds: dict[str, int] = {}
    for s in statuses:
        if s.look is None:
            kind = "failed" if s.settled and not s.capped else "open"
        elif s.noisy:
            kind = "unstable"  # the report would withhold a verdict: a side's CV is too high
        else:
            kind = s.look.kind
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no comparison"


def describe(statuses: Sequence[Status], limit: int = 6) -> list[str]:
    """Progress lines: what is still open and why."""
    open_ = [s for s in statuses if not s.settled or s.capped]
    lines = [f"  {s.comparison.label}: {s.why}" for s in open_[:limit]]
    if len(open_) > limit:
        lines.append(f"  ... and {len(open_) - limit} more")
    return lines
