"""``python -m bench.report``: the comparison report of a sweep or an experiment.

python -m bench.report                      # the latest sweep in mlruns/mlflow.db
python -m bench.report --experiment NAME    # every run of an experiment
python -m bench.report --sweep RUN_ID       # one sweep (its parent run's id)
python -m bench.report --claims FILE        # ... with the claims in FILE checked first
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import tracking
from bench.report import HISTORY_KEYS, build, claims, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.report",
        description="Write the comparison report (HTML and Markdown) of runs in MLflow.",
    )
    parser.add_argument("--uri", default="sqlite:///mlruns/mlflow.db", help="tracking URI")
    parser.add_argument(
        "--experiment", help="report every run of this experiment (default: the latest sweep)"
    )
    parser.add_argument(
        "--sweep", help="report one sweep: its parent run's id, or 'latest' (in --experiment)"
    )
    parser.add_argument("--out", default="report", type=Path, help="output directory")
    parser.add_argument(
        "--no-log", action="store_true", help="do not log the report to the sweep's parent run"
    )
    parser.add_argument(
        "--claims",
        type=Path,
        help="a YAML list of claims to check against the runs (see docs/report.md, 'Claims')",
    )
    args = parser.parse_args(argv)
    checked: list[claims.Claim] = []
    if args.claims is not None:
        try:
            checked = claims.load(args.claims)
        except (OSError, claims.ClaimError) as exc:
            print(f"bench.report: --claims: {exc}", file=sys.stderr)
            return 2
    try:
        runs = tracking.load_runs(
            args.uri, experiment=args.experiment, sweep=args.sweep, history_keys=HISTORY_KEYS
        )
    except LookupError as exc:
        print(f"bench.report: {exc}", file=sys.stderr)
        return 2
    page = write(build(runs, claims=checked), args.out)
    print(f"{page}  ({args.out / 'report.md'})")
    if runs.sweep_id and not args.no_log:
        where = tracking.log_report(args.uri, runs.sweep_id, args.out)
        print(f"logged to run {runs.sweep_id}: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
