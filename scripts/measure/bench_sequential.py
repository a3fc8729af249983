"""The error rates of repeats=auto's stopping rule (bench.analysis.sequential), by simulation.

Simulated sweeps of one comparison: each side one run per round, per-run times log-normal
with the coefficient of variation bench records (1%, 3%, 8% with 2-s windows), looked at
after rounds 2..max.  For identical sides (A/A) it prints how often repeats=auto ends in a
false "faster" verdict, against re-testing at the 5% level after every round (naive); for a
true 5% difference, how often it is found (power); and the mean number of rounds.

    .venv/bin/python scripts/measure/bench_sequential.py [--sweeps 2000] [--max-rounds 10]
"""

from __future__ import annotations

import argparse
import time

from bench.analysis.sequential import DEFAULT_MARGIN, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        f"{args.sweeps} simulated sweeps per row, at most {args.max_rounds} rounds, "
        f"equivalence margin ±{100 * args.margin:g}%"
    )
    head = ["CV", "A/A false 'faster' (auto)", "A/A false 'faster' (naive)",
            "A/A 'equivalent'", "A/A mean rounds", "5% found (auto)", "5% found (naive)",
            "5% mean rounds"]  # fmt: skip
    print(" | ".join(head))
    for i, cv in enumerate((0.01, 0.03, 0.08)):
        same = simulate(args.sweeps, cv, 1.0, args.max_rounds, args.margin, seed=2 * i)
        apart = simulate(args.sweeps, cv, 1.05, args.max_rounds, args.margin, seed=2 * i + 1)
        row = [f"{100 * cv:g}%", f"{100 * same.faster:.1f}%", f"{100 * same.naive_faster:.1f}%",
               f"{100 * same.equivalent:.1f}%", f"{same.rounds:.1f}", f"{100 * apart.faster:.1f}%",
               f"{100 * apart.naive_faster:.1f}%", f"{apart.rounds:.1f}"]  # fmt: skip
        print(" | ".join(row), flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
