"""Framework versions as a sweep axis (``framework.version``): which versions bench accepts
and why it refuses the others.  Imports no framework.

The empty version is the pinned one (``requirements.lock``, the images' constraints): the
host's own environment runs it.  Any other version runs in an environment of its own, made
on first use from a generated, hashed lock (:mod:`bench.environments`).  A version must be
a release on the package index with a wheel for this Python and platform, inside the
supported range (:data:`SUPPORTED`): the last three minor series of torch and TensorFlow;
MXNet has one release, 1.9.1.  The package index is asked once a day (its answer is
cached); where it cannot be reached, a version whose environment is not cached is refused
with that reason.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.paths import PACKAGE

REPO = PACKAGE.parent  # a source checkout: requirements.lock is here

# The minor series bench supports per framework (a version outside is refused): the last
# three of torch and TensorFlow with wheels for Python 3.11 on the package index.
SUPPORTED = {"torch": ("2.13", "2.14", "2.15"), "tf": ("2.19", "2.20", "2.21"), "mxnet": ("1.9",)}
# The module whose __version__ a trial checks, per framework.
MODULES = {"torch": "torch", "tf": "tensorflow", "mxnet": "mxnet"}
DEFAULT_INDEX = "https://pypi.org/pypi"  # BENCH_PACKAGE_INDEX points elsewhere
_DAY_S = 86400.0


def package(framework: str, gpu: bool = False) -> str:
    """The package a framework version installs from: TensorFlow's CPU build where the host
    has no GPU (the same code, a tenth of the download)."""
    if framework == "tf":
        return "tensorflow" if gpu else "tensorflow-cpu"
    return {"torch": "torch", "mxnet": "mxnet"}[framework]


def pinned(framework: str) -> str:
    """The version the host's environment has (what ``requirements.lock`` pins); MXNet's
    environment has 1.9.1, its last release."""
    if framework == "mxnet":
        return "1.9.1"
    from importlib import metadata

    for name in {"torch": ("torch",), "tf": ("tensorflow", "tensorflow-cpu")}[framework]:
        try:
            return base(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
    name = {"torch": "torch", "tf": "tensorflow"}[framework]
    lock = REPO / "requirements.lock"
    for line in lock.read_text().splitlines() if lock.exists() else []:
        if line.startswith(f"{name}=="):
            return base(line.split("==", 1)[1].split()[0].strip())
    raise RuntimeError(f"no {name} in bench's environment")


def normalize(framework: str, version: str) -> str:
    """The version as a config holds it: "" for the pinned one (asked for by name or not)."""
    version = version.strip()
    return "" if version and version == pinned(framework) else version


def base(version: str) -> str:
    """A module's ``__version__`` without its local part (``2.13.0+cpu`` -> ``2.13.0``)."""
    return version.split("+", 1)[0]


@dataclass(frozen=True)
class Release:
    version: str
    wheel_here: bool  # a wheel for this Python and platform


def _cache_file(pkg: str) -> Path:
    from bench.paths import cache_dir

    return cache_dir() / "index" / f"{pkg}.json"


def releases(pkg: str) -> dict[str, Release]:
    """The package's final releases on the index, with whether each has a wheel for this
    Python and platform; the index is asked at most once a day.  Raises OSError (naming the
    index) where it cannot be reached and nothing is cached."""
    path = _cache_file(pkg)
    if path.exists() and time.time() - path.stat().st_mtime < _DAY_S:
        data = json.loads(path.read_text())
    else:
        url = f"{os.environ.get('BENCH_PACKAGE_INDEX') or DEFAULT_INDEX}/{pkg}/json"
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                raw = json.load(answer)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            if path.exists():
                data = json.loads(path.read_text())
            else:
                raise OSError(f"the package index ({url}) cannot be reached: {exc}") from exc
        else:
            data = {v: [f["filename"] for f in files] for v, files in raw["releases"].items()}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data))
    return {v: Release(v, any(_fits(f) for f in files)) for v, files in data.items() if _final(v)}


def _final(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return not Version(version).is_prerelease
    except InvalidVersion:
        return False


def _fits(filename: str) -> bool:
    """Whether a wheel installs on this interpreter and platform (CPython, Linux or macOS)."""
    if not filename.endswith(".whl"):
        return False
    _, _, tags = filename[:-4].partition("-")
    parts = tags.split("-")
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    machine = platform.machine()
    system = sys.platform
    python_ok = here in py.split(".") or py in ("py3", "py2.py3")
    abi_ok = abi in (here, "abi3", "none")
    if system.startswith("linux"):
        plat_ok = "linux" in plat and machine in plat
    elif system == "darwin":
        plat_ok = "macosx" in plat
    else:
        plat_ok = False
    return python_ok and abi_ok and (plat_ok or plat == "any")


def _key(version: str) -> tuple[int, ...]:
    from packaging.version import Version

    return tuple(Version(version).release)


def nearest(version: str, available: list[str], n: int = 3) -> list[str]:
    """The ``n`` releases nearest ``version`` (by release number), in order."""
    from packaging.version import InvalidVersion

    try:
        want = _key(version)
    except InvalidVersion:
        return sorted(available, key=_key)[-n:]

    def distance(v: str) -> tuple[int, ...]:
        got = _key(v)
        width = max(len(got), len(want))
        a, b = got + (0,) * (width - len(got)), want + (0,) * (width - len(want))
        return tuple(abs(x - y) for x, y in zip(a, b, strict=True))

    return sorted(sorted(available, key=distance)[:n], key=_key)


def series(version: str) -> str:
    return ".".join(version.split(".")[:2])


def problems(framework: str, version: str, *, gpu: bool, cached: bool) -> list[str]:
    """Why ``framework.version`` cannot run here ([] if it can): not a release, outside the
    supported range, no wheel for this Python or platform, or (not ``cached``) an index
    that cannot be reached."""
    if not version:
        return []
    field = "framework.version"
    if framework not in SUPPORTED:
        return []  # framework itself is refused elsewhere
    if framework == "mxnet":
        return [f"{field}: MXNet has one release bench runs, 1.9.1 (its last); got {version!r}"]
    allowed = ", ".join(f"{s}.x" for s in SUPPORTED[framework])
    pkg = package(framework, gpu)
    try:
        found = releases(pkg)
    except OSError as exc:
        if cached:
            return []
        return [f"{field}: {framework} {version} has no environment here yet and {exc}"]
    if version not in found:
        close = ", ".join(nearest(version, [v for v, r in found.items() if r.wheel_here]))
        return [f"{field}: {pkg} has no release {version!r}; the nearest: {close}"]
    if series(version) not in SUPPORTED[framework]:
        return [
            f"{field}: {framework} {version} is outside the supported range ({allowed}; "
            "docs/versions.md)"
        ]
    if not found[version].wheel_here:
        here = f"Python {sys.version_info.major}.{sys.version_info.minor} on {platform.machine()}"
        return [f"{field}: {pkg} {version} has no wheel for {here}"]
    return []
