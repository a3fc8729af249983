"""``python -m bench.report``: the comparison report of a sweep or an experiment.

python -m bench.report                      # the latest sweep in mlruns/mlflow.db
python -m bench.report --experiment NAME    # every run of an experiment
python -m bench.report --sweep RUN_ID       # one sweep (its parent run's id)
python -m bench.report --claims FILE        # ... with the claims in FILE checked first
python -m bench.report --baseline SWEEP_OR_EXPERIMENT [--fail-on-regression PCT]
                                            # ... against the same configurations there
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from bench import tracking
from bench.core.config import TrackingConfig
from bench.report import HISTORY_KEYS, baseline, build, claims, warm_imports, write
from bench.report.trials import REPORT_TAGS, to_trial
from bench.tracking.recent import store_or_last


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("bench.report: interrupted; no report was written or logged", file=sys.stderr)
        return 130


def _head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` if it is a regular file; opened without waiting,
    so a FIFO or a device raises OSError ("not a regular file") instead of blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file: a FIFO, a device, a socket or a folder")
        return os.read(fd, size)
    finally:
        os.close(fd)


def _store_problem(uri: str) -> str:
    """Why a local sqlite ``--uri`` is no store to report on ('' if it may be): a file
    that is not SQLite is not handed to SQLAlchemy (77 lines of its traceback), nor is a
    FIFO or a device, which would block it."""
    if not uri.startswith("sqlite:///"):
        return ""
    path = Path(uri[len("sqlite:///") :])
    if not os.path.lexists(path):
        return ""  # said by tracking.load_runs: no MLflow store at ... (nothing is created)
    try:
        header = _head(path, 16)
    except OSError as exc:
        return f"--uri: {path} cannot be read ({exc.strerror})"
    if header != b"SQLite format 3\x00":
        return f"--uri: {path} is not an SQLite database (an MLflow store)"
    return ""


def _path_problem(args: argparse.Namespace) -> str:
    """Why ``--claims`` or ``--out`` cannot be used ('' if they can): a claims file must be
    a regular file (a FIFO would block the read), the output a folder or nothing yet."""
    if args.claims is not None and os.path.lexists(args.claims):
        try:
            _head(args.claims, 0)
        except OSError as exc:
            return f"--claims: {args.claims} cannot be read ({exc.strerror})"
    if os.path.lexists(args.out) and not args.out.is_dir():
        return f"--out: {args.out} is not a folder"
    return ""


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.report",
        description="Write the comparison report (HTML and Markdown) of runs in MLflow.",
    )
    parser.add_argument(
        "--uri",
        default=None,
        help=f"tracking URI (default: the last sweep's store, else {TrackingConfig.uri})",
    )
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
    parser.add_argument(
        "--baseline",
        help="compare each configuration with the same one in this sweep (its parent run's "
        "id) or experiment (its name), in the same store",
    )
    parser.add_argument(
        "--fail-on-regression",
        type=float,
        metavar="PCT",
        help="with --baseline: exit 1 if any significant regression exceeds PCT percent",
    )
    args = parser.parse_args(argv)
    given = args.uri is not None
    args.uri, why = store_or_last(args.uri, TrackingConfig.uri)
    if args.fail_on_regression is not None and not args.baseline:
        print("bench.report: --fail-on-regression needs --baseline", file=sys.stderr)
        return 2
    problem = _path_problem(args)
    if problem:
        print(f"bench.report: {problem}", file=sys.stderr)
        return 2
    checked: list[claims.Claim] = []
    if args.claims is not None:
        try:
            checked = claims.load(args.claims)
        except (OSError, claims.ClaimError) as exc:
            print(f"bench.report: --claims: {exc}", file=sys.stderr)
            return 2
    args.uri = tracking.take_credentials(args.uri)  # to MLflow's variables, never printed
    problem = _store_problem(args.uri)
    if problem:
        print(f"bench.report: {problem}", file=sys.stderr)
        return 2
    imported = warm_imports()  # while the runs are read
    try:
        runs = tracking.load_runs(
            args.uri,
            experiment=args.experiment,
            sweep=args.sweep,
            history_keys=HISTORY_KEYS,
            tag_prefixes=REPORT_TAGS,
        )
    except LookupError as exc:
        print(f"bench.report: {exc}", file=sys.stderr)
        return 2
    if args.claims is None and runs.sweep_id:  # the sweep's own claims, where it kept any
        try:
            kept = tracking.logged_claims(args.uri, runs.sweep_id)
            checked = claims.parse(kept) if kept else []
        except (LookupError, claims.ClaimError) as exc:
            print(f"bench.report: the sweep's claims: {exc}", file=sys.stderr)
            return 2
        if checked:
            print(f"bench.report: checking the sweep's own {len(checked)} claim(s)")
    try:  # the sweep's drift check, by round (none for a whole experiment)
        references = tracking.sweep_references(args.uri, runs.sweep_id) if runs.sweep_id else []
    except LookupError as exc:
        print(f"bench.report: {exc}", file=sys.stderr)
        return 2
    imported()  # the build imports the same packages: never two threads at once
    report = build(runs, claims=checked, references=references)
    changes: list[baseline.Change] = []
    if args.baseline:
        try:
            now = [to_trial(r) for r in runs.records]
            old = _baseline_runs(args.uri, args.baseline, baseline.needed(now))
        except LookupError as exc:
            print(f"bench.report: --baseline: {exc}", file=sys.stderr)
            return 2
        changes = baseline.compare(now, [to_trial(r) for r in old.records])
        name = f"sweep {old.sweep_name or old.sweep_id}" if old.sweep_id else (
            f"experiment {old.experiment!r}")  # fmt: skip
        report.sections.insert(1, baseline.section(changes, name))
        for c in changes:
            if c.kind in (baseline.REGRESSION, baseline.IMPROVEMENT):
                print(f"{c.framework} {c.label}: {c.text}")
    page = write(report, args.out)
    print(f"{page}  ({args.out / 'report.md'})")
    if not given:
        print(f"from {args.uri} ({why})")
    if runs.sweep_id and not args.no_log:
        where = tracking.log_report(args.uri, runs.sweep_id, args.out)
        print(f"logged to run {runs.sweep_id}: {where}")
    if args.fail_on_regression is not None:
        worse = baseline.failing(changes, args.fail_on_regression)
        if worse:
            print(
                f"bench.report: {len(worse)} significant regression(s) above "
                f"{args.fail_on_regression:g}% against the baseline",
                file=sys.stderr,
            )
            return 1
    return 0


def _baseline_runs(
    uri: str, name: str, only: frozenset[tuple[str, str | None]] | None = None
) -> tracking.RunSet:
    """A sweep by its parent run's id, else an experiment by its name; only the runs of the
    (framework, model) pairs ``only`` (:func:`baseline.needed`), where given."""
    import re

    if re.fullmatch(r"[0-9a-f]{32}", name):
        return tracking.load_runs(uri, sweep=name, tag_prefixes=REPORT_TAGS, only=only)
    return tracking.load_runs(uri, experiment=name, tag_prefixes=REPORT_TAGS, only=only)


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
