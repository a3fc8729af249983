"""``python -m bench.models``: the image-model inventory, one line per model and framework
(:mod:`bench.trial.models.inventory` counts the lines).

By default every model is listed at its reference input (224x224 with 1000 classes;
Inception-v3 299x299; LeNet-5 32x32 with 10 classes) for every framework installed here;
``--image-size``, ``--num-classes``, ``--framework``, ``--model`` and ``--source`` choose
others.  A framework that lives in its own environment (MXNet, ``.venv-mxnet``) has its
lines counted there, by ``python -m bench.trial.models.inventory`` run with that environment's
interpreter, and printed after the others.

The default inventory builds 18 models (VGG-16 has 138M parameters) and counts their FLOPs:
about a minute of CPU time on 2 cores (each line shows its seconds; several minutes of wall
time on a busy machine).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence

from bench.core.frameworks import own_environment
from bench.envs import interpreters
from bench.trial.models import inventory


def default_frameworks() -> list[str]:
    """The frameworks installed here, and those whose own environment exists."""
    return [
        f
        for f in inventory.FRAMEWORKS
        if inventory.importable(f) or (own_environment(f) and not interpreters.problem(f))
    ]


def _elsewhere(framework: str, args: argparse.Namespace) -> None:
    """Print ``framework``'s lines, counted by its own environment's interpreter."""
    problem = interpreters.problem(framework)
    if problem:
        print(f"{framework}: {problem}", flush=True)
        return
    python = interpreters.python_for(framework)
    command = [python, "-m", "bench.trial.models.inventory", *inventory.argv_for(framework, args)]
    subprocess.run(command, check=False)


def main(argv: Sequence[str] | None = None) -> int:
    args = inventory.options(argv)
    start = time.perf_counter()
    frameworks = args.framework or default_frameworks()
    here = [f for f in frameworks if inventory.importable(f)]
    elsewhere = [f for f in frameworks if f not in here and f in interpreters.OWN_ENVIRONMENTS]
    inventory.print_lines(args, here, header=not args.no_header)
    for framework in elsewhere:
        _elsewhere(framework, args)
    print(
        f"FLOPs: forward pass, one sample, multiply-add = 2 (convolutions and matrix products; "
        f"training ~3x).  Took {time.perf_counter() - start:.0f} s.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
