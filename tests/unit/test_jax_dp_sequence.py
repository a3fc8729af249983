"""distributed=jax_dp with the zoo's sequence models (issue 35): the jax session's sharded
step splits a sequence batch's inputs and every array of its targets tuple (labels; CTC's
label lengths and frames too) along the batch axis over 2 host devices in a child process,
keeps the state replicated, and trains as the undistributed session at the same global
batch: the same first-step loss, the same losses after, falling.  (The preflight's side:
tests/unit/test_jax_sequence_models.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# (model, source): each trained undistributed and under jax_dp in the child.
RUNS = [("transformer", "bench"), ("transformer", "flax"), ("deepspeech2", "bench")]
STEPS = 6

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    from bench.trial import frameworks
    from bench.trial.data import load
    from tests.unit.test_jax_dp_sequence import RUNS, STEPS
    from tests.unit.test_jax_sequence_models import config

    def trained(name, source, shard):
        cfg = config(name, source)
        cfg.batch_size = 8  # the global batch: 4 a device under jax_dp
        frameworks.before_import(cfg, 1)
        adapter = frameworks.load("jax")
        adapter.configure(cfg, 1)  # seeded: the same initial weights each time
        import jax
        session = adapter.prepare(cfg, load(cfg))
        if shard:
            session.data_parallel(jax.devices("cpu")[:2])
        x, targets = batch = session.next_batch()
        losses = []
        for _ in range(STEPS):
            session.step(batch)
            session.sync()
            losses.append(session.take_mean_loss())
        arrays = [x, *targets]
        return {
            "losses": losses,
            "shards": [[s.data.shape[0] for s in a.addressable_shards] for a in arrays],
            "batch": [a.shape[0] for a in arrays],
            "replicated": all(
                a.sharding.is_fully_replicated and len(a.sharding.device_set) == 2
                for a in jax.tree.leaves(session.net.trainable)
            ) if shard else None,
        }

    import jax
    out = {"devices": len(jax.devices("cpu"))}
    for name, source in RUNS:
        out[f"{name}/{source}"] = [trained(name, source, shard) for shard in (False, True)]
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_sequence_models_train_under_jax_dp_as_undistributed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2
    for name, source in RUNS:
        one, two = out[f"{name}/{source}"]
        targets = 3 if name == "deepspeech2" else 1  # CTC: labels, label lengths, frames
        assert one["batch"] == two["batch"] == [8] * (1 + targets)
        assert one["shards"] == [[8]] * (1 + targets)  # undistributed: one device, whole
        assert two["shards"] == [[4, 4]] * (1 + targets), (name, two["shards"])
        assert two["replicated"]
        first, last = one["losses"][0], one["losses"][-1]
        assert last < 0.9 * first, (name, source, one["losses"])  # it trains
        # The global batch's loss and gradients, whatever the devices: the same losses.
        for a, b in zip(one["losses"], two["losses"], strict=True):
            assert abs(a - b) <= 1e-4 * abs(a), (name, source, one["losses"], two["losses"])
