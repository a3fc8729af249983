"""bench from Python: a sweep run and its results and verdicts read back as pandas tables
(docs/python-api.md).  Run it as ``python examples/api_example.py [STORE]``; CI runs it
(tests/e2e/test_api_example.py) with a store of its own and tiny windows."""

from __future__ import annotations

import sys

import bench

STORE = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///mlruns/mlflow.db"
TINY = {"batch_size": 4, "epochs": 2, "steps_per_epoch": 2, "warmup_steps": 1}

if __name__ == "__main__":
    # Keyword form: a list sweeps its values; tracking_uri is tracking.uri.
    results = bench.run(
        "model=lenet5", framework=["torch", "tf"], repeats=2, tracking_uri=STORE, quiet=True, **TINY
    )
    print(results[["framework.name", "status", "trial_samples_per_s"]].to_string(index=False))
    verdicts = bench.compare(STORE)
    print(verdicts[["compared", "verdict", "ratio", "ci_low", "ci_high"]].to_string(index=False))
    try:
        bench.run("modle=lenet5", tracking_uri=STORE, quiet=True)
    except bench.SweepRefused as refused:
        print(f"refused: {refused}")
