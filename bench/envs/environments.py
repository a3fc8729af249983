"""The environment of a non-pinned framework version (``framework.version``), made on first
use and cached: a lock generated for that version (``uv pip compile --generate-hashes``:
the framework at that version, the packages a trial needs beside it at the host's pins
where they fit), a virtual environment installed from it with hashes required, and bench's
sources on its path (a ``.pth`` file, as ``.venv-mxnet``).  The host environment is never
touched.

A trial whose model needs a library beside the framework (:data:`EXTRA_OF`: model=timm and
model=torchvision need timm and torchvision, model=hf transformers under torch and keras-hub
with tensorflow-text under tf) runs in the version's environment *with that extra*: an
environment of its own, ``<framework>-<version>+<extra>``, whose lock holds the extra's
packages resolved for that version (:func:`extra_requirements`: the torchvision paired with
the torch, the tensorflow-text of the TensorFlow minor, each published before the host
lock's date), so an environment without them is never taken for one with them.

Layout, under ``~/.cache/bench/envs`` (``BENCH_CACHE``): ``<framework>-<version>[+<extra>]/``
holds ``lock.txt`` and ``venv/``; the stamp ``venv/.bench-<hash of the lock>`` marks a
finished install, so a second sweep reuses it without asking the index, and a new lock
rebuilds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.core import versions
from bench.core.frameworks import FRAMEWORKS, TF, TORCH, own_environment
from bench.core.paths import PACKAGE, locked, source_root, writable_by_others

if TYPE_CHECKING:
    from bench.core.config import BenchConfig

REPO = PACKAGE.parent  # a source checkout: requirements.lock is here

# What a trial needs beside its framework (bench.trial.worker's imports), pinned at the host's
# versions where the framework's own requirements allow.
TRIAL_SIDE = (
    "numpy",
    "psutil",
    "nvidia-ml-py",
    "scikit-learn",
    "matplotlib",
    "packaging",
    "mlcommons-loadgen",
)
# Kept at the host's pins whatever happens (they decide nothing a trial measures).
ALWAYS_PINNED = ("psutil", "nvidia-ml-py")
COMPANIONS = {name: spec.companions for name, spec in FRAMEWORKS.items()}

# The extra (pyproject.toml's optional dependencies) a model source needs beside the
# framework, per framework: a version's environment for such a trial installs it.
# model=torchvision takes the timm extra too (timm is small), so the image models of one
# torch version share one environment.
EXTRA_OF = {
    (TORCH, "timm"): "timm",
    (TORCH, "torchvision"): "timm",
    (TORCH, "hf"): "hf",
    (TF, "hf"): "keras-hub",
}
# Each extra's packages at pyproject.toml's ranges (tests/unit/test_version_extras.py checks
# them against it); torchvision and tensorflow-text are resolved per framework version
# instead (:func:`extra_requirements`).
EXTRA_RANGES = {
    "timm": {"timm": ">=1.0.20,<2"},
    "hf": {"transformers": ">=5.20,<6"},
    "keras-hub": {"keras-hub": ">=0.32,<0.33"},
}
# The modules a finished environment with the extra must import.
EXTRA_MODULES = {
    "timm": ("timm", "torchvision"),
    "hf": ("transformers",),
    "keras-hub": ("keras_hub", "tensorflow_text"),
}
# torchvision 0.(N + 15) is built for torch 2.N (PyTorch's compatibility table): only its
# releases pair with a torch 2.N release, whatever a newer torchvision's metadata allows.
TORCHVISION_OFFSET = 15
DATE_LINE = re.compile(r"^# Resolved with the releases published before (\S+)", re.M)


class EnvironmentError_(RuntimeError):
    """The environment of a version cannot be made; the message says why."""


@dataclass(frozen=True)
class Env:
    framework: str
    version: str
    root: Path
    extra: str = ""  # an extra of EXTRA_RANGES the environment installs beside the framework

    @property
    def lock(self) -> Path:
        return self.root / "lock.txt"

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    def lock_hash(self) -> str:
        return lock_hash_of(self.lock)

    @property
    def ready(self) -> bool:
        return self.lock.exists() and (self.root / "venv" / f".bench-{self.lock_hash()}").exists()


def cache_root() -> Path:
    from bench.core.paths import cache_dir

    return cache_dir() / "envs"


def env_for(framework: str, version: str, extra: str = "") -> Env:
    """The environment of ``framework`` at ``version``; ValueError for a version not written
    as a release or a name bench does not know, which would name a folder elsewhere."""
    if not versions.is_release(version) or framework not in FRAMEWORKS:
        raise ValueError(f"framework.version: {version!r} of {framework!r} is not a release")
    if extra and extra not in EXTRA_MODULES:
        raise ValueError(f"no extra {extra!r}")
    name = f"{framework}-{version}" + (f"+{extra}" if extra else "")
    return Env(framework, version, cache_root() / name, extra)


def extra_of(cfg: BenchConfig) -> str:
    """The extra the environment of ``cfg``'s framework version installs for its model ('' for
    none: the zoo's models, model=py, model=keras; and the pinned or installed version, whose
    interpreter has what it has; and launcher=docker, whose image installs no extra)."""
    if not versions.own_release(cfg.framework.version) or cfg.launcher.name == "docker":
        return ""
    return EXTRA_OF.get((cfg.framework.name, cfg.model.source), "")


def lock_date() -> str:
    """The date the host's lock was resolved at (its header; scripts/locks.py), '' where there
    is none (an installed wheel): an extra's packages in a version's lock are releases
    published before it, as the host's and the images' are."""
    lock = REPO / "requirements.lock"
    found = DATE_LINE.search(lock.read_text()) if lock.exists() else None
    return found.group(1) if found else ""


def paired_torchvision(torch_version: str) -> str:
    """The torchvision series built for ``torch_version`` (``2.14.1`` -> ``0.29``)."""
    major, minor = (int(part) for part in torch_version.split(".")[:2])
    if major != 2:
        raise EnvironmentError_(
            f"framework.version: bench pairs torchvision with torch 2.x only, not {torch_version}"
        )
    return f"0.{minor + TORCHVISION_OFFSET}"


def extra_packages(framework: str, version: str, extra: str) -> dict[str, str]:
    """``name: specifier`` of the packages ``extra`` adds to ``framework`` ``version``'s
    environment, before the host's pins (:func:`extra_requirements`)."""
    wanted = dict(EXTRA_RANGES[extra])
    package, series, _ = _series_bound(framework, version, extra)
    if package:  # torchvision: the torch's pair; tensorflow-text: the TensorFlow minor's
        wanted[package] = f"=={series}.*"
    return wanted


def extra_requirements(framework: str, version: str, extra: str, pinned: bool) -> list[str]:
    """The requirement lines of ``extra`` in a version's lock: its own packages at the host's
    pins where ``pinned`` and the host has them inside their ranges (transformers, keras-hub),
    else at their ranges; torchvision and tensorflow-text always in the series of the
    framework version."""
    from packaging.specifiers import SpecifierSet

    pins = host_pins() if pinned else {}
    lines = []
    for name, spec in extra_packages(framework, version, extra).items():
        pin = pins.get(name, "")
        fits = bool(pin) and SpecifierSet(spec).contains(versions.base(pin))
        lines.append(f"{name}=={pin}" if fits else f"{name}{spec}")
    return lines


def lock_pins(path: Path) -> dict[str, str]:
    """``name: version`` of a lock or constraints file (its ``name==version`` lines, hashes
    and comments aside): names normalized, extras dropped; the version as written, a local
    label such as ``+cpu`` included."""
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, version = line.partition("==")
        if sep and not line.startswith("-"):
            pins[canonicalize_name(name.split("[")[0].strip())] = version.split()[0]
    return pins


def host_pins() -> dict[str, str]:
    """``name: version`` of the host's lock (:func:`lock_pins`); installed from a wheel (no
    lock beside the package), the host environment's own versions."""
    lock = REPO / "requirements.lock"
    if lock.exists():
        return lock_pins(lock)
    from importlib import metadata

    pins: dict[str, str] = {}
    for name in (*TRIAL_SIDE, *(n for names in COMPANIONS.values() for n in names)):
        with contextlib.suppress(metadata.PackageNotFoundError):
            pins[name] = metadata.version(name)
    return pins


def run_uv(*args: str) -> subprocess.CompletedProcess[str]:
    """Run uv's own binary (``python -m uv`` would aim its pip commands at the interpreter
    that started it: bench's own environment), never inside bench's environment."""
    from uv import find_uv_bin

    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env = {k: v for k, v in env.items() if not k.startswith("UV_INTERNAL")}
    ca = Path("/etc/ssl/certs/ca-certificates.crt")
    if "SSL_CERT_FILE" not in env and ca.exists():
        env["SSL_CERT_FILE"] = str(ca)  # uv does not read pip's configuration
    return subprocess.run(
        [find_uv_bin(), *args], capture_output=True, text=True, env=env, timeout=1800
    )


def _platform() -> str:
    return f"{platform.machine()}-manylinux_2_28" if sys.platform.startswith("linux") else ""


def _series_bound(framework: str, version: str, extra: str) -> tuple[str, str, str]:
    """The package of ``extra`` that is built for one series of the framework, that series,
    and what needs it (three '' where the extra has none)."""
    if extra == "timm":
        need = "model=timm and model=torchvision need"
        return "torchvision", paired_torchvision(version), need
    if extra == "keras-hub":
        need = "model=hf under framework=tf needs keras-hub and"
        return "tensorflow-text", versions.series(version), need
    return "", "", ""


def extra_problems(framework: str, version: str, extra: str, *, cached: bool) -> list[str]:
    """Why ``framework`` ``version`` cannot get ``extra`` ([] if it can, as far as the package
    index says; its lock decides the rest): torchvision and tensorflow-text are built for one
    framework series, which must have a release with a wheel here.  Not ``cached``: an index
    that cannot be reached is a problem too."""
    from packaging.version import Version

    field = "framework.version"
    try:
        package, series, need = _series_bound(framework, version, extra)
    except EnvironmentError_ as exc:
        return [str(exc)]
    if not package:
        return []
    try:
        found = versions.releases(package)
    except OSError as exc:
        return [] if cached else [f"{field}: {framework} {version} with the {extra} extra: {exc}"]
    here = [v for v, r in found.items() if r.wheel_here]
    if any(versions.series(v) == series for v in here):
        return []
    newest = max(here, key=Version, default="")
    return [
        f"{field}: {need} {package} {series}.x, the series built for {framework} {version}, "
        "which has no release with a wheel for this Python and platform"
        + (f" (the newest: {newest})" if newest else "")
        + f"; run a {framework} version it has a release for, or the pinned one"
    ]


def requirements(
    framework: str, version: str, gpu: bool, pinned: bool, extra: str = ""
) -> list[str]:
    pins = host_pins()
    package = versions.package(framework, gpu)
    if extra == "keras-hub":  # tensorflow-text requires tensorflow, which tensorflow-cpu is not
        package = FRAMEWORKS[framework].gpu_package
    wanted = [f"{package}=={version}"]
    for name in (*TRIAL_SIDE, *COMPANIONS[framework]):
        keep = pinned or name in ALWAYS_PINNED
        wanted.append(f"{name}=={pins[name]}" if keep and name in pins else name)
    if extra:
        wanted += extra_requirements(framework, version, extra, pinned)
    return wanted


def generate_lock(env: Env, gpu: bool) -> None:
    """Write the version's hashed lock (for this host's Python and platform)."""
    _compile(env.framework, env.version, gpu, env.lock, _platform(), env.extra)


def _window(extra: str, framework: str, version: str) -> list[str]:
    """uv's arguments that keep the extra's packages to the releases published before the
    host lock's date ([] for no extra, or no date)."""
    date = lock_date()
    if not extra or not date:
        return []
    names = extra_packages(framework, version, extra)
    return [arg for name in names for arg in ("--exclude-newer-package", f"{name}={date}")]


def _compile(
    framework: str, version: str, gpu: bool, lock: Path, target: str, extra: str = ""
) -> None:
    """Write a hashed lock for ``framework`` at ``version`` (with ``extra``'s packages):
    first with the host's pins beside the framework, then, if that does not resolve, with
    only the framework and the pins that decide nothing; ``target``: uv's --python-platform
    ("" for this host's)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    source = lock.with_name(lock.name + ".in")
    why = ""
    for pinned in (True, False):
        wanted = requirements(framework, version, gpu, pinned, extra)
        source.write_text("\n".join(wanted) + "\n")
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        args = ["pip", "compile", "--quiet", "--generate-hashes", "--python-version", py]
        if target:
            args += ["--python-platform", target]
        args += _window(extra, framework, version)
        done = run_uv(*args, str(source), "-o", str(lock))
        if done.returncode == 0:
            return
        why = done.stderr.strip()
    lines = [line for line in why.splitlines() if line.strip()][-6:]
    said = " / ".join(line.strip() for line in lines)
    if extra:
        date = lock_date()
        packages = ", ".join(
            f"{name}{spec}" for name, spec in extra_packages(framework, version, extra).items()
        )
        raise EnvironmentError_(
            f"framework.version: {framework} {version} with the {extra} extra (its model "
            f"needs {packages}"
            + (f", released before {date}, the host lock's date" if date else "")
            + f") does not resolve; uv says: {said}"
        )
    raise EnvironmentError_(
        f"framework.version: {framework} {version} conflicts with bench's own "
        f"requirements ({', '.join(ALWAYS_PINNED)} at the host's pins); uv says: {said}"
    )


def image_lock(framework: str, version: str, variant: str) -> Path:
    """The hashed lock a framework version's image installs (``launcher=docker``): Python
    3.11 on Linux x86_64 (bench's images), TensorFlow's CPU package for the cpu variant;
    generated once and cached under ``~/.cache/bench/locks``."""
    env_for(framework, version)  # a release of a framework bench knows, else ValueError
    lock = cache_root().parent / "locks" / f"{framework}-{version}-{variant}.txt"
    with locked(lock.with_name(lock.name + ".mutex")):
        if not lock.exists():
            _compile(framework, version, variant == "cuda", lock, "x86_64-manylinux_2_28")
    return lock


def not_own(env: Env) -> str:
    """Why bench will not make or run ``env`` ('' if it may): the cache folders above it, its
    folder, its venv and lock must each be this user's and writable by no one else (a
    group-writable one of the user's own private group is theirs), since
    whoever can write them chooses the code a trial runs (an environment planted in a shared
    cache was run)."""
    here = [cache_root().parent, cache_root()]
    mine = [env.root, env.root / "venv", env.root / "venv" / "bin", env.lock]
    for path in (*here, *mine):
        try:
            st = path.stat() if path in here else path.lstat()  # BENCH_CACHE may be a link
        except FileNotFoundError:
            continue
        why = ""
        if stat.S_ISLNK(st.st_mode):
            why = "is a symbolic link"
        elif st.st_uid != os.getuid():
            why = f"belongs to another user (uid {st.st_uid})"
        elif writable_by_others(st):
            why = f"can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
        if why:
            return (
                f"framework.version: bench will not use {path}: it {why}; an environment "
                "runs as you, so its cache must be your own (chmod go-w, or set BENCH_CACHE "
                "to a folder of yours)"
            )
    return ""


def ensure(
    framework: str,
    version: str,
    gpu: bool = False,
    say: bool = True,
    extra: str = "",
    wheels_only: bool = False,
) -> Env:
    """The environment of ``framework`` at ``version`` (with ``extra``'s packages), made if it
    is not cached (seconds with uv's cache warm, a download of the framework otherwise);
    ``wheels_only``: install wheels only, building nothing (a lock that came from a run)."""
    env = env_for(framework, version, extra)
    problem = not_own(env)
    if problem:
        raise EnvironmentError_(problem)
    with locked(env.root.parent / f"{env.root.name}.lock"):
        if env.ready:
            return env
        t0 = time.perf_counter()
        what = f"{framework} {version}" + (f" with the {extra} extra" if extra else "")
        if say:
            print(
                f"bench: making the environment of {what} (first use; cached in {env.root})",
                file=sys.stderr,
            )
        if not env.lock.exists():
            generate_lock(env, gpu)
        venv = env.root / "venv"
        if not env.python.exists():
            base = getattr(sys, "_base_executable", sys.executable)
            done = run_uv("venv", "--quiet", "--python", base, str(venv))
            if done.returncode != 0:
                raise EnvironmentError_(f"uv venv failed: {done.stderr.strip()[-500:]}")
        for stale in venv.glob(".bench-*"):
            stale.unlink()
        if Path(sys.prefix).resolve() == venv.resolve():
            raise EnvironmentError_(f"refusing to install into bench's own environment {venv}")
        done = run_uv(
            "pip",
            "sync",
            "--quiet",
            "--require-hashes",
            *(["--no-build"] if wheels_only else []),
            "--compile-bytecode",
            "--python",
            str(env.python),
            str(env.lock),
        )
        if done.returncode != 0:
            raise EnvironmentError_(
                f"installing {what} from {env.lock} failed: {done.stderr.strip()[-800:]}"
            )
        site = subprocess.run(
            [str(env.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        Path(site, "bench-source.pth").write_text(f"{source_root()}\n")
        _check_imports(env)
        (venv / f".bench-{env.lock_hash()}").touch()
        if say:
            print(f"bench: {what} ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        return env


def _check_imports(env: Env) -> None:
    """The finished environment imports its framework at its version, bench's trial side, and
    the extra's modules (torchvision in the series paired with the torch); else raise."""
    module = versions.MODULES[env.framework]
    extras = EXTRA_MODULES.get(env.extra, ())
    code = (
        f"import {', '.join((module, 'bench.trial.worker', *extras))}; "
        f"print({', '.join(f'{m}.__version__' for m in (module, *extras))})"
    )
    check = subprocess.run(
        [str(env.python), "-c", code],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    got = check.stdout.strip().splitlines()[-1:] if check.returncode == 0 else []
    found = dict(zip((module, *extras), got[0].split(), strict=False)) if got else {}
    what = f"{env.framework} {env.version}" + (f" with the {env.extra} extra" if env.extra else "")
    if versions.base(found.get(module, "")) != env.version:
        raise EnvironmentError_(
            f"the environment of {what} does not import it: "
            f"{(check.stderr or check.stdout).strip()[-500:]}"
        )
    if "torchvision" in extras:
        series = paired_torchvision(env.version)
        if versions.series(versions.base(found.get("torchvision", ""))) != series:
            raise EnvironmentError_(
                f"the environment of {what} has torchvision {found.get('torchvision')}, not "
                f"the {series}.x built for torch {env.version}"
            )


def lock_of(framework: str, version: str, variant: str = "", extra: str = "") -> Path | None:
    """The lock a trial's environment was installed from: the version's own (with ``extra``:
    :func:`extra_of`; its image's, for ``variant`` cpu or cuda: launcher=docker), or the
    host's ``requirements.lock`` for the pinned version (None where there is none: a wheel
    install, MXNet's environment, a pinned image, whose constraints files are not full
    locks)."""
    if version and variant:
        lock = cache_root().parent / "locks" / f"{framework}-{version}-{variant}.txt"
        return lock if lock.exists() else None
    if variant:
        return None
    if version:
        lock = env_for(framework, version, extra).lock
        return lock if lock.exists() else None
    if own_environment(framework):
        return None
    lock = REPO / "requirements.lock"
    return lock if lock.exists() else None


# One requirement of a hashed lock as bench's own locks write them: a name (extras), ``==``
# a version, an optional environment marker, and at least one sha256 hash; nothing else (no
# URL, path, index, ``-e``, ``-r`` or option line), so that a lock can name only packages of
# the index bench installs from, by their hashes.
_LOCK_LINE = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9._,-]+\])?==[A-Za-z0-9.+!_-]+"
    r"(?:\s*;[A-Za-z0-9_.'\"<>=!~ ()-]*?)?(?:\s+--hash=sha256:[0-9a-f]{64})+"
)


def lock_problems(text: str) -> list[str]:
    """Why ``text`` is not a hashed lock bench would write ([] if it is): each requirement
    ``name==version`` with its sha256 hashes, comments aside; the first lines that are not,
    quoted.  A lock that comes back from a run (bench reproduce) is checked by it before it is
    written anywhere or installed."""
    joined = re.sub(r"\\\n", " ", text)
    bad = []
    count = 0
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        count += 1
        if not _LOCK_LINE.fullmatch(line):
            bad.append(line[:120])
    if not count:
        return ["it names no package"]
    return [f"not a hashed requirement: {line!r}" for line in bad[:3]]


def lock_hash_of(path: Path) -> str:
    """The short hash a run logs as ``bench.lock_sha``."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
