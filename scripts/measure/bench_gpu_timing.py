"""What bench's way of timing a step costs on a GPU, and the device's peak matrix rate.

A GPU runs behind the host: a loop that synchronizes after every step (bench's ``step``
timing) makes the device wait for the host to launch the next step's first kernels, which
a loop that synchronizes only at the window's edges does not.  For each case (torch, one
model, size and batch; fp32 with TF32 off) this builds bench's own torch session and times
the same steps three ways, interleaved over a few rounds on one warm session:

- ``step``: bench's timing loop with ``timing=step`` (host clock, sync after every step);
- ``events``: bench's timing loop with ``timing=events`` (CUDA events after every step,
  one host sync at each edge of the window);
- ``bare``: a bare loop, ``step(next_batch())`` ``n`` times between two syncs.

and prints each one's samples/s (median of the rounds) and its ratio to the bare loop.
``--peak`` also measures the device's matrix-product rate at each compute precision (the
peak bench's MFU is taken against).  ``--json FILE`` writes the figures.  On a host
without a GPU it runs the same on the CPU (small cases), where both timings equal the bare
loop: a rehearsal of the script, not a figure.

    python scripts/measure/bench_gpu_timing.py --peak
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

GPU_CASES = [("resnet18", 32, 32), ("resnet50", 224, 64)]  # launch-bound, compute-bound
CPU_CASES = [("lenet5", 32, 32), ("resnet18", 32, 8)]


def _session(model: str, size: int, batch: int, device: str) -> tuple[Any, Any]:
    from bench.core.config import BenchConfig, ModelConfig, resolved_threads
    from bench.trial import data, frameworks

    cfg = BenchConfig(
        model=ModelConfig(name=model), image_size=size, batch_size=batch, device=device,
        epochs=1, telemetry=dataclasses.replace(BenchConfig().telemetry, enabled=False),
    )  # fmt: skip
    adapter = frameworks.load("torch")
    adapter.configure(cfg, resolved_threads(cfg))
    return cfg, adapter.prepare(cfg, data.load(cfg))


def _bare(session: Any, steps: int, batch: int) -> float:
    session.sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        session.step(session.next_batch())
    session.sync()
    return steps * batch / (time.perf_counter() - t0)


def time_case(model: str, size: int, batch: int, device: str, rounds: int, window_s: float):
    from bench.trial.loop import _timed_epochs, _warm_up

    cfg, session = _session(model, size, batch, device)
    _warm_up(session, 10)
    session.sync()
    t0 = time.perf_counter()
    for _ in range(5):
        session.step(session.next_batch())
    session.sync()
    per_step = (time.perf_counter() - t0) / 5
    steps = max(5, int(window_s / per_step))
    rates: dict[str, list[float]] = {"step": [], "events": [], "bare": []}
    used: dict[str, str] = {}
    order = ["step", "events", "bare"]
    for r in range(rounds):
        for method in order[r % 3 :] + order[: r % 3]:  # each method first once
            if method == "bare":
                rates["bare"].append(_bare(session, steps, batch))
                continue
            timed = dataclasses.replace(cfg, timing=method, steps_per_epoch=steps)
            from bench.trial.loop import timing_method

            used[method] = timing_method(session, timed)
            (record,), _ = _timed_epochs(session, timed, None)
            rates[method].append(record.samples_per_s)
    session.take_mean_loss()
    median = {m: statistics.median(v) for m, v in rates.items()}
    return {
        "case": f"{model} {size} px batch {batch}",
        "steps": steps,
        "step_ms": per_step * 1e3,
        "samples_per_s": median,
        "ratio_to_bare": {m: median[m] / median["bare"] for m in ("step", "events")},
        "method_used": used,
        "rounds": rates,
    }


def peaks(device: str) -> dict[str, float]:
    import torch

    from bench.trial.frameworks.torch_adapter import matmul_peak

    dev = torch.device(device)
    return {p: matmul_peak(dev, p) for p in ("bf16", "fp16", "tf32", "fp32")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=1.0, help="seconds a window lasts")
    parser.add_argument("--peak", action="store_true", help="measure the matrix-product peak")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU (no GPU: a rehearsal)"
    print(f"bench_gpu_timing: {name}, torch {torch.__version__}", flush=True)
    out: dict[str, Any] = {"device": name, "torch": torch.__version__, "cases": []}
    if args.peak and device == "cuda":
        out["peak_flops_per_s"] = peaks(device)
        shown = ", ".join(f"{p} {v / 1e12:,.0f}" for p, v in out["peak_flops_per_s"].items())
        print(f"matrix-product peak (TFLOP/s, 8192^3): {shown}", flush=True)
    cases = GPU_CASES if device == "cuda" else CPU_CASES
    print(f"{'case':<28} {'step':>10} {'events':>10} {'bare':>10}  step/bare  events/bare")
    for model, size, batch in cases:
        found = time_case(model, size, batch, device, args.rounds, args.window_s)
        out["cases"].append(found)
        rate, ratio = found["samples_per_s"], found["ratio_to_bare"]
        print(
            f"{found['case']:<28} {rate['step']:>10,.0f} {rate['events']:>10,.0f} "
            f"{rate['bare']:>10,.0f}  {ratio['step']:9.3f}  {ratio['events']:11.3f}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
