"""``bench data download cifar10 [cifar100] [--root data]``: fetch the python versions of
CIFAR-10/100 into a data root.

The archives are checked against their published MD5 sums and kept as they are: bench reads
the .tar.gz directly, so every framework reads the same bytes.  Where the machine cannot
reach the archive's site, it prints the manual steps (the address, the sum, where to put the
file) and exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
import urllib.error
import urllib.request
from pathlib import Path

from bench.trial.data import CIFAR

# The archives and their published sums: bench.trial.data's, which checks them before reading.
SOURCES = {name: (spec.archive, spec.md5) for name, spec in CIFAR.items()}
BASE_URL = "https://www.cs.toronto.edu/~kriz/"


class Unreachable(Exception):
    """The archive's site did not answer."""


def md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(name: str, root: Path) -> Path:
    filename, expected = SOURCES[name]
    target = root / filename
    if target.is_file() and md5(target) == expected:
        print(f"{target}: already present")
        return target
    root.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    print(f"downloading {BASE_URL + filename} -> {target}", file=sys.stderr)
    try:
        with (
            urllib.request.urlopen(BASE_URL + filename, timeout=60) as response,
            open(partial, "wb") as out,
        ):
            total = int(response.headers.get("Content-Length", 0))
            done = 0
            for block in iter(lambda: response.read(1 << 20), b""):
                out.write(block)
                done += len(block)
                if total and sys.stderr.isatty():
                    print(f"\r  {done / total:6.1%}", end="", file=sys.stderr)
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise Unreachable(str(getattr(exc, "reason", exc))) from exc
    if md5(partial) != expected:
        partial.unlink()
        raise SystemExit(f"bench data: {filename}: MD5 mismatch, download discarded")
    partial.rename(target)
    print(f"{target}: ok", file=sys.stderr)
    return target


def manual_steps(name: str, root: Path) -> str:
    filename, expected = SOURCES[name]
    return (
        f"  on a machine with internet access, fetch {BASE_URL + filename}\n"
        f"  check it: md5sum {filename}  (must print {expected})\n"
        f"  copy it to {shlex.quote(str(root / filename))} here; bench reads the .tar.gz as it is"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench data", description="Fetch the data sets bench reads from disk."
    )
    sub = parser.add_subparsers(dest="action", required=True)
    get = sub.add_parser("download", help="download CIFAR-10/100 archives, checked by MD5")
    get.add_argument("names", nargs="+", choices=sorted(SOURCES))
    get.add_argument("--root", type=Path, default=Path("data"), help="the data.root to fill")
    args = parser.parse_args(argv)
    for name in args.names:
        try:
            fetch(name, args.root)
        except Unreachable as exc:
            print(
                f"bench data: {BASE_URL} cannot be reached from here ({exc}); to get {name}:\n"
                + manual_steps(name, args.root),
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
