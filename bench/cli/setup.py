"""``bench setup mxnet|horovod``: make what some runs need beyond bench's own environment
(:mod:`bench.envs.setup`); exit 1 when a set-up script fails, 2 on bad input."""

from __future__ import annotations

import argparse
import sys

from bench.envs.setup import WHAT, SetupError, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench setup",
        description="Make what some runs need beyond bench's own environment.",
        epilog="\n".join(f"{name}: {what}" for name, what in WHAT.items()),
    )
    parser.add_argument("names", nargs="+", choices=sorted(WHAT), metavar="{mxnet,horovod}")
    args = parser.parse_args(argv)
    for name in dict.fromkeys(args.names):
        try:
            run(name)
        except SetupError as exc:
            print(f"bench setup: {exc}", file=sys.stderr)
            return 1
        print(f"bench setup: {name} ready")
    return 0


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
