"""Run bench's GPU paths once, in priority order within a time budget, and print a table:
path | ok / failed / skipped (why) | key figure.  The first thing to run on a new GPU host
(``bash scripts/gpu_check.sh``), and the one prepared run on a lent GPU machine.

It runs with whatever the host has, on the framework the interpreter already has
(``framework.version=installed``): a framework that is not installed, a missing Docker
engine, one GPU where a path needs two, or a row that no longer fits the budget give
"skipped" rows with the reason, not failures.  Every trial is a real ``python -m bench``
trial into one store (``--store``, a temporary folder by default).  In priority order:

1. torch on CUDA, ResNet-50 at 224 px, batch 64 and 128, fp32 (TF32 off) / bf16 / fp16,
   training and inference: one sweep, a row per trial (samples/s, MFU against the peak the
   trial measured, mean power, energy per sample);
2. NVML: every trial of that sweep has energy above 0 and mean power within the enforced
   limit; the idle baseline, utilization and memory;
3. ResNet-18 at 32 px, batch 32 (launch-bound), with ``timing=step`` and ``timing=events``;
4. a real out-of-memory error recorded as ``oom``, its batch sized from the GPU's memory,
   and the sweep going on past it;
5. the timing method and the peak: ``scripts/measure/bench_gpu_timing.py --peak``;
6. ``compile=true`` once (ResNet-50, bf16, batch 128);
7. ``tuning=default,best`` (ResNet-50, fp32, batch 64, 2 interleaved repeats): the search
   (compile, channels_last, cudnn_benchmark) cold and then from its cache, and each side;
8. the rest: TensorFlow and MXNet on CUDA, 2-GPU strategies, Horovod with NCCL, Docker's
   CUDA image, and models by name;
9. the second round (issue 53; docs/gpu.md): ``jax`` (ResNet-50 on the interpreter's own
   JAX, Keras and Flax models, fp32 and bf16), ``best`` (``tuning=default,best`` for torch
   and jax at bf16), ``parity`` (``python -m bench.parity`` torch vs jax, on the CPU),
   ``llm`` (a tiny llama, train and ``mode=generate``), ``serve`` (LoadGen's Server per
   framework) and ``accuracy`` (``goal=accuracy`` on digits).

With ``--out DIR`` each row is appended to ``DIR/gpu_check.txt`` as it finishes, the
figures go to ``DIR/gpu_timing.json``, and the store is packed into
``DIR/gpu_store.tar.gz`` after every row (``scripts/gpu_results.py`` unpacks it elsewhere
for ``bench report`` and the MLflow UI).  Exit 0 when nothing failed.

``--rehearse`` runs the same rows on the CPU at small sizes (the GPU-only rows skip): what
to run before spending a lent machine's time.  On a host without a GPU and without
``--rehearse`` it checks instead that each GPU-only setting is refused before any trial
(exit 2, no store created), and exits 0 when all are.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BASE = ["framework=torch", "framework.version=installed", "force=true"]
# What each kind of row runs at: the GPU's sizes, or the CPU rehearsal's.
SIZES = {
    "gpu": {
        "device": "cuda", "model": "resnet50", "image_size": 224, "batches": "64,128",
        "precisions": "fp32,bf16,fp16", "window": ["epochs=2", "min_window_s=1", "warmup_steps=5"],
        "small": ["model=resnet18", "image_size=32", "batch_size=32"],
        "compile_batch": 128, "tuning_batch": 64,
        # The second round (issue 53): jax beside torch, each at its best, an LM, serving.
        "jax_model": ["model=resnet50", "image_size=224"], "jax_batches": "64,128",
        "jax_modes": "train,infer", "best": ["model=resnet50", "image_size=224",
                                              "batch_size=128"], "best_repeats": 2,
        "parity_models": ("lenet5", "resnet18"), "parity_steps": 20,
        "llm": ["model.layers=4", "model.hidden=512", "model.heads=8",
                "model.intermediate=2048", "model.vocab_size=32000", "batch_size=8",
                "prompt_len=128", "new_tokens=64"],
        "serve": ["model=resnet50", "image_size=224", "serve.target_qps=1000",
                  "serve.latency_bound_ms=15", "serve.min_duration_s=5"],
    },
    "cpu": {
        "device": "cpu", "model": "resnet18", "image_size": 32, "batches": "8,16",
        "precisions": "fp32,bf16", "window": ["epochs=1", "min_window_s=0.3", "warmup_steps=1"],
        "small": ["model=lenet5", "image_size=32", "batch_size=32"],
        "compile_batch": 8, "tuning_batch": 8,
        "jax_model": ["model=lenet5", "image_size=32"], "jax_batches": "8",
        "jax_modes": "train", "best": ["model=lenet5", "image_size=32", "batch_size=8",
                                       "tuning.keys=[threads]", "tuning.probe_s=0.3"],
        "best_repeats": 1, "parity_models": ("lenet5",), "parity_steps": 3,
        "llm": ["model.layers=1", "model.hidden=64", "model.heads=2",
                "model.intermediate=128", "model.vocab_size=512", "model.seq_len=16",
                "batch_size=2", "prompt_len=8", "new_tokens=4"],
        "serve": ["model=lenet5", "image_size=32", "serve.target_qps=20",
                  "serve.latency_bound_ms=200", "serve.min_duration_s=1"],
    },
}  # fmt: skip
# Training memory per sample of ResNet-50 at 224 px in fp32 (activations kept for the
# backward pass), about 0.1 GB: the out-of-memory row asks for 3x the GPU's memory.
OOM_BYTES_PER_SAMPLE = 100e6
OOM_FACTOR = 3.0


@dataclass
class Run:
    status: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]

    @property
    def error(self) -> str:
        return self.tags.get("bench.error", "")


@dataclass
class Check:
    store: Path
    out: Path | None
    budget_s: float
    timeout_s: float
    kind: str  # "gpu" or "cpu" (the rehearsal)
    gpus: int = 0
    timing_rounds: int = 3
    timing_window_s: float = 1.0
    started: float = field(default_factory=time.monotonic)
    rows: list[list[str]] = field(default_factory=list)

    @property
    def size(self) -> dict[str, Any]:
        return SIZES[self.kind]

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def add(self, path: str, outcome: str, figure: str = "-") -> None:
        self.rows.append([path, outcome, figure])
        print(f"gpu_check: {path}: {outcome}  {figure}", file=sys.stderr, flush=True)
        if self.out is not None:
            with (self.out / "gpu_check.txt").open("a") as f:
                f.write(f"{path}\t{outcome}\t{figure}\n")

    def ready(self, path: str, estimate_s: float, *modules: str) -> bool:
        """Whether a row needing ``modules`` can run here and fits what is left; if not,
        it is skipped, saying why (a missing module first, then the time)."""
        why = missing(*modules)
        if why:
            self.add(path, f"skipped ({why})")
            return False
        return self.fits(path, estimate_s)

    def fits(self, path: str, estimate_s: float) -> bool:
        """Whether a row of about ``estimate_s`` seconds fits what is left; if not, the
        row is skipped, saying so."""
        if self.left() >= estimate_s:
            return True
        self.add(path, f"skipped (about {estimate_s:.0f} s; {max(0, self.left()):.0f} s left)")
        return False

    def command(
        self, experiment: str, overrides: list[str], sweep: bool = False
    ) -> tuple[int, str]:
        """Run ``python -m bench`` (``-m``: a sweep) into the store's experiment: its exit
        status (124: timed out) and what it said on stderr."""
        from bench.envs.interpreters import child_env

        work = self.store / "hydra" / experiment
        command = [
            sys.executable, "-m", "bench", *(["-m"] if sweep else []), *overrides,
            f"tracking.uri=sqlite:///{self.store}/mlflow.db", f"tracking.experiment={experiment}",
            f"hydra.run.dir={work}", f"hydra.sweep.dir={work}",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=self.timeout_s,
                cwd=self.store, env=child_env(),
            )  # fmt: skip
            return done.returncode, done.stderr
        except subprocess.TimeoutExpired as exc:
            return 124, f"timed out after {self.timeout_s:.0f} s: {exc.stderr or ''}"

    def bench(self, experiment: str, overrides: list[str], sweep: bool = False) -> list[Run]:
        """Run ``python -m bench`` (``-m``: a sweep) into the store's experiment; its runs."""
        said = self.command(experiment, overrides, sweep)[1]
        runs = trials(self.store, experiment)
        if not runs:
            last = [ln for ln in str(said).strip().splitlines() if ln.strip()][-3:]
            raise RuntimeError(" | ".join(last)[-300:] or "no run was recorded")
        self.pack()
        return runs

    def rows_of(
        self, path: str, experiment: str, overrides: list[str], sweep: bool = False
    ) -> list[Run]:
        """Run ``overrides`` into ``experiment``, a row per trial; a command that records no
        run is one failed row named ``path``.  The runs ([] then)."""
        try:
            runs = self.bench(experiment, overrides, sweep)
        except RuntimeError as exc:
            self.add(path, "failed", str(exc))
            return []
        trial_rows(self, runs)
        return runs

    def pack(self) -> None:
        """The store (database and artifacts) as one archive in ``out``."""
        if self.out is None or not (self.store / "mlflow.db").exists():
            return
        part = self.out / "gpu_store.tar.gz.part"
        with tarfile.open(part, "w:gz") as tar:
            tar.add(self.store / "mlflow.db", arcname="mlflow.db")
            if (self.store / "artifacts").is_dir():
                tar.add(self.store / "artifacts", arcname="artifacts")
        part.replace(self.out / "gpu_store.tar.gz")


def trials(store: Path, experiment: str) -> list[Run]:
    """The trial runs (children of a sweep's parent) of one experiment, oldest first."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    runs = client.search_runs([found.experiment_id], order_by=["attributes.start_time ASC"])
    return [
        Run(r.data.tags.get("bench.status", "?"), dict(r.data.params), dict(r.data.metrics),
            dict(r.data.tags))
        for r in runs
        if "mlflow.parentRunId" in r.data.tags
    ]  # fmt: skip


def _label(run: Run) -> str:
    p = run.params
    framework = p.get("framework.name", "torch")
    source = p.get("model.source", "bench")
    model = p.get("model.name") if source in ("bench", "") else f"{source}:{p.get('model.name')}"
    size = "" if source == "hf" else f" {p.get('image_size')} px"
    return (
        ("" if framework == "torch" else f"{framework} ") + f"{model}{size} {p.get('mode')} "
        f"{p.get('precision')} batch {p.get('batch_size')}"
        + (" compile" if p.get("compile") == "True" else "")
        + (f" timing={p['timing']}" if "timing" in p else "")
        + (f" goal={p['goal.name']}" if p.get("goal.name", "none") != "none" else "")
    )


def figures(run: Run) -> str:
    """A trial's key figures: samples/s (a generation's tokens/s and latencies, a served
    model's latency at its load, a time to accuracy), MFU, mean power, energy per sample."""
    m = run.metrics
    parts = [f"{m.get('trial_samples_per_s', 0):,.0f} samples/s"]
    if "trial_decode_tokens_per_s" in m:
        parts = [
            f"decode {m['trial_decode_tokens_per_s']:,.0f} tokens/s, prefill "
            f"{m.get('trial_prefill_tokens_per_s', 0):,.0f} tokens/s, first token "
            f"{m.get('trial_time_to_first_token_ms', 0):.1f} ms, per output token "
            f"{m.get('trial_time_per_output_token_p50_ms', 0):.2f} ms (p50)"
        ]
    if "trial_serve_latency_p99_ms" in m:
        parts = [
            f"{run.tags.get('bench.serve.result', '?')} at "
            f"{m.get('trial_serve_target_qps', 0):,.0f} QPS: "
            f"{m.get('trial_serve_samples_per_s', 0):,.0f} samples/s, p99 "
            f"{m['trial_serve_latency_p99_ms']:.2f} ms"
        ]
    if "target_reached" in m:
        parts = [
            f"target reached in {m.get('time_to_target_s', 0):.1f} s, "
            f"{m.get('epochs_to_target', 0):g} epochs"
            if m["target_reached"]
            else f"target not reached in {m.get('epochs_trained', 0):g} epochs",
            f"best accuracy {m.get('best_test_accuracy', 0):.3f}",
        ]
    if "mfu_pct" in m:
        parts.append(f"MFU {m['mfu_pct']:.1f}% of {m['peak_flops_per_s'] / 1e12:,.0f} TFLOP/s")
    if "power_w" in m:
        parts.append(f"{m['power_w']:.0f} W")
    if "trial_energy_per_sample_j" in m:
        parts.append(f"{m['trial_energy_per_sample_j']:.3f} J/sample")
    return ", ".join(parts)


def trial_rows(check: Check, runs: list[Run], expect: str = "ok") -> None:
    for run in runs:
        if run.status == expect:
            check.add(
                _label(run), "ok", figures(run) if expect == "ok" else f"recorded as {expect}"
            )
        else:
            error = (run.error.strip().splitlines() or [""])[-1][:200]
            check.add(_label(run), "failed", f"status {run.status}: {error}")


# -- the rows, in priority order ----------------------------------------------------------


def row_matrix(check: Check) -> list[Run]:
    path = "torch on CUDA: ResNet-50 224 px matrix" if check.kind == "gpu" else "torch matrix"
    if not check.fits(path, 60):
        return []
    s = check.size
    overrides = [
        *BASE, f"device={s['device']}", f"model={s['model']}", f"image_size={s['image_size']}",
        f"batch_size={s['batches']}", f"precision={s['precisions']}", "mode=train,infer",
        *s["window"],
    ]  # fmt: skip
    return check.rows_of(path, "gpu-matrix", overrides, sweep=True)


def row_nvml(check: Check, runs: list[Run]) -> None:
    path = "NVML: utilization, power, energy, memory"
    if check.kind != "gpu":
        check.add(path, "skipped (no GPU: the rehearsal)")
        return
    measured = [r for r in runs if r.status == "ok"]
    if not measured:
        check.add(path, "skipped (no ok trial to read)")
        return
    limit = _power_limit_w()
    problems = []
    for run in measured:
        m = run.metrics
        if not m.get("energy_j", 0) > 0:
            problems.append(f"{_label(run)}: energy_j {m.get('energy_j')}")
        power = m.get("power_w")
        if power is None or power <= 0 or (limit and power > 1.1 * limit):
            problems.append(f"{_label(run)}: power_w {power} outside (0, {limit} W]")
    powers = [r.metrics.get("power_w", 0.0) for r in measured]
    utils = [r.metrics.get("gpu_util_pct", 0.0) for r in measured]
    idle = [r.metrics["gpu_idle_power_w"] for r in measured if "gpu_idle_power_w" in r.metrics]
    memory = max((r.metrics.get("gpu_mem_mb", 0.0) for r in measured), default=0.0)
    text = (
        f"idle {min(idle, default=0):.0f} W; mean power {min(powers):.0f}-{max(powers):.0f} W "
        f"(limit {limit or '?'} W); util {min(utils):.0f}-{max(utils):.0f}%; "
        f"memory up to {memory / 1024:.1f} GiB; {len(measured)} trials"
    )
    check.add(path, "failed" if problems else "ok", "; ".join(problems)[:300] or text)


def row_launch_bound(check: Check) -> list[Run]:
    path = "ResNet-18 32 px batch 32 (launch-bound)"
    if not check.fits(path, 25):
        return []
    s = check.size
    overrides = [*BASE, f"device={s['device']}", *s["small"], "timing=step,events", *s["window"]]
    return check.rows_of(path, "gpu-launch-bound", overrides, sweep=True)


def oom_batch(total_bytes: float) -> int:
    """A ResNet-50 224 px training batch that needs about OOM_FACTOR x the GPU's memory."""
    return int(math.ceil(OOM_FACTOR * total_bytes / OOM_BYTES_PER_SAMPLE))


def row_oom(check: Check) -> None:
    path = "out of memory, recorded as oom"
    if check.kind != "gpu":
        check.add(path, "skipped (no GPU: the rehearsal; the CPU's OOM has tests of its own)")
        return
    if not check.fits(path, 40):
        return
    total = _gpu_memory_bytes()
    batch = oom_batch(total)
    # A sweep of two: the OOM, then a small trial that must still run after it.
    overrides = [
        *BASE, "device=cuda", "model=resnet50", "image_size=224", f"batch_size={batch},32",
        "data.num_batches=1", "epochs=1", "steps_per_epoch=2", "warmup_steps=1",
    ]  # fmt: skip
    try:
        runs = check.bench("gpu-oom", overrides, sweep=True)
    except RuntimeError as exc:
        check.add(path, "failed", str(exc))
        return
    by_batch = {r.params.get("batch_size"): r for r in runs}
    oom, after = by_batch.get(str(batch)), by_batch.get("32")
    memory = f"batch {batch} for {total / 2**30:.0f} GiB"
    if oom is None or oom.status != "oom":
        status = oom.status if oom else "no run"
        check.add(path, "failed", f"{memory}: status {status} {oom.error[-160:] if oom else ''}")
    elif after is None or after.status != "ok":
        check.add(path, "failed", f"{memory}: oom, but the trial after it did not run ok")
    else:
        check.add(path, "ok", f"{memory}: oom; the next trial ran ok ({figures(after)})")


def row_timing(check: Check, matrix: list[Run]) -> None:
    path = "timing method: per-step sync vs bare loop"
    if not check.fits(path, 15 + 9 * check.timing_rounds * check.timing_window_s):
        return
    command = [
        sys.executable, str(REPO / "scripts/measure/bench_gpu_timing.py"), "--peak",
        f"--rounds={check.timing_rounds}", f"--window-s={check.timing_window_s}", "--json",
    ]  # fmt: skip
    target = (check.out or check.store) / "gpu_timing.json"
    from bench.envs.interpreters import child_env

    try:
        done = subprocess.run(
            [*command, str(target)], capture_output=True, text=True, timeout=check.timeout_s,
            env=child_env(),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        check.add(path, "failed", "timed out")
        return
    if done.returncode != 0 or not target.exists():
        check.add(path, "failed", (done.stderr.strip().splitlines() or ["?"])[-1][:200])
        return
    found = json.loads(target.read_text())
    print(done.stdout, file=sys.stderr, flush=True)
    for case in found["cases"]:
        ratio = case["ratio_to_bare"]
        rate = case["samples_per_s"]
        check.add(
            f"timing: {case['case']}",
            "ok",
            f"bare {rate['bare']:,.0f} samples/s; step/bare {ratio['step']:.3f}, "
            f"events/bare {ratio['events']:.3f} ({case['method_used'].get('events', '?')})",
        )
    for run in matrix:  # bench's own trial against the bare loop on the same case
        p = run.params
        same = (p.get("model.name"), p.get("batch_size"), p.get("mode"), p.get("precision"))
        for case in found["cases"]:
            if run.status == "ok" and same == (*case["case"].split()[:1], "64", "train", "fp32"):
                bare = case["samples_per_s"]["bare"]
                check.add(
                    "bench's trial vs bare loop (ResNet-50 224 px, batch 64, fp32)",
                    "ok",
                    f"{run.metrics['trial_samples_per_s'] / bare:.3f} of the bare loop",
                )
    peaks = found.get("peak_flops_per_s")
    if peaks:
        shown = ", ".join(f"{k} {v / 1e12:,.0f}" for k, v in peaks.items())
        check.add("peak matrix product (TFLOP/s, 8192^3)", "ok", shown)
    elif check.kind == "gpu":
        check.add("peak matrix product", "failed", "no peak measured")


def row_variants(check: Check) -> None:
    """ResNet-50 training at tf32 (batch 128) and with timing=events (fp32, batch 64): the
    same trials as the matrix's fp32 ones, but for the one setting."""
    path = "tf32 and timing=events (ResNet-50 training)"
    if check.kind != "gpu":
        check.add(path, "skipped (no GPU: the rehearsal; tf32 is CUDA-only)")
        return
    if not check.fits(path, 30):
        return
    s = check.size
    common = [*BASE, "device=cuda", "model=resnet50", "image_size=224", "mode=train", *s["window"]]
    check.rows_of(path, "gpu-tf32", [*common, "precision=tf32", "batch_size=128"])
    check.rows_of(path, "gpu-events", [*common, "precision=fp32", "batch_size=64",
                                       "timing=events"])  # fmt: skip


def row_compile(check: Check) -> None:
    path = "compile=true (torch.compile)"
    estimate = 150 if check.kind == "gpu" else 60
    if not check.fits(path, estimate):
        return
    s = check.size
    overrides = [
        *BASE, f"device={s['device']}", f"model={s['model']}", f"image_size={s['image_size']}",
        f"batch_size={s['compile_batch']}", "precision=bf16", "compile=true", *s["window"],
    ]  # fmt: skip
    check.rows_of(path, "gpu-compile", overrides)


def row_tuning(check: Check) -> None:
    """tuning=default against tuning=best (docs/tuning.md), interleaved repeats: the search's
    table (cold, then from the cache), the pick and each side's samples/s."""
    path = "tuning=default,best (torch)"
    if not check.fits(path, 300 if check.kind == "gpu" else 120):
        return
    s = check.size
    rehearse = [] if check.kind == "gpu" else ["tuning.keys=[threads]", "tuning.probe_s=0.3"]
    overrides = [
        *BASE, f"device={s['device']}", f"model={s['model']}", f"image_size={s['image_size']}",
        f"batch_size={s['tuning_batch']}", "precision=fp32", "tuning=default,best", "repeats=2",
        *rehearse, *s["window"],
    ]  # fmt: skip
    tuning_sweep(check, path, "gpu-tuning", overrides)


def tuning_sweep(check: Check, path: str, experiment: str, overrides: list[str]) -> None:
    """A tuning sweep, a row per trial: its side, repeat, figures, and the best side's pick
    (one failed row ``path`` when the command records no run)."""
    try:
        runs = check.bench(experiment, overrides, sweep=True)
    except RuntimeError as exc:
        check.add(path, "failed", str(exc))
        return
    for run in runs:
        if run.status != "ok":
            error = (run.error.strip().splitlines() or [""])[-1][:160]
            check.add(path, "failed", f"status {run.status}: {error}")
            continue
        tuning = run.params.get("tuning.name", "default")
        tuned = {k[6:]: v for k, v in run.params.items() if k.startswith("tuned.")}
        picked = ", ".join(f"{k}={v}" for k, v in sorted(tuned.items()))
        extra = ""
        if tuning == "best":
            source = run.tags.get("bench.tuning_source", "?").split(" ")[0]
            extra = f"; {picked}; search {run.metrics.get('tuning_search_s', 0):.1f} s ({source})"
        repeat = run.tags.get("bench.repeat", "?")
        framework = run.params.get("framework.name", "torch")
        who = "" if framework == "torch" and "jax" not in path else f"{framework} "
        check.add(f"{who}tuning={tuning} repeat {repeat}", "ok", figures(run) + extra)


# -- the second round (issue 53): jax beside torch, each at its best, an LM, serving -----

JAX = ["framework=jax", "framework.version=installed", "force=true"]


def missing(*modules: str) -> str:
    """Why a row cannot run here for want of a module ('' when all import)."""
    gone = [m for m in modules if importlib.util.find_spec(m) is None]
    return f"{', '.join(gone)} not installed (scripts/gpu_wheels.py carries keras)" if gone else ""


def refused_row(check: Check, path: str, experiment: str, overrides: list[str]) -> None:
    """A setting bench must refuse before any trial: skipped with bench's own reason when
    it exits 2 and records no run; failed when it runs or fails otherwise."""
    status, said = check.command(experiment, overrides)
    reason = next((ln.strip() for ln in said.splitlines() if ln.startswith("  ")), "")
    ran = (check.store / "mlflow.db").exists() and trials(check.store, experiment)
    if status == 2 and not ran:
        check.add(path, f"skipped (bench refuses it before any trial: {reason[:200]})")
    else:
        last = (said.strip().splitlines() or ["?"])[-1][:160]
        check.add(path, "failed", f"not refused (exit {status}): {last}")


def row_jax(check: Check) -> None:
    """framework=jax on the interpreter's own JAX (framework.version=installed), on the
    GPU where the trial's device asks for it (a JAX that sees none is refused, naming
    device): Keras on JAX (model.source=bench) at fp32 and bf16, the zoo's Flax model
    (model.source=flax) at fp32, training and inference; Flax at bf16 is refused."""
    path = "jax: ResNet-50 224 px, Keras and Flax" if check.kind == "gpu" else "jax matrix"
    if not check.ready(path, 240 if check.kind == "gpu" else 60, "jax", "keras"):
        return
    s = check.size
    common = [*JAX, f"device={s['device']}", *s["jax_model"], f"batch_size={s['jax_batches']}",
              f"mode={s['jax_modes']}", *s["window"]]  # fmt: skip
    check.rows_of(path + " (Keras)", "gpu-jax", [*common, "precision=fp32,bf16"], sweep=True)
    no_flax = missing("flax")
    if no_flax:
        check.add(path + " (Flax)", f"skipped ({no_flax})")
        return
    flax = [*common, "model.source=flax"]
    check.rows_of(path + " (Flax)", "gpu-jax-flax", [*flax, "precision=fp32"], sweep=True)
    refused_row(check, "jax flax precision=bf16", "gpu-jax-flax-bf16", [*flax, "precision=bf16"])


def row_best(check: Check) -> None:
    """tuning=default,best for torch and jax, training at bf16 (ResNet-50, 224 px, batch 128
    on the GPU), interleaved repeats: each side at its default and at its best."""
    path = "tuning=default,best (torch, jax; bf16)"
    if not check.fits(path, 360 if check.kind == "gpu" else 90):
        return
    s = check.size
    no_jax = missing("jax", "keras")
    frameworks = ["torch"] + ([] if no_jax else ["jax"])
    if no_jax:
        check.add("tuning=best (jax)", f"skipped ({no_jax})")
    overrides = [
        f"framework={','.join(frameworks)}", "framework.version=installed", "force=true",
        f"device={s['device']}", *s["best"], "precision=bf16", "mode=train",
        "tuning=default,best", f"repeats={s['best_repeats']}", *s["window"],
    ]  # fmt: skip
    tuning_sweep(check, path, "gpu-best", overrides)


def row_parity(check: Check) -> None:
    """``python -m bench.parity`` torch against jax (Keras and Flax) on the interpreter's
    own builds.  Its sides run on the CPU (bench.parity fixes device=cpu): the row checks
    the device's torch and JAX train alike, not their CUDA kernels."""
    for model in check.size["parity_models"]:
        path = f"parity torch vs jax, {model} (on the CPU)"
        if not check.ready(path, 60 if check.kind == "gpu" else 120, "jax", "keras", "flax"):
            continue
        from bench.envs.interpreters import child_env

        command = [
            sys.executable, "-m", "bench.parity", "--frameworks", "torch,jax,jax[source=flax]",
            "--model", model, "--steps", str(check.size["parity_steps"]), "--quiet",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=check.timeout_s,
                env=child_env(),
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            check.add(path, "failed", f"timed out after {check.timeout_s:.0f} s")
            continue
        check.add(path, *parity_outcome(done.returncode, done.stdout, done.stderr))


def parity_outcome(status: int, out: str, err: str) -> tuple[str, str]:
    """bench.parity's verdict as a row: each side's deviations (loss, update, weights) and
    the verdict line."""
    lines = out.splitlines()
    sides = [ln.split() for ln in lines if " vs torch" in ln]
    shown = "; ".join(
        f"{cells[0]}: loss {cells[3]}, update {cells[4]}, weights {cells[6]} {cells[-1]}"
        for cells in sides
        if len(cells) >= 8
    )
    verdict = next((ln for ln in lines if ln.startswith(("passed", "FAILED"))), "")
    if status == 0 and verdict.startswith("passed"):
        return "ok", f"{shown}; {verdict}"[:300]
    said = (err.strip().splitlines() or lines or ["?"])[-1]
    return "failed", f"exit {status}: {shown or said}; {verdict}"[:300]


def row_llm(check: Check) -> None:
    """A tiny llama (model=hf: transformers' config, random weights, nothing downloaded)
    under torch: training, then mode=generate (time to first token, per output token)."""
    path = "hf llama (torch): train, generate"
    if not check.ready(path, 90, "transformers"):
        return
    s = check.size
    overrides = [*BASE, f"device={s['device']}", "model=hf", "model.name=llama", *s["llm"],
                 "mode=train,generate", *s["window"]]  # fmt: skip
    check.rows_of(path, "gpu-llm", overrides, sweep=True)


def row_serve(check: Check) -> None:
    """mode=serve, LoadGen's Server scenario at a latency bound, one trial per framework
    the interpreter has (torch, jax; tf where installed)."""
    why = missing("mlperf_loadgen")
    s = check.size
    for framework, modules in (("torch", ("torch",)), ("jax", ("jax", "keras")),
                               ("tf", ("tensorflow",))):  # fmt: skip
        path = f"mode=serve Server ({framework})"
        reason = why or missing(*modules)
        if reason:
            check.add(path, f"skipped ({reason})")
            continue
        if not check.fits(path, 60):
            continue
        overrides = [f"framework={framework}", "framework.version=installed", "force=true",
                     f"device={s['device']}", "mode=serve", "serve.scenario=server",
                     *s["serve"]]  # fmt: skip
        check.rows_of(path, f"gpu-serve-{framework}", overrides)


def row_accuracy(check: Check) -> None:
    """goal=accuracy: lenet5 on digits (scikit-learn's, nothing downloaded) to 95% held-out
    accuracy, under torch."""
    path = "goal=accuracy on digits (torch)"
    if not check.ready(path, 60, "sklearn"):
        return
    overrides = [*BASE, f"device={check.size['device']}", "model=lenet5", "data=digits",
                 "goal=accuracy", "goal.target=0.95", "goal.max_epochs=12",
                 "goal.eval_every=0.5", "optimizer.lr=0.01", "batch_size=32"]  # fmt: skip
    check.rows_of(path, "gpu-accuracy", overrides)


@dataclass
class Other:
    """A path this machine may lack: run (as one trial) when nothing stops it."""

    name: str
    overrides: list[str]
    gpus: int = 1
    needs: list[Callable[[], str]] = field(default_factory=list)
    expect: str = "ok"


def _installed(module: str) -> Callable[[], str]:
    def why() -> str:
        if module == "mxnet":
            from bench.envs import interpreters

            return interpreters.problem("mxnet")
        return "" if importlib.util.find_spec(module) else f"{module} is not installed"

    return why


def _docker() -> str:
    """Why the CUDA image cannot be had: no engine, or its base neither here nor reachable."""
    from bench.images import DEFAULT_BASES

    base = DEFAULT_BASES[("torch", "cuda")]
    try:
        import docker
    except ImportError:
        docker = None
    if not hasattr(docker, "from_env"):  # absent, or the checkout's docker/ folder found
        return "the Docker SDK (the docker package) is not installed"
    try:
        engine = docker.from_env()
        engine.ping()
    except Exception as exc:  # noqa: BLE001 - any reason is the row's reason
        return f"no Docker engine reachable ({type(exc).__name__})"
    from bench.launchers.docker_host import base_problem

    return base_problem(engine, base)


def _horovod_nccl() -> str:
    if importlib.util.find_spec("horovod") is None:
        return "Horovod is not installed (bench setup horovod)"
    done = subprocess.run(
        [sys.executable, "-c", "import horovod.torch as h; print(int(h.nccl_built()))"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return f"horovod.torch does not import: {done.stderr.strip()[-120:]}"
    if done.stdout.strip() == "0":
        return "Horovod was built without NCCL (bench setup horovod builds its Gloo CPU path)"
    return ""


SMALL = ["model=resnet18", "batch_size=32", "image_size=64", "epochs=1", "steps_per_epoch=5",
         "warmup_steps=2", "force=true", "device=cuda"]  # fmt: skip
TF = [_installed("tensorflow")]
OTHERS = [
    Other("tf training on cuda", ["framework=tf"], needs=TF),
    Other("fp16 (tf)", ["framework=tf", "precision=fp16"], needs=TF),
    Other("mxnet training on cuda", ["framework=mxnet"], needs=[_installed("mxnet")]),
    Other("dp on 2 GPUs", ["framework=torch", "distributed=dp", "workers=2"], 2),
    Other("ddp on 2 GPUs (NCCL)", ["framework=torch", "distributed=ddp", "workers=2"], 2),
    Other(
        "model_parallel (torch) on 2 GPUs",
        ["framework=torch", "distributed=model_parallel", "workers=2"],
        2,
    ),
    Other(
        "model_parallel (tf) on 2 GPUs",
        ["framework=tf", "distributed=model_parallel", "workers=2"],
        2,
        TF,
    ),
    Other(
        "Horovod with NCCL",
        ["framework=torch", "distributed=horovod", "workers=2"],
        2,
        [_horovod_nccl],
    ),
    Other(
        "launcher=docker, gpus=all (CUDA image)",
        ["framework=torch", "launcher=docker", "launcher.docker.gpus=all"],
        needs=[_docker],
    ),
]


def row_others(check: Check) -> None:
    for other in OTHERS:
        needed = f"{other.gpus} GPU" + ("s" if other.gpus > 1 else "")
        why = f"needs {needed}, {check.gpus} here" if check.gpus < other.gpus else ""
        for need in other.needs:
            why = why or need()
        if check.kind != "gpu":
            why = why or "no GPU: the rehearsal"
        if why:
            check.add(other.name, f"skipped ({why})")
            continue
        if not check.fits(other.name, 30):
            continue
        slug = "gpu-" + "".join(c if c.isalnum() else "-" for c in other.name)[:40]
        try:
            runs = check.bench(slug, [*SMALL, *other.overrides])
        except RuntimeError as exc:
            check.add(other.name, "failed", str(exc))
            continue
        for run in runs:
            if run.status == other.expect:
                check.add(other.name, "ok", figures(run))
            else:
                error = (run.error.strip().splitlines() or [""])[-1][:160]
                check.add(other.name, "failed", f"status {run.status}: {error}")
    check.add(
        "models by name (timm, a Hugging Face LM in mode=generate)",
        "skipped (bench runs its own zoo only: the your-own-model issue has not landed)",
    )


def _power_limit_w() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
    except Exception:  # noqa: BLE001 - no NVML: the figure says '?'
        return None


def _gpu_memory_bytes() -> float:
    import pynvml

    pynvml.nvmlInit()
    return float(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total)


ROWS = ("matrix", "nvml", "launch", "oom", "timing", "variants", "compile", "tuning", "others",
        "jax", "best", "parity", "llm", "serve", "accuracy")  # fmt: skip
# The second round's rows (issue 53; docs/gpu.md): what the next lent machine runs.
SECOND = ("jax", "best", "parity", "llm", "serve", "accuracy")


def check_host(check: Check, rows: tuple[str, ...] = ROWS) -> list[list[str]]:
    """The rows named in ``rows``, in priority order (nvml reads the matrix's trials, as
    does timing's comparison with bench's own trial: from this store, whichever ran them)."""
    matrix = row_matrix(check) if "matrix" in rows else trials(check.store, "gpu-matrix")
    steps: list[tuple[str, Callable[[], None]]] = [
        ("nvml", lambda: row_nvml(check, matrix)),
        ("launch", lambda: row_launch_bound(check)),
        ("oom", lambda: row_oom(check)),
        ("timing", lambda: row_timing(check, matrix)),
        ("variants", lambda: row_variants(check)),
        ("compile", lambda: row_compile(check)),
        ("tuning", lambda: row_tuning(check)),
        ("others", lambda: row_others(check)),
        ("jax", lambda: row_jax(check)),
        ("best", lambda: row_best(check)),
        ("parity", lambda: row_parity(check)),
        ("llm", lambda: row_llm(check)),
        ("serve", lambda: row_serve(check)),
        ("accuracy", lambda: row_accuracy(check)),
    ]
    for name, run in steps:
        if name in rows:
            run()
    check.pack()
    return check.rows


# -- a host without a GPU: settings that must be refused before any trial -----------------

REFUSED = [
    ("device=cuda", ["device=cuda"]),
    ("precision=fp16", ["precision=fp16"]),
    ("precision=tf32", ["precision=tf32"]),
    ("distributed=dp", ["distributed=dp", "workers=2"]),
    ("model_parallel (torch)", ["framework=torch", "distributed=model_parallel", "workers=2"]),
    ("launcher.docker.gpus=all", ["launcher=docker", "launcher.docker.gpus=all"]),
]


def _refused(overrides: list[str], where: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    from bench.envs.interpreters import child_env

    command = [
        sys.executable, "-m", "bench", *overrides,
        f"tracking.uri=sqlite:///{where}/mlflow.db", f"hydra.run.dir={where}/run",
    ]  # fmt: skip
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=where, env=child_env()
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(command, 124, str(exc.stdout or ""), "timed out")


def check_cpu_host(timeout: float) -> list[list[str]]:
    rows = []
    for name, overrides in REFUSED:
        with tempfile.TemporaryDirectory(prefix="bench-gpu-check-") as tmp:
            done = _refused(["model=lenet5", *overrides], Path(tmp), timeout)
            store = Path(tmp, "mlflow.db").exists()
        said = next((ln.strip() for ln in done.stderr.splitlines() if ":" in ln and
                     ln.startswith("  ")), done.stderr.strip()[-160:])  # fmt: skip
        ok = done.returncode == 2 and not store
        outcome = "refused" if ok else f"failed (exit {done.returncode}, store {store})"
        rows.append([name, outcome, said[:160]])
    return rows


def table(rows: list[list[str]], head: list[str]) -> str:
    from bench.core.tables import text_table

    return text_table(head, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per bench command")
    parser.add_argument("--budget-s", type=float, default=1800, help="seconds for all rows")
    parser.add_argument("--store", type=Path, help="the store's folder (default: temporary)")
    parser.add_argument("--out", type=Path, help="rows, figures and the packed store go here")
    parser.add_argument("--rehearse", action="store_true", help="the same rows on the CPU")
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"which rows, in this order: {','.join(ROWS)}"
    )
    parser.add_argument("--timing-rounds", type=int, default=3)
    parser.add_argument("--timing-window-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    if importlib.util.find_spec("mlflow") is None or importlib.util.find_spec("hydra") is None:
        print("gpu_check: bench's own environment is missing (run bash scripts/setup.sh)")
        return 1
    from bench.checks.device import host_gpus

    gpus, driver = host_gpus()
    if gpus == 0 and not args.rehearse:
        print(
            "gpu_check: no GPU visible here (NVML finds none): no GPU path can run. Checking "
            "that each GPU-only setting is refused before any trial (exit 2, no store)."
        )
        rows = check_cpu_host(args.timeout)
        print(table(rows, ["setting", "outcome", "what bench said"]))
        return 0 if all(r[1] == "refused" for r in rows) else 1
    if gpus:
        print(f"gpu_check: {gpus} GPU(s), driver {driver}", flush=True)
    else:
        print("gpu_check: no GPU here: rehearsing the rows on the CPU", flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.txt").write_text("")
    store = args.store or Path(tempfile.mkdtemp(prefix="bench-gpu-check-"))
    store.mkdir(parents=True, exist_ok=True)
    kind = "gpu" if gpus else "cpu"
    wanted = tuple(r.strip() for r in args.rows.split(",") if r.strip())
    unknown = [r for r in wanted if r not in ROWS]
    if unknown:
        parser.error(f"--rows: {', '.join(unknown)} not among {', '.join(ROWS)}")
    check = Check(store.resolve(), args.out, args.budget_s, args.timeout, kind, gpus,
                  args.timing_rounds, args.timing_window_s)  # fmt: skip
    try:
        rows = check_host(check, wanted)
    finally:
        if args.store is None:
            shutil.rmtree(store, ignore_errors=True)
    print(table(rows, ["path", "outcome", "key figure"]))
    took = time.monotonic() - check.started
    print(f"gpu_check: {took:.0f} s of a {args.budget_s:.0f} s budget", flush=True)
    return 1 if any(r[1] == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
