"""The test suite's time per tier, against a committed baseline: CI fails when the e2e tier
grows past the margin, so that growth is a decision (a new baseline, in its own commit, with
the reason), not drift.

    python scripts/test_times.py calibrate           # seconds of the reference workload
    python scripts/test_times.py check TIMES.json    # print the tiers; exit 1 past the margin
    python scripts/test_times.py write TIMES.json    # make TIMES.json the new baseline

TIMES.json is what ``tests/conftest.py`` writes at the end of a pytest session when
``BENCH_TEST_TIMES`` names a file: the summed call, set-up and tear-down time of every test,
per tier (``e2e``; ``slow``: slow units; ``fast``: the rest; ``horovod``, also counted in its
own tier), the test counts, the slowest tests, and what fixtures waited for builds that run
beside the suite (the Docker images, Horovod), which the e2e total is compared without.
``scripts/test.sh`` sets it, times the reference workload before and after pytest, and runs
``check``.

Machines differ (CI's kind runs up to twice as slow as the developers'), so the e2e total is
compared in units of a reference workload timed on the same machine in the same run: the
CPU time of a single-threaded pure-Python loop (the e2e tier is mostly interpreters
starting, importing and building models, one core each), best of five, its mean before and
after pytest.  The
baseline (``tests/test_times_baseline.json``) records both figures; a run passes when
``e2e_s / calibration_s`` stays within ``margin`` of the baseline's ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "tests" / "test_times_baseline.json"
MARGIN = 0.20  # e2e may grow 20% (in calibrated units) before CI says so
ROUNDS = 5


def workload() -> int:
    """A fixed pure-Python job of about half a second on the developers' machine."""
    total = 0
    for i in range(6_000_000):
        total = (total + i * i) % 1_000_003
    return total


def calibrate() -> float:
    """CPU seconds of :func:`workload`, the best of ``ROUNDS``: the machine's speed, not its
    load (the Docker images building beside it, or not, on a machine that has them)."""
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.process_time()
        workload()
        best = min(best, time.process_time() - start)
    return best


def _load(path: Path) -> dict:
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("tiers"), dict):
        raise SystemExit(f"test_times: {path} holds no tiers")
    return data


def _calibration(times: dict) -> float:
    figures = [float(v) for v in times.get("calibration_s", []) if float(v) > 0]
    if not figures:
        raise SystemExit("test_times: no calibration figure (scripts/test.sh times it)")
    return sum(figures) / len(figures)


def own_seconds(times: dict) -> float:
    """The e2e tier's seconds less what its fixtures waited for builds beside the suite (the
    Docker images, Horovod): those measure the machine's caches, not the tests."""
    waited = sum(float(s) for s in times.get("waits", {}).values())
    return max(0.0, float(times["tiers"]["e2e"]["seconds"]) - waited)


def summary(times: dict) -> str:
    lines = []
    for tier, figures in sorted(times["tiers"].items()):
        lines.append(
            f"  {tier:8} {figures['count']:5d} tests  {figures['seconds']:8.1f} s of test time"
        )
    for what, seconds in sorted(times.get("waits", {}).items()):
        lines.append(f"  waited   {seconds:8.1f} s for the {what} (not counted as test time)")
    return "\n".join(lines)


def check(times: dict, baseline: dict) -> tuple[bool, str]:
    """Whether the e2e tier's calibrated total is within the margin of the baseline's."""
    e2e, base_e2e = times["tiers"].get("e2e"), baseline["tiers"].get("e2e")
    if not e2e or not base_e2e:
        return True, "test_times: no e2e tier in this run or the baseline: nothing to compare"
    now = own_seconds(times) / _calibration(times)
    then = own_seconds(baseline) / _calibration(baseline)
    margin = float(baseline.get("margin", MARGIN))
    growth = now / then - 1
    text = (
        f"test_times: e2e {own_seconds(times):.0f} s = {now:.0f} calibration units "
        f"(baseline {own_seconds(baseline):.0f} s = {then:.0f} units, "
        f"{baseline.get('date', '?')}): "
        f"{growth:+.1%}, margin {margin:.0%}"
    )
    if growth > margin:
        text += (
            "\ntest_times: the e2e tier grew past its margin.  Make it cheaper (a test below the"
            " CLI, one sweep shared by several assertions), or, deliberately, refresh the"
            " baseline in its own commit saying why: python scripts/test_times.py write FILE"
        )
        return False, text
    return True, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("calibrate", help="print the reference workload's seconds")
    for name in ("check", "write"):
        cmd = sub.add_parser(name)
        cmd.add_argument("times", type=Path, help="the file BENCH_TEST_TIMES named")
        cmd.add_argument("--baseline", type=Path, default=BASELINE)
    args = parser.parse_args(argv)
    if args.command == "calibrate":
        print(f"{calibrate():.4f}")
        return 0
    times = _load(args.times)
    print(summary(times))
    if args.command == "write":
        times["date"] = time.strftime("%Y-%m-%d")
        times["margin"] = MARGIN
        times.pop("slowest", None)
        args.baseline.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
        print(f"test_times: {args.baseline} written")
        return 0
    if not args.baseline.is_file():
        print(f"test_times: no baseline at {args.baseline}: write one from a whole run (write)")
        return 1
    ok, text = check(times, _load(args.baseline))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
