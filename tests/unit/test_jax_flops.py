"""framework=jax counts FLOPs the zoo's way (issue 35): contractions only, from the traced
jaxpr of one sample's forward, equal to torch's count for the same model and input, for the
Keras models on Keras' JAX backend and the Flax NNX ones alike."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from bench.trial.models import build, flops

jax = pytest.importorskip("jax")
jnp = jax.numpy
torch = pytest.importorskip("torch")


def test_a_convolution_counts_its_window_and_in_channels_per_group() -> None:
    x = jnp.ones((1, 9, 9, 4))
    w = jnp.ones((3, 3, 2, 6))  # HWIO, 2 groups: 2 in-channels per group

    def conv(x: object, w: object) -> object:
        dims = ("NHWC", "HWIO", "NHWC")
        return jax.lax.conv_general_dilated(
            x, w, (1, 1), "VALID", dimension_numbers=dims, feature_group_count=2
        )

    assert flops.jax_forward_flops(conv, x, w) == 2 * (7 * 7 * 6) * (3 * 3 * 2)


def test_matrix_products_count_the_contracted_dimensions_inside_nested_jaxprs() -> None:
    a, b = jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))
    inner = jax.jit(lambda a, b: jnp.einsum("bij,bjk->bik", a, b))
    assert flops.jax_forward_flops(inner, a, b) == 2 * (2 * 3 * 5) * 4
    # Element-wise work is not a contraction: nothing counted for it.
    assert flops.jax_forward_flops(lambda a: jax.nn.relu(a * a + 1).sum(), a) == 0


def test_a_scan_counts_its_body_times_its_length_and_a_while_loop_is_not_counted() -> None:
    w = jnp.ones((4, 4))

    def scanned(w: object) -> object:
        return jax.lax.scan(lambda h, _: (h @ w, None), jnp.ones((1, 4)), length=5)[0]

    assert flops.jax_forward_flops(scanned, w) == 5 * 2 * 4 * 4

    def looped(w: object) -> object:
        return jax.lax.while_loop(lambda h: h.sum() < 100, lambda h: h @ w, jnp.ones((1, 4)))

    assert flops.jax_forward_flops(looped, w) is None


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from bench.trial import frameworks
    from bench.core.config import BenchConfig, DataConfig, FrameworkConfig, ModelConfig
    from bench.trial.data import synthetic

    out = {}
    for source in ("bench", "flax"):
        for name in sys.argv[1:]:
            cfg = BenchConfig(
                framework=FrameworkConfig(name="jax"), model=ModelConfig(name=name, source=source),
                batch_size=2, image_size=32, data=DataConfig(num_batches=1),
            )
            frameworks.before_import(cfg, 1)
            adapter = frameworks.load("jax")
            adapter.configure(cfg, 1)
            session = adapter.prepare(cfg, synthetic(cfg))
            out[f"{source}/{name}"] = session.forward_flops_per_sample()
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_jax_sessions_count_torchs_flops_for_keras_and_flax_models() -> None:
    """Through each jax session (a child process: Keras picks its backend once per process),
    lenet5 and resnet18 at 32 px, against torch's FlopCounterMode on the torch model."""
    models = ("lenet5", "resnet18")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *models], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for name in models:
        expected = flops.torch_flops_per_sample(build("torch", name, 10, 32), 32)
        assert got[f"bench/{name}"] == expected, (name, got)  # Keras on JAX
        assert got[f"flax/{name}"] == expected, (name, got)  # Flax NNX
    assert got["bench/lenet5"] == 1_303_440  # test_model_zoo's count of LeNet by hand
