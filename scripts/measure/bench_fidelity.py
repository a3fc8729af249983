"""Harness fidelity: bench's samples/s against a bare training loop, side by side.

Runs, in interleaved rounds (every framework once per round), (a) bench's own trial
(``bench.trial.loop.run_trial``, as the process launcher's worker does, telemetry on as by
default) and (b) a bare loop written out below, each in a fresh process (MXNet's in its own
environment), on the same model, batch and data.  Prints both throughputs and their ratio
per round and the median (target at ``tuning=default``: bench >= 0.98 of the bare loop).
Each process times ``--windows`` windows of ``--steps`` steps (bench: that many epochs) and
reports its median window, so a stray pause inside one process moves no figure.

``--threads 0`` (the default): bench as a user runs it (``threads=0``) against the bare
loop with the framework's own default threading (no thread call at all); ``--threads N``
sets N intra- and inter-op threads on both sides.

    .venv/bin/python scripts/measure/bench_fidelity.py [--model resnet50] [--batch-size 16]
        [--rounds 5] [--steps 20] [--frameworks torch,tf,mxnet] [--threads 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BARE_TORCH = """
import json, sys, time, torch
from bench.trial import models
from bench.core.config import BenchConfig, from_dict
from bench.trial.data import synthetic
cfg = from_dict(BenchConfig, json.loads(sys.argv[1]))
if cfg.threads:
    torch.set_num_threads(cfg.threads); torch.set_num_interop_threads(cfg.threads)
torch.manual_seed(cfg.seed)
model = models.build("torch", cfg.model.name, cfg.num_classes, cfg.image_size)
opt = torch.optim.SGD(model.parameters(), lr=cfg.optimizer.lr, momentum=cfg.optimizer.momentum)
loss_fn = torch.nn.CrossEntropyLoss()
host = synthetic(cfg)
batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(host.images, host.labels)]
def step(i):
    x, y = batches[i % len(batches)]
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
for i in range(cfg.warmup_steps):
    step(i)
rates = []
for _ in range(cfg.epochs):  # windows: the median one is the figure
    start = time.perf_counter()
    for i in range(cfg.steps_per_epoch):
        step(i)
    rates.append(cfg.steps_per_epoch * cfg.batch_size / (time.perf_counter() - start))
print(json.dumps({"samples_per_s": sorted(rates)[len(rates) // 2]}))
"""

BARE_TF = """
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import keras, numpy as np, tensorflow as tf
from bench.trial import models
from bench.core.config import BenchConfig, from_dict
from bench.trial.data import synthetic
cfg = from_dict(BenchConfig, json.loads(sys.argv[1]))
if cfg.threads:
    tf.config.threading.set_intra_op_parallelism_threads(cfg.threads)
    tf.config.threading.set_inter_op_parallelism_threads(cfg.threads)
keras.utils.set_random_seed(cfg.seed)
model = models.build("tf", cfg.model.name, cfg.num_classes, cfg.image_size)
opt = keras.optimizers.SGD(learning_rate=cfg.optimizer.lr, momentum=cfg.optimizer.momentum)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
host = synthetic(cfg)
batches = [(tf.constant(x.transpose(0, 2, 3, 1).copy()), tf.constant(y))
           for x, y in zip(host.images, host.labels)]
@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss
for i in range(cfg.warmup_steps):
    train_step(*batches[i % len(batches)])
rates = []
for _ in range(cfg.epochs):  # windows: the median one is the figure
    start = time.perf_counter()
    for i in range(cfg.steps_per_epoch):
        train_step(*batches[i % len(batches)])
    rates.append(cfg.steps_per_epoch * cfg.batch_size / (time.perf_counter() - start))
print(json.dumps({"samples_per_s": sorted(rates)[len(rates) // 2]}))
"""

BARE_MXNET = """
import json, os, sys, time
cfg_data = json.loads(sys.argv[1])
if cfg_data["threads"]:
    os.environ["OMP_NUM_THREADS"] = str(cfg_data["threads"])
import mxnet as mx
from mxnet import autograd, gluon
from bench.trial import models
from bench.core.config import BenchConfig, from_dict
from bench.trial.data import synthetic
cfg = from_dict(BenchConfig, cfg_data)
mx.random.seed(cfg.seed)
net = models.build("mxnet", cfg.model.name, cfg.num_classes, cfg.image_size)
net.hybridize(static_alloc=True, static_shape=True)
trainer = gluon.Trainer(net.collect_params(), "sgd",
                        {"learning_rate": cfg.optimizer.lr, "momentum": cfg.optimizer.momentum})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
host = synthetic(cfg)
batches = [(mx.nd.array(x), mx.nd.array(y)) for x, y in zip(host.images, host.labels)]
def step(i):
    x, y = batches[i % len(batches)]
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(cfg.batch_size)
for i in range(cfg.warmup_steps):
    step(i)
mx.nd.waitall()
rates = []
for _ in range(cfg.epochs):  # windows: the median one is the figure
    start = time.perf_counter()
    for i in range(cfg.steps_per_epoch):
        step(i)
    mx.nd.waitall()
    rates.append(cfg.steps_per_epoch * cfg.batch_size / (time.perf_counter() - start))
print(json.dumps({"samples_per_s": sorted(rates)[len(rates) // 2]}))
"""

BENCH = """
import json, sys
from bench.core.config import BenchConfig, from_dict
from bench.trial.loop import run_trial
result = run_trial(from_dict(BenchConfig, json.loads(sys.argv[1])))
assert result.status == "ok", result.error
rates = sorted(e.samples_per_s for e in result.epochs)  # its timed windows: the median one
print(json.dumps({"samples_per_s": rates[len(rates) // 2]}))
"""


def run(code: str, cfg: dict) -> float:
    from bench.envs import interpreters

    out = subprocess.run(
        [interpreters.python_for(cfg["framework"]["name"]), "-c", code, json.dumps(cfg)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(json.loads(out.strip().splitlines()[-1])["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--windows", type=int, default=5,
        help="timed windows of --steps steps in each process; its median window is its figure",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--frameworks", default="torch,tf,mxnet")
    parser.add_argument(
        "--set", action="append", default=[], help="KEY=VALUE on bench's side only (e.g. "
        "telemetry.enabled=false), to find what costs it"
    )  # fmt: skip
    args = parser.parse_args()

    from bench.core.config import BenchConfig, flatten, to_dict

    frameworks = args.frameworks.split(",")
    codes = {"torch": BARE_TORCH, "tf": BARE_TF, "mxnet": BARE_MXNET}
    cfgs = {}
    for framework in frameworks:
        cfg = BenchConfig(
            batch_size=args.batch_size,
            epochs=args.windows,
            steps_per_epoch=args.steps,
            warmup_steps=3,
            threads=args.threads,
        )
        cfg.framework.name, cfg.model.name = framework, args.model
        cfgs[framework] = to_dict(cfg)
    ours_cfgs = {}
    for framework, data in cfgs.items():
        ours = json.loads(json.dumps(data))
        for item in args.set:
            key, _, value = item.partition("=")
            node = ours
            *path, last = key.split(".")
            for part in path:
                node = node[part]
            if last not in node:
                raise SystemExit(f"--set {key}: not a config key ({sorted(flatten(data))[:5]}...)")
            node[last] = json.loads(value) if value not in ("", "auto") else value
        ours_cfgs[framework] = ours
    threads = (
        f"threads={args.threads}"
        if args.threads
        else "threads=0 (bench) / framework defaults (bare)"
    )
    print(
        f"model={args.model} batch={args.batch_size} {threads} {args.windows} windows of "
        f"{args.steps} steps each process (3 warm-up; its median window counts) "
        f"rounds={args.rounds}, interleaved"
        + (f"; bench side: {' '.join(args.set)}" if args.set else "")
    )
    bare: dict[str, list[float]] = {f: [] for f in frameworks}
    ours: dict[str, list[float]] = {f: [] for f in frameworks}
    started = time.time()
    for i in range(args.rounds):
        for framework in frameworks:
            # alternate which side goes first, so that neither always runs after the other
            sides = [
                ("bare", codes[framework], cfgs[framework]),
                ("bench", BENCH, ours_cfgs[framework]),
            ]
            for name, code, cfg in sides if i % 2 == 0 else sides[::-1]:
                (bare if name == "bare" else ours)[framework].append(run(code, cfg))
        print(f"round {i + 1}: " + "  ".join(
            f"{f} {ours[f][-1] / bare[f][-1]:.3f}" for f in frameworks
        ) + f"  ({time.time() - started:.0f} s)", flush=True)  # fmt: skip
    head = f"{'framework':10} {'bare samples/s':>15} {'bench samples/s':>16} {'ratio':>7}"
    print(head + "  ratios per round")
    for framework in frameworks:
        b, o = statistics.median(bare[framework]), statistics.median(ours[framework])
        ratios = [x / y for x, y in zip(ours[framework], bare[framework], strict=True)]
        print(
            f"{framework:10} {b:15.2f} {o:16.2f} {statistics.median(ratios):7.3f}  "
            + " ".join(f"{r:.3f}" for r in ratios)
        )


if __name__ == "__main__":
    main()
