"""``python -m bench.models``: the image-model inventory, one line per model and framework.

Each line is a model as a trial builds it: its parameter count (PyTorch: all parameters;
Keras: trainable weights), the reference count where one applies, and the forward FLOPs per
sample as that framework counts them (see :mod:`bench.models.flops`).  By default every model
is listed at its reference input (224x224 with 1000 classes; Inception-v3 299x299; LeNet-5
32x32 with 10 classes) for both frameworks; ``--image-size``, ``--num-classes``,
``--framework``, ``--model`` and ``--source`` choose others.  Each framework is imported only
if asked for, so the command works where only one is installed.  MXNet lives in its own
environment (``.venv-mxnet``): its lines are counted there, by running this command with
that environment's interpreter, and printed after the others.

The default inventory builds 18 models (VGG-16 has 138M parameters) and counts their FLOPs:
about a minute of CPU time on 2 cores (each line shows its seconds; several minutes of wall
time on a busy machine).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.envs import interpreters
from bench.models import MODELS, SOURCES, ModelSpec, build, common, flops, stock

FRAMEWORKS = ("torch", "tf", "mxnet")
_MODULE = {"torch": "torch", "tf": "tensorflow", "mxnet": "mxnet"}
# The image classifiers; sequence models (other tasks) are sized by ModelConfig instead.
IMAGE_MODELS = [name for name, spec in MODELS.items() if spec.task == "image"]


def _torch_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def _keras_params(model: Any) -> int:
    return sum(_prod(w.shape) for w in model.trainable_weights)


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for dim in shape:
        out *= int(dim)
    return out


def count(framework: str, model: Any, image_size: int) -> tuple[int, int | None]:
    """(parameters, forward FLOPs per sample or None if uncountable) of a built model."""
    if framework == "mxnet":
        params = common.mxnet_trainable_params(model)
    else:
        params = _torch_params(model) if framework == "torch" else _keras_params(model)
    return params, flops.flops_per_sample(framework, model, image_size)


def _importable(framework: str) -> bool:
    return importlib.util.find_spec(_MODULE[framework]) is not None


def _default_frameworks() -> list[str]:
    """The frameworks installed here, and MXNet where its own environment exists."""
    return [
        f for f in FRAMEWORKS if _importable(f) or (f == "mxnet" and not interpreters.problem(f))
    ]


def _unavailable(framework: str, spec: ModelSpec, source: str, image_size: int) -> str:
    """Why this line cannot be built ('' if it can)."""
    if image_size < spec.min_image_size:
        return f"needs image size >= {spec.min_image_size}"
    if not spec.has_builder(framework):
        return f"no {framework} build"
    if source == "stock" and framework == "mxnet":
        return "no stock version (not wired for MXNet)"
    if source == "stock":
        if not spec.stock_name(framework):
            library = "torchvision" if framework == "torch" else "keras.applications"
            return f"no stock version ({library} has none)"
        if framework == "torch" and not stock.torchvision_available():
            return "stock needs torchvision (not installed)"
    return ""


def _import(framework: str) -> None:
    """Import the framework up front, so that per-line times are build-and-count times."""
    if framework == "torch":
        import torch  # noqa: F401
    elif framework == "mxnet":
        import mxnet  # noqa: F401
    else:
        import keras  # noqa: F401
        import tensorflow  # noqa: F401


def _free(framework: str) -> None:
    if framework == "tf":
        import keras

        keras.backend.clear_session()
    gc.collect()


def inventory_line(
    framework: str, spec: ModelSpec, source: str, image_size: int, num_classes: int
) -> str:
    size = f"{image_size}x{image_size}"
    head = f"{spec.name:<16} {framework:<6} {source:<6} {size:>9} {num_classes:>7}"
    why = _unavailable(framework, spec, source, image_size)
    if why:
        return f"{head}  -- {why}"
    start = time.perf_counter()
    model = build(framework, spec.name, num_classes, image_size, source=source)
    params, fwd = count(framework, model, image_size)
    del model
    _free(framework)
    ref = ""
    if source == "bench" and num_classes == spec.reference_num_classes:
        ref = "= reference" if params == spec.reference_params else f"!= {spec.reference_params:,}"
    return (
        f"{head} {params:>13,} {ref:<13} {_gflops(fwd):>16}  ({time.perf_counter() - start:.1f} s)"
    )


def _gflops(value: int | None) -> str:
    return "not countable" if value is None else f"{value / 1e9:.4g} GFLOPs"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.models",
        description="Parameter counts and forward FLOPs per sample of every model, as each "
        "framework builds it.  The default inventory takes about a minute on 2 idle CPU cores.",
    )
    parser.add_argument("--model", nargs="+", choices=IMAGE_MODELS, default=IMAGE_MODELS)
    parser.add_argument("--framework", nargs="+", choices=FRAMEWORKS, default=None)
    parser.add_argument(
        "--source",
        nargs="+",
        choices=SOURCES,
        default=["bench"],
        help="bench's own architecture and/or the framework library's model (stock)",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        default=0,
        help="input height and width (default: each model's reference size: 224, "
        "Inception-v3 299, LeNet-5 32)",
    )
    parser.add_argument(
        "--num-classes",
        type=int,
        default=0,
        help="classes (default: each model's reference: 1000, LeNet-5 10)",
    )
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    return parser


def _elsewhere(framework: str, args: argparse.Namespace) -> None:
    """Print ``framework``'s lines, counted by its own environment's interpreter."""
    problem = interpreters.problem(framework)
    if problem:
        print(f"{framework}: {problem}", flush=True)
        return
    argv = ["--framework", framework, "--model", *args.model, "--source", *args.source]
    argv += ["--image-size", str(args.image_size), "--num-classes", str(args.num_classes)]
    command = [interpreters.python_for(framework), "-m", "bench.models", *argv, "--no-header"]
    subprocess.run(command, check=False)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.image_size < 0 or args.num_classes < 0:
        _parser().error("--image-size and --num-classes must be positive")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    start = time.perf_counter()
    frameworks = args.framework or _default_frameworks()
    here = [f for f in frameworks if _importable(f)]
    elsewhere = [f for f in frameworks if f not in here and f in interpreters.OWN_ENVIRONMENTS]
    for framework in here:
        _import(framework)
    if not args.no_header:
        print(
            f"{'model':<16} {'fw':<6} {'source':<6} {'input':>9} {'classes':>7} "
            f"{'parameters':>13} {'':<13} {'forward/sample':>16}",
            flush=True,
        )
    for name in args.model:
        spec = MODELS[name]
        size = args.image_size or spec.reference_image_size
        classes = args.num_classes or spec.reference_num_classes
        for source in args.source:
            for framework in here:
                print(inventory_line(framework, spec, source, size, classes), flush=True)
    for framework in elsewhere:
        _elsewhere(framework, args)
    print(
        f"FLOPs: forward pass, one sample, multiply-add = 2 (convolutions and matrix products; "
        f"training ~3x).  Took {time.perf_counter() - start:.0f} s.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
