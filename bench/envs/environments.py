"""The environment of a non-pinned framework version (``framework.version``), made on first
use and cached: a lock generated for that version (``uv pip compile --generate-hashes``:
the framework at that version, the packages a trial needs beside it at the host's pins
where they fit), a virtual environment installed from it with hashes required, and bench's
sources on its path (a ``.pth`` file, as ``.venv-mxnet``).  The host environment is never
touched.

Layout, under ``~/.cache/bench/envs`` (``BENCH_CACHE``): ``<framework>-<version>/lock.txt``
and ``venv/``; the stamp ``venv/.bench-<hash of the lock>`` marks a finished install, so a
second sweep reuses it without asking the index, and a new lock rebuilds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.core import versions
from bench.core.frameworks import FRAMEWORKS, own_environment
from bench.core.paths import PACKAGE, locked, source_root

REPO = PACKAGE.parent  # a source checkout: requirements.lock is here

# What a trial needs beside its framework (bench.trial.worker's imports), pinned at the host's
# versions where the framework's own requirements allow.
TRIAL_SIDE = ("numpy", "psutil", "nvidia-ml-py", "scikit-learn", "matplotlib", "packaging")
# Kept at the host's pins whatever happens (they decide nothing a trial measures).
ALWAYS_PINNED = ("psutil", "nvidia-ml-py")
COMPANIONS = {name: spec.companions for name, spec in FRAMEWORKS.items()}


class EnvironmentError_(RuntimeError):
    """The environment of a version cannot be made; the message says why."""


@dataclass(frozen=True)
class Env:
    framework: str
    version: str
    root: Path

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


def env_for(framework: str, version: str) -> Env:
    return Env(framework, version, cache_root() / f"{framework}-{version}")


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


def requirements(framework: str, version: str, gpu: bool, pinned: bool) -> list[str]:
    pins = host_pins()
    wanted = [f"{versions.package(framework, gpu)}=={version}"]
    for name in (*TRIAL_SIDE, *COMPANIONS[framework]):
        keep = pinned or name in ALWAYS_PINNED
        wanted.append(f"{name}=={pins[name]}" if keep and name in pins else name)
    return wanted


def generate_lock(env: Env, gpu: bool) -> None:
    """Write the version's hashed lock (for this host's Python and platform)."""
    _compile(env.framework, env.version, gpu, env.lock, _platform())


def _compile(framework: str, version: str, gpu: bool, lock: Path, target: str) -> None:
    """Write a hashed lock for ``framework`` at ``version``: first with the host's pins beside
    the framework, then, if that does not resolve, with only the framework and the pins that
    decide nothing; ``target``: uv's --python-platform ("" for this host's)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    source = lock.with_name(lock.name + ".in")
    why = ""
    for pinned in (True, False):
        source.write_text("\n".join(requirements(framework, version, gpu, pinned)) + "\n")
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        args = ["pip", "compile", "--quiet", "--generate-hashes", "--python-version", py]
        if target:
            args += ["--python-platform", target]
        done = run_uv(*args, str(source), "-o", str(lock))
        if done.returncode == 0:
            return
        why = done.stderr.strip()
    lines = [line for line in why.splitlines() if line.strip()][-6:]
    raise EnvironmentError_(
        f"framework.version: {framework} {version} conflicts with bench's own "
        f"requirements ({', '.join(ALWAYS_PINNED)} at the host's pins); uv says: "
        + " / ".join(line.strip() for line in lines)
    )


def image_lock(framework: str, version: str, variant: str) -> Path:
    """The hashed lock a framework version's image installs (``launcher=docker``): Python
    3.11 on Linux x86_64 (bench's images), TensorFlow's CPU package for the cpu variant;
    generated once and cached under ``~/.cache/bench/locks``."""
    lock = cache_root().parent / "locks" / f"{framework}-{version}-{variant}.txt"
    with locked(lock.with_name(lock.name + ".mutex")):
        if not lock.exists():
            _compile(framework, version, variant == "cuda", lock, "x86_64-manylinux_2_28")
    return lock


def ensure(framework: str, version: str, gpu: bool = False, say: bool = True) -> Env:
    """The environment of ``framework`` at ``version``, made if it is not cached (seconds
    with uv's cache warm, a download of the framework otherwise)."""
    env = env_for(framework, version)
    with locked(env.root.parent / f"{env.root.name}.lock"):
        if env.ready:
            return env
        t0 = time.perf_counter()
        if say:
            print(
                f"bench: making the environment of {framework} {version} (first use; "
                f"cached in {env.root})",
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
            "--compile-bytecode",
            "--python",
            str(env.python),
            str(env.lock),
        )
        if done.returncode != 0:
            raise EnvironmentError_(
                f"installing {framework} {version} from {env.lock} failed: "
                f"{done.stderr.strip()[-800:]}"
            )
        site = subprocess.run(
            [str(env.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        Path(site, "bench-source.pth").write_text(f"{source_root()}\n")
        module = versions.MODULES[framework]
        check = subprocess.run(
            [
                str(env.python),
                "-c",
                f"import {module}, bench.trial.worker; print({module}.__version__)",
            ],
            capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )  # fmt: skip
        got = check.stdout.strip().splitlines()[-1:] if check.returncode == 0 else []
        if not got or versions.base(got[0]) != version:
            raise EnvironmentError_(
                f"the environment of {framework} {version} does not import it: "
                f"{(check.stderr or check.stdout).strip()[-500:]}"
            )
        (venv / f".bench-{env.lock_hash()}").touch()
        if say:
            print(
                f"bench: {framework} {version} ready in {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
            )
        return env


def lock_of(framework: str, version: str, variant: str = "") -> Path | None:
    """The lock a trial's environment was installed from: the version's own (its image's,
    for ``variant`` cpu or cuda: launcher=docker), or the host's ``requirements.lock`` for
    the pinned version (None where there is none: a wheel install, MXNet's environment, a
    pinned image, whose constraints files are not full locks)."""
    if version and variant:
        lock = cache_root().parent / "locks" / f"{framework}-{version}-{variant}.txt"
        return lock if lock.exists() else None
    if variant:
        return None
    if version:
        lock = env_for(framework, version).lock
        return lock if lock.exists() else None
    if own_environment(framework):
        return None
    lock = REPO / "requirements.lock"
    return lock if lock.exists() else None


def lock_hash_of(path: Path) -> str:
    """The short hash a run logs as ``bench.lock_sha``."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
