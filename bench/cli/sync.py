"""``python -m bench.cli.sync [--uri URI] [--spool DIR]``: log spooled trial records to MLflow.

Records are spooled per tracking URI under bench's per-user state directory
(``$BENCH_STATE_DIR``, ``$XDG_STATE_HOME/bench`` or ``~/.local/state/bench``), so this finds
them from any directory.  A server still out of reach is said in one line, its records
stay and the other stores' are synced; then it exits 1.  A record that is not what bench
writes (a file name that leaves its folder, a field of the wrong type) is refused in one
line and stays; then it exits 1 too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.tracking import redact, spool_root, spooled, sync_spool, take_credentials


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print(
            "bench.cli.sync: interrupted; every record not yet synced stays in the spool (run "
            "bench sync again)",
            file=sys.stderr,
        )
        return 130


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli.sync", description=__doc__)
    parser.add_argument("--uri", help="tracking URI to sync to (default: each record's own)")
    parser.add_argument(
        "--spool", type=Path, default=None, help=f"one spool folder (default: all, {spool_root()})"
    )
    args = parser.parse_args(argv)
    if args.uri:  # a password in it goes to MLflow's credential variables, never printed
        args.uri = take_credentials(args.uri)
    if args.spool is not None and not args.spool.is_dir():
        print(f"bench.cli.sync: --spool: {args.spool} is not a directory", file=sys.stderr)
        return 2
    where = args.spool or spool_root()
    waiting = len(spooled(args.spool))
    refused: list[Path] = []
    failed: list[str] = []  # stores out of reach: said in one line each, their records stay
    try:
        count = sync_spool(args.spool, args.uri, refused, failed)
    except Exception as exc:  # noqa: BLE001 - one line, the records stay
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(
            f"bench.cli.sync: could not log to the tracking store ({type(exc).__name__}: "
            f"{redact(reason)[:300]}); {waiting} record(s) stay in {where}",
            file=sys.stderr,
        )
        return 1
    print(f"synced {count} trial record(s) from {where}")
    if refused:
        print(
            f"bench.cli.sync: {len(refused)} record(s) refused (above) stay in {where}",
            file=sys.stderr,
        )
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
