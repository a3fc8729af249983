"""The wheels bench needs beside an interpreter that already has its framework: a site's
PyTorch module, an NGC container, the lent GPU machine's ``/opt/torch/.venv``.  bench's own
environment is not there and cannot be made (no network); these wheels, installed with
``pip install --no-index --no-deps --target DIR`` and put on ``PYTHONPATH``, make
``python -m bench`` run on that interpreter's torch with a local sqlite MLflow store.

What is carried: Hydra (with the submitit launcher, whose plugin bench's Slurm launcher
builds on), MLflow's client (``mlflow-skinny``, with SQLAlchemy and Alembic for the sqlite
store), and whatever of their needs the target lacks: ``pip download`` resolves the set for
the target's Python and platform (CPython 3.12, manylinux x86_64 by default) under the
versions ``requirements.lock`` pins, and the packages the target already has
(``--have``, one name a line; by default ``scripts/gpu_host_packages.txt``, the lent
machine's image) are left out.

    python scripts/gpu_wheels.py --out .whl          # fetch the set, print it and its size
    python scripts/gpu_wheels.py --check             # resolve it, check its size, keep nothing

Exit 1 when the set cannot be resolved or is over ``--max-mib`` (50 MiB: the lent machine
takes 64 MiB of working tree and wheels in all).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# What bench itself imports on the host side of a trial, beyond its framework and what a
# framework's environment usually has (numpy, psutil, pyyaml, packaging, requests, ...).
WANTED = (
    "hydra-core",
    "omegaconf",
    "hydra-submitit-launcher",
    "mlflow-skinny",
    "mlflow-tracing",
    "sqlalchemy",
    "alembic",
    # mode=serve's load generator (MLPerf's LoadGen, a compiled module) and goal=accuracy's
    # MLPerf log, so that the GPU check can serve and train to accuracy there too.
    "mlcommons-loadgen",
    "mlperf-logging",
    # framework=jax's Keras models (model.source=bench) run on Keras 3's JAX backend: the
    # lent machine has JAX and Flax but no Keras (issue 53).
    "keras",
)
# Tags of wheels that install on CPython 3.12 on Linux x86_64, glibc 2.17 and newer.
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_34_x86_64")  # fmt: skip
HAVE = REPO / "scripts" / "gpu_host_packages.txt"
# Needs published as a source archive only: pure Python, so built into a wheel here first.
SOURCE_ONLY = ("antlr4-python3-runtime",)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def have(path: Path) -> set[str]:
    """Package names, one a line ('#' starts a comment)."""
    names = (ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines())
    return {canonical(n) for n in names if n}


def wheel_name(path: Path) -> str:
    return canonical(path.name.split("-", 1)[0])


def constraints(target: Path) -> Path:
    """requirements.lock's pins of the wanted packages and their needs, as a constraints
    file (hashes dropped: another Python's wheels have other hashes)."""
    from bench.envs.environments import lock_pins

    pins = lock_pins(REPO / "requirements.lock")
    drop = {"torch", "tensorflow", "numpy"}  # the target's own
    lines = [f"{n}=={v.split('+', 1)[0]}" for n, v in sorted(pins.items()) if n not in drop]
    target.write_text("\n".join(lines) + "\n")
    return target


def fetch(out: Path, python_version: str, present: set[str]) -> list[Path]:
    """Resolve and download the set into ``out``; remove what the target has.  Raises
    RuntimeError with pip's own words when it cannot be resolved."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pins = constraints(Path(tmp, "constraints.txt"))
        built = Path(tmp, "built")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--wheel-dir", str(built), "--constraint", str(pins), *SOURCE_ONLY],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip()[-2000:] or f"pip exited {done.returncode}")
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--implementation", "cp",
            "--python-version", python_version, "--dest", str(out),
            "--constraint", str(pins), "--find-links", str(built),
            *[f"--platform={p}" for p in PLATFORMS], *WANTED,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-2000:] or f"pip exited {done.returncode}")
    kept = []
    for wheel in sorted(out.glob("*.whl")):
        if wheel_name(wheel) in present:
            wheel.unlink()
        else:
            kept.append(wheel)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REPO / ".whl", help="where the wheels go")
    parser.add_argument("--python-version", default="3.12", help="the target's Python (3.12)")
    parser.add_argument("--have", type=Path, default=HAVE, help="packages the target has")
    parser.add_argument("--max-mib", type=float, default=50.0)
    parser.add_argument("--check", action="store_true", help="resolve and size, keep nothing")
    args = parser.parse_args(argv)
    present = have(args.have)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) if args.check else args.out
        if not args.check:
            for old in out.glob("*.whl"):  # one version of each: two would stop the install
                old.unlink()
        try:
            wheels = fetch(out, args.python_version, present)
        except RuntimeError as exc:
            print(f"gpu_wheels: the set does not resolve for CPython {args.python_version}:\n{exc}")
            return 1
        sizes = {w.name: w.stat().st_size for w in wheels}
    total = sum(sizes.values()) / 2**20
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"{size / 2**20:7.2f} MiB  {name}")
    where = "resolved, nothing kept" if args.check else f"in {args.out}"
    print(f"gpu_wheels: {len(sizes)} wheels, {total:.1f} MiB ({where}; at most {args.max_mib:g})")
    return 0 if total <= args.max_mib else 1


if __name__ == "__main__":
    sys.exit(main())
