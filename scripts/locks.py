"""Generate every lock of bench from one grid, or check that they are up to date.

    .venv/bin/python scripts/locks.py            # rewrite the locks (same date: same result)
    .venv/bin/python scripts/locks.py --check    # exit 1 naming each stale lock (CI runs it)
    .venv/bin/python scripts/locks.py --date now # move on to the releases of a week ago

The grid is (where: host or image) x framework x variant.  Each lock is resolved by
``uv pip compile`` from the version ranges of pyproject.toml (the host) or the packages an
image installs, plus the framework pins below, for Python 3.11 on Linux x86_64, with only
the releases published before one date (``--exclude-newer``), which the header of
requirements.lock records: the same inputs give the same locks on any day, and a stale lock
is a difference, not a guess.  ``--date now`` picks the day a week before today, not
today: a package index's mirror can take a day or more to list a release (here a release
uploaded at 21:44 one evening was missing from the proxy the next day), and a date in that
window would make a lock that another machine, or the same one tomorrow, resolves
differently.

- The host locks carry hashes (``pip install --require-hashes``).  The cpu variant takes
  PyTorch's CPU build (``torch==X+cpu``), which PyPI does not have: it comes from the
  wheels in ``PIP_FIND_LINKS`` (or PyTorch's CPU index, the same files) and the lock
  records the hash of the file found there.  A user whose CPU wheel is another file
  regenerates with ``PIP_FIND_LINKS`` pointing at it.
- The image files are constraints (``pip install --constraint``): an image installs on top
  of its base image's own packages (``--system-site-packages``), which a hashed lock cannot
  describe.  Every package they share with requirements.lock has its version (resolved
  under the host lock as a constraint).  MXNet's file is resolved on its own: it needs
  numpy 1.23 (MXNet 1.9.1 uses aliases numpy 1.24 removed), the host numpy 2.
- A framework version other than these pins has its own hashed lock, made on first use
  (:mod:`bench.envs.environments`); where a trial's model needs an extra the host lock
  leaves out or pins for the host's framework (timm with the torchvision paired with that
  torch; keras-hub with the tensorflow-text of that TensorFlow minor; transformers), that
  lock holds it, its packages kept to the releases before this grid's date.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import os
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.envs.environments import DATE_LINE, TRIAL_SIDE, lock_pins, run_uv  # noqa: E402

PYTHON, PLATFORM = "3.11", "x86_64-manylinux_2_28"
TORCH, TENSORFLOW, MXNET, JAX = "2.13.0", "2.21.0", "1.9.1", "0.10.2"
HOST_EXTRAS = ("torch", "tf", "jax", "hf", "keras-hub", "dev")
# MXNet's environment: numpy below 1.24 and what was tested beside it.
MXNET_TESTED = (
    "numpy==1.23.5",
    "scikit-learn==1.5.2",
    "scipy==1.13.1",
    "matplotlib==3.9.4",
    "python-dateutil==2.9.0.post0",
)
MXNET_TESTED_NAMES = {pin.split("==")[0] for pin in MXNET_TESTED}
SETTLE_DAYS = 7  # how far behind today --date now resolves (index mirrors lag)


@dataclass(frozen=True)
class Lock:
    path: str
    what: str
    requirements: tuple[str, ...]
    host: bool = False  # from pyproject.toml's ranges, with hashes
    under_host: bool = False  # shared packages at requirements.lock's versions
    find_links: bool = False  # may take wheels from PIP_FIND_LINKS (recording their hashes)
    notes: tuple[str, ...] = field(default_factory=tuple)


GRID = (
    Lock(
        "requirements.lock",
        "the host environment, cpu variant (scripts/setup.sh)",
        (f"torch=={TORCH}+cpu", f"tensorflow=={TENSORFLOW}"),
        host=True,
        find_links=True,
        notes=("torch: PyTorch's CPU build, from PIP_FIND_LINKS or PyTorch's CPU index.",),
    ),
    Lock(
        "requirements-cuda.lock",
        "the host environment, cuda variant (scripts/setup.sh, where nvidia-smi lists a GPU)",
        (f"torch=={TORCH}", f"tensorflow[and-cuda]=={TENSORFLOW}"),
        host=True,
        notes=(
            "torch from PyPI is its CUDA build and pins its nvidia-* libraries exactly;",
            "TensorFlow's and-cuda extra takes the same libraries by ranges.",
        ),
    ),
    Lock(
        "docker/constraints-torch.txt",
        "bench's PyTorch image (docker/torch.Dockerfile), both variants",
        ("pip", "setuptools", f"torch=={TORCH}", "transformers", *TRIAL_SIDE),
        under_host=True,
        notes=(
            "The cpu variant installs torch's CPU build of the same version.",
            "transformers: model=hf under framework=torch (never keras-hub or TensorFlow).",
        ),
    ),
    Lock(
        "docker/constraints-tf.txt",
        "bench's TensorFlow image (docker/tf.Dockerfile), both variants",
        (
            "pip",
            "setuptools",
            f"tensorflow=={TENSORFLOW}",
            f"tensorflow-cpu=={TENSORFLOW}",
            "keras",
            "keras-hub",
            "tensorflow-text",
            *TRIAL_SIDE,
        ),
        under_host=True,
        notes=(
            "cpu variant: tensorflow-cpu; cuda variant: tensorflow.",
            "keras-hub and tensorflow-text: model=hf under framework=tf (never the torch image).",
        ),
    ),
    Lock(
        "docker/constraints-jax.txt",
        "bench's JAX image (docker/jax.Dockerfile), both variants",
        (
            "pip",
            "setuptools",
            f"jax=={JAX}",
            f"jaxlib=={JAX}",
            f"jax-cuda12-plugin[with-cuda]=={JAX}",
            "keras",
            "flax",
            *TRIAL_SIDE,
        ),
        under_host=True,
        notes=(
            "cpu variant: jax and jaxlib; cuda variant: jax's CUDA 12 plugin and its nvidia-*",
            "libraries from pip as well (the host's driver comes in with the GPUs).",
        ),
    ),
    Lock(
        "docker/constraints-mlflow.txt",
        "the tracking server image of compose.yaml (docker/mlflow.Dockerfile)",
        ("pip", "setuptools", "mlflow"),
        under_host=True,
    ),
    Lock(
        "docker/constraints-mxnet.txt",
        "MXNet's environment: .venv-mxnet (scripts/setup_mxnet.sh) and docker/mxnet.Dockerfile",
        (
            "pip",
            "setuptools",
            f"mxnet=={MXNET}",
            f"mxnet-cu117=={MXNET}",
            *MXNET_TESTED,
            *(name for name in TRIAL_SIDE if name not in MXNET_TESTED_NAMES),
        ),
        notes=(
            "MXNet is retired (Apache attic, 2023): 1.9.1 is its last release.  It uses numpy",
            "aliases removed in numpy 1.24, so numpy stays below it, and so does every package",
            "that needs a newer numpy: a separate environment, never the host's.  numpy and the",
            "packages built on it are held at the releases tested with MXNet here (newer ones",
            "declare numpy 1.23 support, but were built against numpy 2).",
            "cpu variant and host: mxnet; cuda variant: mxnet-cu117 (CUDA 11.7, bundled).",
        ),
    ),
)


def recorded_date() -> str:
    lock = REPO / "requirements.lock"
    found = DATE_LINE.search(lock.read_text()) if lock.exists() else None
    if found is None:
        raise SystemExit("locks: requirements.lock records no date; pass --date YYYY-MM-DD")
    return found.group(1)


def host_constraints(host_lock: Path, out: Path) -> Path:
    """requirements.lock as plain constraints, local version labels (+cpu) dropped."""
    pins = [f"{name}=={version.split('+')[0]}" for name, version in lock_pins(host_lock).items()]
    out.write_text("\n".join(pins) + "\n")
    return out


def local_wheels(lock: Lock, out: Path) -> Path:
    """A folder offering only the wheels of the lock's local builds (``torch==X+cpu``) from
    ``PIP_FIND_LINKS``: a wheel folder may hold other packages too (a newer release of a
    common dependency, with no upload date for ``--exclude-newer`` to judge), and those
    must not decide the lock."""
    out.mkdir(exist_ok=True)
    local = [pin.split("==") for pin in lock.requirements if "+" in pin.partition("==")[2]]
    for folder in os.environ.get("PIP_FIND_LINKS", "").split():
        for name, version in local:
            for wheel in Path(folder).glob(f"{name.replace('-', '_')}-{version}-*.whl"):
                if not (out / wheel.name).exists():
                    (out / wheel.name).symlink_to(wheel.resolve())
    return out


def compile_lock(lock: Lock, date: str, where: Path, host_lock: Path) -> str:
    """The text of ``lock`` as generated now."""
    source = where / (Path(lock.path).name + ".in")
    source.write_text("\n".join(lock.requirements) + "\n")
    out = where / Path(lock.path).name
    args = ["pip", "compile", "--quiet", "--no-header", "--exclude-newer", date]
    args += ["--python-version", PYTHON, "--python-platform", PLATFORM, "-o", str(out)]
    args += ["--no-emit-find-links", "--no-emit-index-url"]
    inputs = [str(source)]
    if lock.host:
        inputs.insert(0, str(REPO / "pyproject.toml"))
        args += [f"--extra={extra}" for extra in HOST_EXTRAS] + ["--generate-hashes"]
    if lock.under_host:
        args += ["--constraint", str(where / "host.txt")]  # generate() writes it once
    if lock.find_links:
        args += ["--find-links", str(local_wheels(lock, where / "wheels"))]
    done = run_uv(*args, *inputs)  # bench's uv runner: its binary, the CA bundle
    if done.returncode != 0:
        raise SystemExit(f"locks: {lock.path} does not resolve:\n{done.stderr.strip()}")
    body = out.read_text()
    # uv names the input files by their temporary paths in its "via" notes
    body = body.replace(str(source), Path(lock.path).name + ".in").replace(str(where) + "/", "")
    body = body.replace(str(REPO / "pyproject.toml"), "pyproject.toml")
    inputs_said = (
        f"pyproject.toml [{','.join(HOST_EXTRAS)}] and " if lock.host else ""
    ) + ", ".join(lock.requirements)
    header = [
        "# Generated by `python scripts/locks.py`: do not edit.",
        f"# {lock.what[0].upper()}{lock.what[1:]}.",
        f"# Resolved with the releases published before {date} (uv --exclude-newer) for",
        f"# Python {PYTHON} on {PLATFORM}, from:",
        *textwrap.wrap(
            inputs_said + ".",
            88,
            initial_indent="#   ",
            subsequent_indent="#   ",
            break_on_hyphens=False,
        ),
    ]
    if lock.under_host:
        header.append("# Packages shared with requirements.lock are at its versions.")
    header += [f"# {note}" for note in lock.notes]
    if not lock.host:
        header.append("# Installed with `pip install --constraint` (no hashes: scripts/locks.py).")
    return "\n".join(header) + "\n" + body


def generate(date: str, where: Path) -> dict[str, str]:
    """Every lock of the grid, in the grid's order: those that do not resolve under the host
    lock side by side first (uv spends most of a resolution waiting on the index), then the
    images' under the new host lock, side by side too."""
    host_lock = where / "requirements.lock.generated"
    texts: dict[str, str] = {}
    with ThreadPoolExecutor(len(GRID)) as pool:
        for under_host in (False, True):
            locks = [lock for lock in GRID if lock.under_host == under_host]
            futures = {
                lock.path: pool.submit(compile_lock, lock, date, where, host_lock) for lock in locks
            }
            texts.update((path, future.result()) for path, future in futures.items())
            if not under_host:
                host_lock.write_text(texts["requirements.lock"])
                host_constraints(host_lock, where / "host.txt")
    return {lock.path: texts[lock.path] for lock in GRID}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/locks.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a lock is stale")
    parser.add_argument(
        "--date",
        default="",
        help="resolve with releases before this date (now: a week before today)",
    )
    args = parser.parse_args(argv)
    if args.date == "now":
        settled = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=SETTLE_DAYS)
        date = settled.strftime("%Y-%m-%dT00:00:00Z")
    elif args.date:
        date = args.date if "T" in args.date else f"{args.date}T00:00:00Z"
    else:
        date = recorded_date()
    with tempfile.TemporaryDirectory() as tmp:
        texts = generate(date, Path(tmp))
    stale = []
    for path, text in texts.items():
        target = REPO / path
        old = target.read_text() if target.exists() else ""
        if old == text:
            continue
        stale.append(path)
        if args.check:
            diff = difflib.unified_diff(
                old.splitlines(), text.splitlines(), path, f"{path} (generated)", lineterm="", n=0
            )
            print("\n".join(list(diff)[:40]), file=sys.stderr)
        else:
            target.write_text(text)
    if args.check and stale:
        print(
            f"locks: {len(stale)} stale: {', '.join(stale)}; run .venv/bin/python "
            "scripts/locks.py (after a change to pyproject.toml or to the grid)",
            file=sys.stderr,
        )
        return 1
    verb = "up to date" if args.check else f"written ({len(stale)} changed)"
    print(f"locks: {len(texts)} locks {verb}, releases before {date}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
