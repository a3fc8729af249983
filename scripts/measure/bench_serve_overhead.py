"""What bench's serving costs on latency and throughput: a bare LoadGen harness around the same
torch model against bench's SUT (``bench.trial.serve``), and bench's Offline trial against its
mode=infer trial at the same batch, in one process, alternating.

Three comparisons, each round in turn (``--repeats`` rounds, medians printed at the end):

- **Server p99, bare against bench's SUT.**  The bare harness: LoadGen's IssueQuery runs the
  model on each query's samples in LoadGen's own thread (no queue, no worker thread) and
  completes them.  bench's: the batching SUT of ``mode=serve`` (``serve.max_batch``, a worker
  thread, the session's ``predict``).  Both see the same LoadGen settings (Server at
  ``--qps``, the same seeds), the same model (the zoo's torch LeNet-5 or ResNet-50 at 32 px,
  eval mode, one thread) and the same samples.  bench/bare is bench's cost on latency.
- **Offline samples/s, bare against bench's SUT:** the bare harness runs Offline's one query
  in chunks of ``max_batch``, back to back in LoadGen's thread.
- **bench's Offline trial against its mode=infer trial** at batch ``max_batch``: whole
  trials (``bench.trial.loop.run_trial``, as the inline launcher runs them: warm-up, LoadGen
  or the timed windows), the serving trial's LoadGen samples/s over the infer trial's
  samples/s.  1 - that ratio is what LoadGen and the SUT cost on throughput (target <= 5%).

    .venv/bin/python scripts/measure/bench_serve_overhead.py [--model lenet5] [--qps 100]
        [--seconds 3] [--repeats 3] [--max-batch 8]

(A timed check, so a script and not a test: the tests check the SUT's policy with a fake
forward, tests/unit/test_serve.py, and real sweeps, tests/e2e/test_serve_trials.py.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--qps", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-batch", type=int, default=8)
    args = parser.parse_args()

    import mlperf_loadgen as lg
    import torch

    from bench.core import metrics
    from bench.core.config import (
        BenchConfig,
        FrameworkConfig,
        ModelConfig,
        ServeConfig,
        TelemetryConfig,
    )
    from bench.trial import models, serve
    from bench.trial.loop import run_trial

    torch.set_num_threads(1)
    model = models.build_image("torch", ModelConfig(name=args.model), 10, 32).eval()
    rng = np.random.default_rng(0)
    lib = serve.Library(rng.standard_normal((256, 3, 32, 32), dtype=np.float32), None)

    def predict(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()

    def cfg(scenario: str) -> BenchConfig:
        s = ServeConfig(scenario=scenario, max_batch=args.max_batch, target_qps=args.qps,
                        latency_bound_ms=1000.0, min_duration_s=args.seconds)  # fmt: skip
        return BenchConfig(mode="serve", serve=s)

    first, rest, expected = serve.warm_up(predict, lib, cfg("server"), lambda: None)

    def bare(c: BenchConfig, out: Path) -> serve.Summary:
        def issue(queries: list) -> None:  # type: ignore[type-arg]
            for i in range(0, len(queries), args.max_batch):  # Offline's one query: chunks
                chunk = queries[i : i + args.max_batch]
                predict(lib.samples[[q.index for q in chunk]])
                lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in chunk])

        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(len(lib), len(lib), lambda i: None, lambda i: None)
        log = lg.LogSettings()
        log.log_output.outdir = str(out)
        log.enable_trace = False
        out.mkdir(parents=True, exist_ok=True)
        lg.StartTestWithLogSettings(sut, qsl, serve.settings(c, expected, args.qps, 600), log,
                                    str(out / "audit.config"))  # fmt: skip
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
        return serve.parse_summary((out / "mlperf_log_summary.txt").read_text())

    def benchs(c: BenchConfig, out: Path) -> serve.Summary:
        run = serve.run_loadgen(serve.settings(c, expected, args.qps, 600), predict, lib, c, out)
        assert run.summary is not None
        return run.summary

    def trial(mode: str) -> float:  # bench's own trial, as the inline launcher runs it
        c = BenchConfig(
            framework=FrameworkConfig(name="torch"), model=ModelConfig(name=args.model),
            mode=mode, batch_size=args.max_batch, threads=1, epochs=3, warmup_steps=2,
            min_window_s=args.seconds / 3, telemetry=TelemetryConfig(enabled=False),
            serve=ServeConfig(scenario="offline", max_batch=args.max_batch,
                              min_duration_s=args.seconds),
        )  # fmt: skip
        result = run_trial(c)
        assert result.status == "ok", result.error
        name = metrics.TRIAL_SERVE_SAMPLES_PER_S if mode == "serve" else metrics.TRIAL_SAMPLES_PER_S
        return result.summary[name]

    root = Path(tempfile.mkdtemp(prefix="serve-overhead-"))
    server: dict[str, list[float]] = {"bare": [], "bench": []}
    offline: dict[str, list[float]] = {"bare": [], "bench": []}
    trials: dict[str, list[float]] = {"serve": [], "infer": []}
    for r in range(args.repeats):
        for name, run in (("bare", bare), ("bench", benchs)):
            s = run(cfg("server"), root / f"{name}-server-{r}")
            server[name].append(s.latency_ms[99.0])
            p50, p99 = s.latency_ms[50.0], s.latency_ms[99.0]
            print(f"server {name:5s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  "
                  f"{s.samples_per_s or 0:8.1f}/s  {s.verdict()}", flush=True)  # fmt: skip
            o = run(cfg("offline"), root / f"{name}-offline-{r}")
            offline[name].append(o.samples_per_s or 0.0)
            print(f"offline {name:5s} {o.samples_per_s:8.1f} samples/s", flush=True)
        for mode in ("infer", "serve"):
            trials[mode].append(trial(mode))
            print(f"trial mode={mode:5s} {trials[mode][-1]:8.1f} samples/s (batch "
                  f"{args.max_batch})", flush=True)  # fmt: skip
    med = {k: statistics.median(v) for k, v in server.items()}
    print(f"\nServer p99 median: bare {med['bare']:.2f} ms, bench {med['bench']:.2f} ms, "
          f"bench/bare {med['bench'] / med['bare']:.3f}")  # fmt: skip
    off = {k: statistics.median(v) for k, v in offline.items()}
    print(f"Offline SUT median: bench {off['bench']:.1f}/s, bare {off['bare']:.1f}/s, "
          f"bench/bare {off['bench'] / off['bare']:.3f}")  # fmt: skip
    ratios = [s / i for s, i in zip(trials["serve"], trials["infer"], strict=True)]
    each = ", ".join(f"{x:.3f}" for x in ratios)
    print(f"Trials median: mode=serve Offline {statistics.median(trials['serve']):.1f}/s, "
          f"mode=infer {statistics.median(trials['infer']):.1f}/s; per-round serve/infer "
          f"{each}, median {statistics.median(ratios):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
