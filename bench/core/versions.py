"""Framework versions as a sweep axis (``framework.version``): which versions bench accepts
and why it refuses the others.  Imports no framework.

The empty version is the pinned one (``requirements.lock``, the images' constraints): the
host's own environment runs it.  Any other version runs in an environment of its own, made
on first use from a generated, hashed lock (:mod:`bench.envs.environments`).  A version must be
a release on the package index with a wheel for this Python and platform, inside the
supported range (:data:`SUPPORTED`): the last three minor series of torch and TensorFlow;
MXNet has one release, 1.9.1.  The package index is asked once a day (its answer is
cached); where it cannot be reached, a version whose environment is not cached is refused
with that reason.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.core.frameworks import FRAMEWORKS
from bench.core.paths import PACKAGE

REPO = PACKAGE.parent  # a source checkout: requirements.lock is here

# The minor series bench supports per framework (a version outside is refused): the last
# three of torch and TensorFlow with wheels for Python 3.11 on the package index.
# Each framework's spec says it (bench.core.frameworks).
SUPPORTED = {name: spec.supported for name, spec in FRAMEWORKS.items()}
# The module whose __version__ a trial checks, per framework.
MODULES = {name: spec.module for name, spec in FRAMEWORKS.items()}
# framework.version=installed: whatever version the trial's interpreter has, resolved when
# the configuration is composed (framework.installed); no environment is made or checked.
INSTALLED = "installed"
# A release as framework.version may name one: PEP 440's public versions, digits and dots
# with an optional pre, post or dev part; nothing else (no ``/``, no ``..``), since the
# version names a folder under bench's cache and comes back from runs (bench reproduce).
RELEASE = re.compile(
    r"[0-9]+(?:\.[0-9]+){0,4}(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
)
DEFAULT_INDEX = "https://pypi.org/pypi"  # BENCH_PACKAGE_INDEX points elsewhere
_DAY_S = 86400.0


def package(framework: str, gpu: bool = False) -> str:
    """The package a framework version installs from: TensorFlow's CPU build where the host
    has no GPU (the same code, a tenth of the download)."""
    spec = FRAMEWORKS[framework]
    return spec.gpu_package if gpu else spec.cpu_package


def pinned(framework: str) -> str:
    """The version the host's environment has (what ``requirements.lock`` pins); MXNet's
    environment has 1.9.1, its last release."""
    if FRAMEWORKS[framework].only_release:
        return FRAMEWORKS[framework].only_release
    from importlib import metadata

    for name in FRAMEWORKS[framework].distributions[:2]:
        try:
            return base(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue
    found = locked(framework)
    if not found:
        raise RuntimeError(f"no {MODULES[framework]} in bench's environment")
    return found


@functools.cache
def locked(framework: str) -> str:
    """The version ``requirements.lock`` pins for ``framework`` ('' where there is no lock
    beside the package, as for an installed wheel); MXNet's environment has 1.9.1."""
    if FRAMEWORKS[framework].only_release:
        return FRAMEWORKS[framework].only_release
    name = FRAMEWORKS[framework].distributions[0]
    lock = REPO / "requirements.lock"
    for line in lock.read_text().splitlines() if lock.exists() else []:
        if line.startswith(f"{name}=="):
            return base(line.split("==", 1)[1].split()[0].strip())
    return ""


def own_release(version: str) -> str:
    """The release ``framework.version`` asks an environment (or image) of its own for: ''
    for the pinned version and for ``installed`` (both run the trial's own interpreter)."""
    return "" if version in ("", INSTALLED) else version


def is_release(version: str) -> bool:
    """Whether ``version`` is written as a release (:data:`RELEASE`), as any version that
    names an environment or an image must be."""
    return bool(RELEASE.fullmatch(version))


def normalize(framework: str, version: str) -> str:
    """The version as a config holds it: "" for the pinned one (asked for by name or not),
    ``installed`` as it is."""
    version = version.strip()
    if version == INSTALLED:
        return version
    return "" if version and version == pinned(framework) else version


def base(version: str) -> str:
    """A module's ``__version__`` without its local part (``2.13.0+cpu`` -> ``2.13.0``)."""
    return version.split("+", 1)[0]


@dataclass(frozen=True)
class Release:
    version: str
    wheel_here: bool  # a wheel for this Python and platform


def _cache_file(pkg: str) -> Path:
    from bench.core.paths import cache_dir

    return cache_dir() / "index" / f"{pkg}.json"


def releases(pkg: str) -> dict[str, Release]:
    """The package's final releases on the index, with whether each has a wheel for this
    Python and platform; the index is asked at most once a day.  Raises OSError (naming the
    index) where it cannot be reached and nothing is cached."""
    from bench.core.paths import owned_private, private_dir, write_private

    pkg = pkg.split("[", 1)[0]  # the index knows jax, not jax[cpu] (an extra of it)
    path = _cache_file(pkg)
    # Believed only from a file of this user that no one else can write (a shared cache
    # folder must not let another user decide which versions bench offers).
    mine = owned_private(path)
    if mine and time.time() - path.stat().st_mtime < _DAY_S:
        data = json.loads(path.read_text())
    else:
        url = f"{os.environ.get('BENCH_PACKAGE_INDEX') or DEFAULT_INDEX}/{pkg}/json"
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                raw = json.load(answer)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            if mine:
                data = json.loads(path.read_text())
            else:
                raise OSError(f"the package index ({url}) cannot be reached: {exc}") from exc
        else:
            data = {v: [f["filename"] for f in files] for v, files in raw["releases"].items()}
            private_dir(path.parent)
            write_private(path, json.dumps(data))
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
    only = FRAMEWORKS[framework].only_release
    if only:
        title = FRAMEWORKS[framework].title
        return [f"{field}: {title} has one release bench runs, {only} (its last); got {version!r}"]
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


def describe(framework: str) -> dict[str, str]:
    """What this interpreter has of ``framework``, found without importing it: ``version``
    (its ``__version__``, a CUDA build's local label included), ``cuda`` and ``cudnn`` where
    it was built with them ('' otherwise); {} where the framework is not importable."""
    import ast
    import importlib.util
    from importlib import metadata

    module = MODULES[framework]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return {}
    out = {"version": "", "cuda": "", "cudnn": ""}
    for dist in FRAMEWORKS[framework].distributions:
        try:
            out["version"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        first = FRAMEWORKS[framework].distributions[0]
        if dist.startswith(f"{first}-cu"):  # mxnet-cu117: built for CUDA 11.7
            digits = dist.removeprefix(f"{first}-cu")
            out["cuda"] = f"{digits[:-1]}.{digits[-1]}"
        break
    where, fields = FRAMEWORKS[framework].build_file, FRAMEWORKS[framework].build_fields
    path = Path(next(iter(spec.submodule_search_locations)), where)
    if where and path.is_file():
        # Assignments of string constants (``cuda = '13.0'``, ``build_info['cuda_version'] =
        # '12.5.1'``, or a dict literal), read with ast: nothing in the file runs.
        for node in ast.walk(ast.parse(path.read_text(errors="replace"))):
            pairs: list[tuple[str, object]] = []
            if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Constant):
                if isinstance(node.target, ast.Name):  # cuda: Optional[str] = '13.0'
                    pairs.append((node.target.id, node.value.value))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        pairs.append((target.id, node.value.value))
                    elif isinstance(target, ast.Subscript) and isinstance(
                        target.slice, ast.Constant
                    ):
                        pairs.append((str(target.slice.value), node.value.value))
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2:  # OrderedDict([(k, v)])
                k_node, v_node = node.elts
                if isinstance(k_node, ast.Constant) and isinstance(v_node, ast.Constant):
                    pairs.append((str(k_node.value), v_node.value))
            elif isinstance(node, ast.Dict):
                pairs += [
                    (str(k.value), v.value)
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                ]
            for key, value in pairs:
                if key in fields and isinstance(value, str) and value:
                    out[fields[key]] = value
    if not out["cuda"]:  # a CUDA plugin of its own (jax-cuda13-plugin: jax[cuda13])
        plugin = re.compile(rf"{FRAMEWORKS[framework].distributions[0]}-cuda([0-9]+)-plugin")
        for installed in metadata.distributions():
            match = plugin.fullmatch(re.sub(r"[-_.]+", "-", installed.metadata["Name"] or ""))
            if match:
                out["cuda"] = match.group(1)
                break
    if out["cuda"] and not out["cudnn"]:  # the cuDNN wheel beside it (torch, tf[and-cuda])
        for installed in metadata.distributions():
            name = (installed.metadata["Name"] or "").lower()
            if name.startswith("nvidia-cudnn-cu"):
                out["cudnn"] = installed.version
                break
    return out


def build_text(found: dict[str, str]) -> str:
    """``framework.installed`` as a config holds it: the version, then the CUDA and cuDNN
    builds where there are any (``2.11.0+cu130 cuda 13.0 cudnn 9.13.0.50``)."""
    text = found.get("version", "")
    for key in ("cuda", "cudnn"):
        if found.get(key):
            text += f" {key} {found[key]}"
    return text
