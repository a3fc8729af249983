"""What a claim's stated cause needs of a run, as data: a claim's ``requires:`` mapping.

A study often says why a finding holds: data loading (real files, read and cached), a
network between nodes, a GPU, a framework version's kernels.  A run without that cause
cannot confirm or contradict the finding, so :func:`unmet` names what a run lacks and the
claim is checked on the runs that have it; where none has, the claim reads "not measured
here" with the reason (:mod:`bench.report.claims`).

```yaml
requires:
  data: real                      # trained on a data set's files, not synthetic batches
  data_cache: {tf: true, torch: false, mxnet: false}   # data.cache per framework
  nodes: 2                        # across at least this many nodes (a network, not loopback)
  device: cuda                    # ran on this device (cuda or cpu)
  versions: {tf: "<2.9"}          # the framework's version in this range (PEP 440)
```

A key not listed here, or a value that cannot be checked, is a :class:`ValueError` naming it
(the claim parser turns it into a refusal naming the claim, before any trial runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from bench.core.frameworks import FRAMEWORKS as SPECS
from bench.core.frameworks import NAMES
from bench.report.trials import Trial, base_framework

FRAMEWORKS = NAMES
# Where a run's framework version is recorded when its config left it empty (the pinned one).
_VERSION_TAGS = {name: spec.tag for name, spec in SPECS.items()}
_SYNTHETIC = ("synthetic", "")


def _frameworks(key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"{key}: a mapping of framework: value; got {value!r}")
    unknown = [str(k) for k in value if str(k) not in FRAMEWORKS]
    if unknown:
        raise ValueError(f"{key}: {', '.join(unknown)}: not a framework ({', '.join(FRAMEWORKS)})")
    return {str(k): v for k, v in value.items()}


def _data(value: Any) -> str:
    if value != "real":
        raise ValueError(f"data: real (the only value bench can check); got {value!r}")
    return "real"


def _data_cache(value: Any) -> dict[str, bool]:
    cached = _frameworks("data_cache", value)
    if not all(isinstance(v, bool) for v in cached.values()):
        raise ValueError(f"data_cache: each framework true or false; got {value!r}")
    return cached


def _nodes(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"nodes: a whole number >= 2 (a network between nodes); got {value!r}")
    return value


def _device(value: Any) -> str:
    if value not in ("cuda", "cpu"):
        raise ValueError(f"device: cuda or cpu; got {value!r}")
    return str(value)


def _versions(value: Any) -> dict[str, SpecifierSet]:
    out = {}
    for framework, spec in _frameworks("versions", value).items():
        try:
            out[framework] = SpecifierSet(str(spec))
        except InvalidSpecifier:
            raise ValueError(
                f"versions: {framework}: {spec!r} is not a version range (e.g. '<2.9', "
                "'>=1.7,<1.8')"
            ) from None
    return out


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "data": _data,
    "data_cache": _data_cache,
    "nodes": _nodes,
    "device": _device,
    "versions": _versions,
}
KEYS = tuple(_PARSERS)


def parse(value: Any) -> dict[str, Any]:
    """A claim's ``requires:`` mapping, checked; ValueError names the key and what it takes."""
    if not isinstance(value, Mapping):
        raise ValueError(f"requires: a mapping of {', '.join(KEYS)}; got {value!r}")
    out = {}
    for key, given in value.items():
        if str(key) not in _PARSERS:
            raise ValueError(
                f"requires: {key}: not a requirement bench can check (one of {', '.join(KEYS)})"
            )
        out[str(key)] = _PARSERS[str(key)](given)
    return out


def version_of(t: Trial) -> str:
    """The framework version a run trained with ('' where it was not recorded)."""
    if "==" in t.framework:
        return t.framework.split("==", 1)[1]
    tag = _VERSION_TAGS.get(base_framework(t.framework), "")
    return t.record.tags.get(f"bench.{tag}", "") if tag else ""


def unmet(requires: Mapping[str, Any], t: Trial) -> list[str]:
    """What run ``t`` lacks of ``requires`` (parsed), each said in a few words; [] if none."""
    out = []
    framework = base_framework(t.framework)
    if "data" in requires and t.param("data.name", "synthetic") in _SYNTHETIC:
        out.append("real data (these runs trained on synthetic batches: no loading)")
    cached = requires.get("data_cache", {})
    if framework in cached:
        has = t.param("data.cache", "false").lower() == "true"
        if has != cached[framework]:
            out.append(
                f"data.cache={str(cached[framework]).lower()} for {framework}, as the study "
                f"had (these runs: {str(has).lower()})"
            )
    if "nodes" in requires:
        nodes = int(float(t.param("nodes", "1") or 1))
        if nodes < requires["nodes"]:
            out.append(
                f"{requires['nodes']} or more nodes, a network (these runs: {nodes} node, loopback)"
            )
    if "device" in requires and t.device != requires["device"]:
        out.append(f"device {requires['device']} (these runs: {t.device})")
    spec = requires.get("versions", {}).get(framework)
    if spec is not None:
        version = version_of(t)
        try:
            inside = bool(version) and Version(version) in spec
        except InvalidVersion:
            inside = False
        if not inside:
            out.append(f"{framework} {spec} (these runs: {version or 'version not recorded'})")
    return out


def describe(requires: Mapping[str, Any]) -> str:
    """The requirements in a few words, for the report's caveat column."""
    words = []
    if "data" in requires:
        words.append("real data")
    if requires.get("data_cache"):
        words.append(
            "data.cache "
            + ", ".join(f"{k}={str(v).lower()}" for k, v in requires["data_cache"].items())
        )
    if "nodes" in requires:
        words.append(f">= {requires['nodes']} nodes")
    if "device" in requires:
        words.append(f"device {requires['device']}")
    for framework, spec in requires.get("versions", {}).items():
        words.append(f"{framework} {spec}")
    return "needs " + "; ".join(words) if words else ""
