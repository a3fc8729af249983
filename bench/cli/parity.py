"""``python -m bench.parity``: do the frameworks train a model the same way?

Builds the model in each framework from one set of initial weights (PyTorch's seeded
initialization, copied into the others), feeds every side the same batches in the same
order through its own trial session (the model, loss and optimizer a trial builds), runs
N optimizer steps, and prints each step's loss per framework and the largest relative
deviations from the first framework.  Exit 0 when every deviation is within the
tolerance, 1 when one is not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench.core.frameworks import FRAMEWORKS as SPECS
from bench.parity.check import DEFAULT_TOLERANCE, FRAMEWORKS
from bench.parity.strategy import ASYNC, ASYNC_TOLERANCE, CHECKED, whole_batch
from bench.trial.distributed.registry import NONE, distributes

STRATEGIES = CHECKED


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.parity",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Covered: image models (lenet5, alexnet, vgg16, resnet18/50 and the rest of "
        "bench's zoo that each framework builds), SGD with momentum and weight decay, Adam. "
        "fp32 on the CPU; dropout is set to the identity on every side.",
    )
    p.add_argument("--model", default="lenet5")
    p.add_argument(
        "--frameworks",
        default=None,
        help=f"comma-separated; the first is the reference (default: {','.join(FRAMEWORKS)}; "
        "with --distributed, the one framework to run it in, default its first)",
    )
    p.add_argument("--optimizer", default="sgd", help="sgd or adam (default: %(default)s)")
    p.add_argument("--lr", type=float, default=None, help="default: 0.01 (sgd), 0.001 (adam)")
    p.add_argument(
        "--momentum",
        type=float,
        default=None,
        help="sgd (default: 0.9; 0 with an asynchronous --distributed, whose update order "
        "momentum would weigh)",
    )
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help=f"default: {DEFAULT_TOLERANCE:g} ({ASYNC_TOLERANCE:g} with an asynchronous "
        f"--distributed: {', '.join(ASYNC)})",
    )
    p.add_argument(
        "--distributed",
        default=NONE,
        help="compare this strategy at --workers x (batch / workers), run as a real trial, "
        "with the undistributed run at the full batch, in one framework (model_parallel: the "
        "split model against the unsplit one at the same batch; an asynchronous strategy: "
        "against the workers' shares taken one after another, a looser check): one of "
        f"{', '.join(STRATEGIES)}",
    )
    p.add_argument("--workers", type=int, default=2, help="with --distributed (default: 2)")
    p.add_argument(
        "--tuning",
        default="default",
        help="default, or best: also check every setting a tuning=best search may pick "
        "(compile, memory format, oneDNN, threads) as a side of its own; a setting that fails "
        "is refused to later searches of that framework and model (docs/tuning.md)",
    )
    p.add_argument("--quiet", action="store_true", help="no per-step table")
    lm = p.add_argument_group(
        "causal LMs (model=hf)",
        "the logit parity of a Hugging Face family between transformers (torch) and "
        "keras-hub (tf): the torch model saved as a local checkpoint, loaded by keras-hub's "
        "Backbone.from_preset, both sides' logits on one token batch (docs/parity.md)",
    )
    lm.add_argument("--lm", default="", help="families, comma-separated, or all")
    lm.add_argument(
        "--lm-config",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a config field in transformers' spelling (repeatable; default: the small "
        "sizes of bench.parity.lm.SIZES)",
    )
    lm.add_argument(
        "--perturb",
        type=float,
        default=0.0,
        help="scale one weight of the keras side by 1 + this after loading (the check must "
        "then fail)",
    )
    return p


def _lm_overrides(pairs: list[str]) -> tuple[dict[str, object], list[str]]:
    import ast

    fields: dict[str, object] = {}
    problems = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            problems.append(f"--lm-config: FIELD=VALUE, got {pair!r}")
            continue
        try:
            fields[key.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            fields[key.strip()] = text.strip()
    return fields, problems


def lm_main(args: argparse.Namespace) -> int:
    """``--lm``: the logit parity of each family named; 0 when every one passes."""
    from bench.trial.models.keras_hub_lm import FAMILIES, spelt

    names = sorted(FAMILIES) if args.lm == "all" else [n.strip() for n in args.lm.split(",")]
    overrides, found = _lm_overrides(args.lm_config)
    found += [
        f"--lm: keras-hub's families are {', '.join(sorted(FAMILIES))} (or all); got {name!r}"
        for name in names
        if name not in FAMILIES
    ]
    if args.tolerance is not None and not (args.tolerance > 0):
        found.append(f"--tolerance: above 0, got {args.tolerance}")
    if found:
        return _refuse(found)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from bench.parity import lm

    tolerance = args.tolerance if args.tolerance is not None else lm.DEFAULT_TOLERANCE
    passed, refused = True, False
    for name in names:
        sizes = spelt(name, {**spelt(name, lm.default_sizes(name)), **spelt(name, overrides)})
        outcome = lm.check_lm(name, sizes, tolerance=tolerance, seed=args.seed,
                              perturb=args.perturb)  # fmt: skip
        print(outcome.line(), flush=True)
        passed &= outcome.passed
        refused |= bool(outcome.problem)
    return 0 if passed else (2 if refused and len(names) == 1 else 1)


def _frameworks(args: argparse.Namespace) -> list[str]:
    if args.frameworks is None:
        if args.distributed in STRATEGIES:
            return [STRATEGIES[args.distributed][0]]
        return list(FRAMEWORKS)
    return [f.strip() for f in args.frameworks.split(",") if f.strip()]


def problems(args: argparse.Namespace) -> list[str]:
    from bench.envs import interpreters
    from bench.trial import parity as side
    from bench.trial.models import MODELS, native_problem

    found: list[str] = []
    frameworks = _frameworks(args)
    labels, frameworks = frameworks, []
    for label in labels:  # a framework, or one with its model's source: jax[source=flax]
        try:
            name, settings = side.split(label)
        except ValueError as exc:
            found.append(f"--frameworks: {exc}")
            continue
        frameworks.append(name if set(settings) <= {side.SOURCE} else label)
        source = settings.get(side.SOURCE)
        spec = MODELS.get(args.model)
        if source and spec is not None and not spec.has_builder(name, source):
            found.append(f"--frameworks: {label}: {native_problem(name, args.model, source)}")
    unknown = [f for f in frameworks if f not in FRAMEWORKS]
    if distributes(args.distributed):
        if args.distributed not in STRATEGIES:
            found.append(
                f"--distributed: one of {', '.join(STRATEGIES)} (the strategies the check "
                f"runs on the CPU); got {args.distributed!r}"
            )
        elif len(frameworks) != 1 or frameworks[0] not in STRATEGIES[args.distributed]:
            found.append(
                f"--frameworks: with --distributed {args.distributed}, one of "
                f"{', '.join(STRATEGIES[args.distributed])}; got {args.frameworks!r}"
            )
        if whole_batch(args.distributed) and args.workers != 2:
            found.append(f"--workers: {args.distributed} splits the model into 2 stages; got "
                         f"{args.workers}")  # fmt: skip
        elif args.workers < 2:
            found.append(f"--workers: at least 2, got {args.workers}")
        elif args.batch_size % args.workers and not whole_batch(args.distributed):
            found.append(
                f"--batch-size: {args.batch_size} does not split into {args.workers} equal "
                "workers' batches"
            )
    elif args.tuning not in ("default", "best"):
        found.append(f"--tuning: default or best, got {args.tuning!r}")
    elif (
        unknown
        or len(frameworks) < (1 if args.tuning == "best" else 2)
        or len(set(labels)) != len(labels)
    ):
        found.append(
            f"--frameworks: two or more of {', '.join(FRAMEWORKS)}, each once (jax also as "
            f"jax[source=flax], the Flax model); got {','.join(labels)!r}"
        )
    spec = MODELS.get(args.model)
    if spec is None or spec.task != "image":
        images = sorted(n for n, m in MODELS.items() if m.task == "image")
        found.append(f"--model: one of the image models {', '.join(images)}; got {args.model!r}")
    else:
        for name in dict.fromkeys(f for f in frameworks if f in SPECS):
            if not spec.has_builder(name):  # MXNet's zoo is smaller
                built = sorted(n for n, m in MODELS.items() if m.has_builder(name))
                found.append(
                    f"--model: {args.model} has no {SPECS[name].title} build (those: "
                    f"{', '.join(built)})"
                )
        if args.image_size < spec.min_image_size:
            found.append(
                f"--image-size: {args.model} needs at least {spec.min_image_size}, "
                f"got {args.image_size}"
            )
    if args.optimizer not in ("sgd", "adam"):
        found.append(f"--optimizer: sgd or adam, got {args.optimizer!r}")
    for name in ("steps", "batch_size", "classes"):
        if getattr(args, name) < 1:
            found.append(f"--{name.replace('_', '-')}: at least 1, got {getattr(args, name)}")
    if args.classes == 1:
        found.append("--classes: at least 2")
    if args.tolerance is not None and not (args.tolerance > 0):
        found.append(f"--tolerance: above 0, got {args.tolerance}")
    if args.lr is not None and not (args.lr > 0):
        found.append(f"--lr: above 0, got {args.lr}")
    if (args.momentum is not None and not (0 <= args.momentum < 1)) or args.weight_decay < 0:
        found.append("--momentum: in [0, 1); --weight-decay: at least 0")
    runs = not distributes(args.distributed) or args.distributed in STRATEGIES
    for framework in dict.fromkeys(frameworks) if runs else []:
        problem = interpreters.problem(framework)
        if problem and not interpreters.overridden(framework):
            problem = _make_environment(framework) or interpreters.problem(framework)
        if problem:
            found.append(f"--frameworks: {problem}")
    return found


def _make_environment(framework: str) -> str:
    """Make ``framework``'s own environment on first use, as a sweep does (``bench setup``,
    run as a command in its own process); '' once it is made."""
    done = subprocess.run([sys.executable, "-m", "bench.cli.setup", framework], check=False)
    return "" if done.returncode == 0 else f"{framework}: `bench setup {framework}` failed"


def _refuse(found: list[str]) -> int:
    """Say every problem of the command line, nothing having run: exit status 2."""
    print("bench.parity: bad input; nothing was run:", file=sys.stderr)
    for problem in found:
        print(f"  {problem}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.lm:
        return lm_main(args)
    found = problems(args)
    if found:
        return _refuse(found)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from bench.parity import check, strategy
    from bench.trial import parity as side

    asynchronous = args.distributed in ASYNC
    momentum = args.momentum if args.momentum is not None else (0.0 if asynchronous else 0.9)
    default = ASYNC_TOLERANCE if asynchronous else DEFAULT_TOLERANCE
    tolerance = args.tolerance if args.tolerance is not None else default
    spec = side.Spec(
        model=args.model,
        batch_size=args.batch_size,
        image_size=args.image_size,
        num_classes=args.classes,
        optimizer=args.optimizer,
        lr=args.lr if args.lr is not None else (0.01 if args.optimizer == "sgd" else 0.001),
        momentum=momentum if args.optimizer == "sgd" else 0.0,
        weight_decay=args.weight_decay,
        steps=args.steps,
        seed=args.seed,
    )
    frameworks = _frameworks(args)  # the labels: jax[source=flax] a side of its own
    if asynchronous:
        outcome: check.Outcome = strategy.check_async(
            spec, frameworks[0], args.distributed, args.workers, tolerance
        )
    elif distributes(args.distributed):
        outcome = strategy.check_strategy(
            spec, frameworks[0], args.distributed, args.workers, tolerance
        )
    elif args.tuning == "best":
        from bench.parity import at_best

        outcome, refusals = at_best.check_at_best(spec, frameworks, tolerance)
        print(check.format_outcome(outcome, show_steps=not args.quiet))
        for side_label, reason in refusals.items():
            print(f"refused for tuning=best: {side_label}: {reason}")
        return 0 if at_best.plain_passed(outcome) else 1
    else:
        outcome = check.check(spec, frameworks, tolerance)
    print(check.format_outcome(outcome, show_steps=not args.quiet))
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
