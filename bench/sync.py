"""``python -m bench.sync [--uri URI] [--spool DIR]``: log spooled trial records to MLflow."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.tracking import SPOOL_DIR, sync_spool


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sync", description=__doc__)
    parser.add_argument("--uri", help="tracking URI to sync to (default: each record's own)")
    parser.add_argument("--spool", type=Path, default=SPOOL_DIR, help="spool directory")
    args = parser.parse_args(argv)
    count = sync_spool(args.spool, args.uri)
    print(f"synced {count} trial record(s) from {args.spool}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
