"""What a framework sees of this machine's GPUs, asked in a child process of the framework's
own interpreter: ``python -m bench.trial.runtime.device_probe FRAMEWORK`` prints one JSON line
``{"gpus": N, "detail": "..."}``.  Imports only the framework asked about (so it runs in
MXNet's environment, which has no torch, Hydra or MLflow).  Which function asks a framework
is a fact of its spec (``FrameworkSpec.device_probe``).  The sweep's device preflight
(:mod:`bench.checks.device`) reads it; a trial decides its device the same way.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from bench.core.frameworks import FRAMEWORKS


def torch_gpus() -> dict[str, Any]:
    import torch

    cuda = torch.version.cuda
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = sorted({torch.cuda.get_device_name(i) for i in range(n)})
    build = f"CUDA {cuda} build" if cuda else "CPU-only build (no CUDA compiled in)"
    return {"gpus": n, "detail": f"torch {torch.__version__}, {build}", "names": names}


def tf_gpus() -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    info = tf.sysconfig.get_build_info()
    if not tf.test.is_built_with_cuda():
        build = "CPU-only build"
    elif gpus:
        build = f"CUDA {info.get('cuda_version', '?')} build"
    else:
        build = (
            f"built for CUDA {info.get('cuda_version', '?')} but its CUDA libraries were not "
            "found or do not match the driver (install tensorflow[and-cuda])"
        )
    return {"gpus": len(gpus), "detail": f"TensorFlow {tf.__version__}, {build}", "names": []}


def mxnet_gpus() -> dict[str, Any]:
    import mxnet as mx

    cuda = mx.runtime.Features().is_enabled("CUDA")
    n = 0
    if cuda:
        try:
            n = mx.context.num_gpus()
        except mx.base.MXNetError:
            n = 0
    build = "CUDA build" if cuda else "CPU-only build (install its CUDA build, e.g. mxnet-cu117)"
    return {"gpus": n, "detail": f"MXNet {mx.__version__}, {build}", "names": []}


def jax_gpus() -> dict[str, Any]:
    import jax

    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend: jaxlib's CPU build without its CUDA plugin
        gpus = []
    build = "CUDA plugin" if gpus else "CPU only (its CUDA plugin, jax[cuda12], is not installed)"
    names = sorted({str(d.device_kind) for d in gpus})
    return {"gpus": len(gpus), "detail": f"jax {jax.__version__}, {build}", "names": names}


_FUNCTIONS = {f.__name__: f for f in (torch_gpus, tf_gpus, mxnet_gpus, jax_gpus)}
# Each framework's probe, the function its spec names.
PROBES: dict[str, Callable[[], dict[str, Any]]] = {
    name: _FUNCTIONS[spec.device_probe] for name, spec in FRAMEWORKS.items()
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in PROBES:
        print(
            f"usage: python -m bench.trial.runtime.device_probe {{{','.join(PROBES)}}}",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(PROBES[argv[0]]()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
