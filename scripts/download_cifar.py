"""Download the python versions of CIFAR-10/100 into a data root (needs internet access).

    .venv/bin/python scripts/download_cifar.py cifar10 [cifar100] [--root data]

The archives are checked against their published MD5 sums and kept as they are: bench reads
the .tar.gz directly, so both frameworks read the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
from pathlib import Path

SOURCES = {
    "cifar10": ("cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),
    "cifar100": ("cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"),
}
BASE_URL = "https://www.cs.toronto.edu/~kriz/"


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
    if md5(partial) != expected:
        partial.unlink()
        raise SystemExit(f"{filename}: MD5 mismatch, download discarded")
    partial.rename(target)
    print(f"\n{target}: ok", file=sys.stderr)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", choices=sorted(SOURCES))
    parser.add_argument("--root", type=Path, default=Path("data"))
    args = parser.parse_args()
    for name in args.names:
        fetch(name, args.root)


if __name__ == "__main__":
    main()
