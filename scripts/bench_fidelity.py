"""Harness fidelity: bench's samples/s against a bare training loop, side by side.

For each framework, alternately runs (a) bench's own trial (``bench.trial.run_trial``, as
the process launcher's worker does) and (b) a bare loop written out below, each in a fresh
process, on the same model, batch, data and threads.  Prints both throughputs and their
ratio (target: bench >= 0.98 of the bare loop).

    .venv/bin/python scripts/bench_fidelity.py [--model resnet50] [--repeats 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

BARE_TORCH = """
import json, sys, time, torch
from bench import models
from bench.config import BenchConfig, from_dict
from bench.data import synthetic
cfg = from_dict(BenchConfig, json.loads(sys.argv[1]))
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
start = time.perf_counter()
for i in range(cfg.steps_per_epoch):
    step(i)
elapsed = time.perf_counter() - start
print(json.dumps({"samples_per_s": cfg.steps_per_epoch * cfg.batch_size / elapsed}))
"""

BARE_TF = """
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import keras, numpy as np, tensorflow as tf
from bench import models
from bench.config import BenchConfig, from_dict
from bench.data import synthetic
cfg = from_dict(BenchConfig, json.loads(sys.argv[1]))
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
start = time.perf_counter()
for i in range(cfg.steps_per_epoch):
    train_step(*batches[i % len(batches)])
elapsed = time.perf_counter() - start
print(json.dumps({"samples_per_s": cfg.steps_per_epoch * cfg.batch_size / elapsed}))
"""

BENCH = """
import json, sys
from bench.config import BenchConfig, from_dict
from bench.trial import run_trial
result = run_trial(from_dict(BenchConfig, json.loads(sys.argv[1])))
assert result.status == "ok", result.error
print(json.dumps({"samples_per_s": result.summary["trial_samples_per_s"]}))
"""


def run(code: str, cfg: dict) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(cfg)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(json.loads(out.strip().splitlines()[-1])["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frameworks", default="torch,tf")
    args = parser.parse_args()

    from bench.config import BenchConfig, to_dict

    print(
        f"model={args.model} batch={args.batch_size} threads={args.threads} "
        f"steps={args.steps} (1 epoch, 3 warm-up) repeats={args.repeats}, alternating"
    )
    print(f"{'framework':10} {'bare samples/s':>15} {'bench samples/s':>16} {'ratio':>7}")
    for framework in args.frameworks.split(","):
        cfg = BenchConfig(
            batch_size=args.batch_size,
            epochs=1,
            steps_per_epoch=args.steps,
            warmup_steps=3,
            threads=args.threads,
        )
        cfg.framework.name, cfg.model.name = framework, args.model
        bare_code = BARE_TORCH if framework == "torch" else BARE_TF
        bare, ours = [], []
        started = time.time()
        for _ in range(args.repeats):
            bare.append(run(bare_code, to_dict(cfg)))
            ours.append(run(BENCH, to_dict(cfg)))
        b, o = statistics.median(bare), statistics.median(ours)
        print(
            f"{framework:10} {b:15.2f} {o:16.2f} {o / b:7.3f}   "
            f"(bare {[f'{v:.1f}' for v in bare]}, bench {[f'{v:.1f}' for v in ours]}, "
            f"{time.time() - started:.0f} s)"
        )


if __name__ == "__main__":
    main()
