"""framework=jax carries Keras' random state through the jitted stateless step (issue 35): a
seed generator's state (Dropout's, stochastic depth's) is a non-trainable variable that the
step returns advanced, so each step draws new masks, and the same trial seed draws the same
ones again.  Each check runs in a child process of its own (Keras picks its backend once
per process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from bench.trial import frameworks
    from bench.core.config import (
        BenchConfig, DataConfig, FrameworkConfig, ModelConfig, OptimizerConfig,
    )
    from bench.trial.data import synthetic

    frameworks.before_import(BenchConfig(framework=FrameworkConfig(name="jax")), 1)
    adapter = frameworks.load("jax")
    out = []
    for seed in map(int, sys.argv[3].split(",")):
        cfg = BenchConfig(
            framework=FrameworkConfig(name="jax"), model=ModelConfig(name=sys.argv[1]),
            batch_size=4, image_size=int(sys.argv[2]), data=DataConfig(num_batches=2),
            optimizer=OptimizerConfig(name="sgd", lr=0.01), seed=seed,
        )
        adapter.configure(cfg, 1)
        session = adapter.prepare(cfg, synthetic(cfg))
        net = session.net
        seeds = [i for i, v in enumerate(net.model.non_trainable_variables)
                 if "seed_generator" in v.path]
        states, losses = [], []
        for _ in range(3):
            states.append([np.asarray(net.non_trainable[i]).tolist() for i in seeds])
            session.step(session.next_batch())
            session.sync()
            losses.append(session.take_mean_loss())
        out.append({"generators": len(seeds), "states": states, "losses": losses})
    print(json.dumps(out))
    """
)


def run(model: str, image_size: int, seeds: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, model, str(image_size), seeds],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def advances(states: list[list]) -> None:
    for before, after in zip(states, states[1:], strict=False):
        for gen_before, gen_after in zip(before, after, strict=True):
            assert gen_before != gen_after, "a step left a seed generator where it was"


def test_dropout_draws_new_masks_each_step_and_a_seed_repeats_them() -> None:
    """Stochastic depth (efficientnet_b4) keeps its state in the same kind of variable."""
    first, again, other = run("alexnet", 64, "0,0,1")
    assert first["generators"] == 2  # the classifier's two Dropout layers
    advances(first["states"])
    assert again == first, "the same trial seed must draw the same masks"
    assert other["states"][0] != first["states"][0]
