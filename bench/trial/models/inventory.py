"""The image-model inventory's lines, counted in this interpreter: one line per model and
framework, each a model as a trial builds it: its parameter count (PyTorch: all parameters;
Keras: trainable weights), the reference count where one applies, and the forward FLOPs per
sample as that framework counts them (see :mod:`bench.trial.models.flops`).  Each framework is
imported only if asked for, so it works where only one is installed.

``python -m bench.models`` (:mod:`bench.cli.models`, on the host) prints the inventory;
``python -m bench.trial.models.inventory ...`` (the same options) prints the lines of the
frameworks importable in the interpreter that runs it: the host runs it with MXNet's own
environment's interpreter (``.venv-mxnet``) for MXNet's lines.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.core.frameworks import FRAMEWORKS as SPECS
from bench.trial.models import MODELS, SOURCES, ModelSpec, build, common, flops, stock

FRAMEWORKS = ("torch", "tf", "mxnet")  # the frameworks whose own builds are counted
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


def importable(framework: str) -> bool:
    """Whether ``framework`` is installed in this interpreter."""
    return importlib.util.find_spec(SPECS[framework].module) is not None


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


def import_framework(framework: str) -> None:
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.models",
        description="Parameter counts and forward FLOPs per sample of every model, as each "
        "framework builds it.  The default inventory takes about a minute on 2 idle CPU cores.",
    )
    p.add_argument("--model", nargs="+", choices=IMAGE_MODELS, default=IMAGE_MODELS)
    p.add_argument("--framework", nargs="+", choices=FRAMEWORKS, default=None)
    p.add_argument(
        "--source",
        nargs="+",
        choices=SOURCES,
        default=["bench"],
        help="bench's own architecture and/or the framework library's model (stock)",
    )
    p.add_argument(
        "--image-size",
        type=int,
        default=0,
        help="input height and width (default: each model's reference size: 224, "
        "Inception-v3 299, LeNet-5 32)",
    )
    p.add_argument(
        "--num-classes",
        type=int,
        default=0,
        help="classes (default: each model's reference: 1000, LeNet-5 10)",
    )
    p.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    return p


def options(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line's options, refused (exit 2) where a size is negative."""
    args = parser().parse_args(argv)
    if args.image_size < 0 or args.num_classes < 0:
        parser().error("--image-size and --num-classes must be positive")
    return args


HEADER = (
    f"{'model':<16} {'fw':<6} {'source':<6} {'input':>9} {'classes':>7} "
    f"{'parameters':>13} {'':<13} {'forward/sample':>16}"
)


def argv_for(framework: str, args: argparse.Namespace) -> list[str]:
    """The options that make ``python -m bench.trial.models.inventory`` print ``framework``'s
    lines of the inventory ``args`` asks for, without the header."""
    argv = ["--framework", framework, "--model", *args.model, "--source", *args.source]
    argv += ["--image-size", str(args.image_size), "--num-classes", str(args.num_classes)]
    return [*argv, "--no-header"]


def print_lines(args: argparse.Namespace, frameworks: Sequence[str], header: bool) -> None:
    """Print the inventory's lines of ``frameworks`` (each importable here), after the
    header where ``header``.  Each framework is imported first, so that per-line times are
    build-and-count times."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    for framework in frameworks:
        import_framework(framework)
    if header:
        print(HEADER, flush=True)
    for name in args.model:
        spec = MODELS[name]
        size = args.image_size or spec.reference_image_size
        classes = args.num_classes or spec.reference_num_classes
        for source in args.source:
            for framework in frameworks:
                print(inventory_line(framework, spec, source, size, classes), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """The lines of the frameworks asked for (default: those installed here) that this
    interpreter can import."""
    args = options(argv)
    frameworks = [f for f in args.framework or FRAMEWORKS if importable(f)]
    print_lines(args, frameworks, header=not args.no_header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
