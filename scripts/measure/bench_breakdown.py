"""How well the phase breakdown adds up: ``breakdown_sum_pct`` (the phases' sum in percent of
a whole step timed beside them) for each framework, over a few fresh trials.

The breakdown's accuracy is a property of the machine's quiet as much as of the method (a
loaded or throttled CPU stretches the split steps, each with a sync of its own, more than
whole steps), so it is measured here and printed, not asserted by a timed test.  On a quiet
machine the sum lands within about 10% of the step.

    .venv/bin/python scripts/measure/bench_breakdown.py [--model resnet18]
        [--frameworks torch,tf,mxnet] [--trials 3] [--batch-size 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PHASES = ("data", "forward", "backward", "optimizer")

TRIAL = """
import json, sys
from bench.core.config import BenchConfig, from_dict
from bench.trial.loop import run_trial
result = run_trial(from_dict(BenchConfig, json.loads(sys.argv[1])))
assert result.status == "ok", result.error
print(json.dumps(result.summary))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--frameworks", default="torch,tf,mxnet")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from bench.core.config import BenchConfig, TelemetryConfig, to_dict
    from bench.envs import interpreters

    print(f"model={args.model} batch={args.batch_size} threads={args.threads}, "
          f"{args.trials} fresh trials a framework, 20 split and 20 whole steps each")  # fmt: skip
    print(f"{'framework':10} {'step ms':>8} " + " ".join(f"{p + ' ms':>12}" for p in PHASES)
          + f" {'sum %':>7}  sum % per trial")  # fmt: skip
    for framework in args.frameworks.split(","):
        cfg = BenchConfig(
            batch_size=args.batch_size,
            epochs=1,
            steps_per_epoch=20,
            warmup_steps=1,
            threads=args.threads,
            breakdown=True,
            telemetry=TelemetryConfig(enabled=False),
        )
        cfg.framework.name, cfg.model.name = framework, args.model
        runs = []
        for _ in range(args.trials):
            out = subprocess.run(
                [interpreters.python_for(framework), "-c", TRIAL, json.dumps(to_dict(cfg))],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        med = {k: statistics.median(r.get(k, float("nan")) for r in runs)
               for k in ["time_step_ms", *(f"time_{p}_ms" for p in PHASES)]}  # fmt: skip
        sums = [r.get("breakdown_sum_pct", float("nan")) for r in runs]
        print(
            f"{framework:10} {med['time_step_ms']:8.2f} "
            + " ".join(f"{med[f'time_{p}_ms']:12.2f}" for p in PHASES)
            + f" {statistics.median(sums):7.1f}  "
            + " ".join(f"{s:.1f}" for s in sums)
        )


if __name__ == "__main__":
    main()
