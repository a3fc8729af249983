"""``bench images``: build a framework's image under bench's content-hash tag, print what
compose.yaml needs to build the same images under the same tags
(:func:`bench.images.compose_env`), or list and remove the images that newer ones of the same
kind have superseded (:mod:`bench.images.inventory`).

    bench images build torch --variant cpu --base-image bench-base:bookworm
    eval "$(bench images env --variant cpu)"; docker-compose build torch
    bench images list
    bench images prune --dry-run
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from bench.checks.rules import bad_image_reference
from bench.images import (
    COMPOSE_SERVICES,
    VARIANTS,
    BuildSpec,
    ImageError,
    client,
    compose_env,
    ensure,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench images",
        description="Build bench's image for a framework; list or remove superseded ones.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the image if its content-hash tag is missing")
    build.add_argument("name", choices=COMPOSE_SERVICES)
    env = sub.add_parser(
        "env",
        help="shell assignments for compose.yaml: bench's tags, pinned bases and build "
        'arguments (eval "$(bench images env)"; docker compose build)',
    )
    wheelhouse = os.environ.get("PIP_FIND_LINKS", "")
    for p in (build, env):
        p.add_argument("--variant", choices=VARIANTS, default="cpu")
        p.add_argument("--base-image", default="", help="default: the framework's official one")
        p.add_argument("--wheelhouse", default=wheelhouse if os.path.isdir(wheelhouse) else "")
    build.add_argument("--ca-bundle", default=os.environ.get("PIP_CERT", ""))
    sub.add_parser("list", help="bench's images in the engine, superseded ones marked")
    prune = sub.add_parser(
        "prune",
        help="remove the images a newer one of the same framework, variant, version and base "
        "has superseded (an image a container uses stays)",
    )
    prune.add_argument("--keep", type=_at_least_one, default=1, help="newest kept per kind")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")
    args = parser.parse_args(argv)
    base = getattr(args, "base_image", "")
    if base and bad_image_reference(base):  # before the engine answers with a traceback
        print(
            f"bench images: --base-image: {base!r} is not an image reference "
            "([REGISTRY[:PORT]/]NAME[:TAG][@DIGEST], lower-case NAME, or an image id)",
            file=sys.stderr,
        )
        return 2
    try:
        if args.command == "list":
            return _list()
        if args.command == "prune":
            return _prune(args.keep, args.dry_run)
        if args.command == "env":
            for key, value in compose_env(args.variant, args.base_image, args.wheelhouse).items():
                print(f"export {key}={shlex.quote(value)}")
            return 0
        spec = BuildSpec(args.name, args.variant, args.base_image, args.ca_bundle, args.wheelhouse)
        image = ensure(spec)
    except ImageError as exc:
        print(f"bench images: {exc}", file=sys.stderr)
        return 1
    how = f"built in {image.build_s:.0f} s" if image.build_s else "already built"
    print(f"{image.tag}  {image.id}  {image.size_bytes / 2**20:,.0f} MiB  ({how})")
    return 0


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1 expected, got {text!r}")
    return value


def _list() -> int:
    from bench.images import inventory

    images = inventory.held(client())
    stale = inventory.superseded(images)
    if images:
        print(inventory.table(images, {h.tag for h in stale}))
    if stale:
        frees = inventory.amount(inventory.unique_bytes(stale))
        print(
            f"{len(images)} bench image tag(s); {len(stale)} superseded: `bench images prune` "
            f"frees at least {frees} (the layers only they hold)"
        )
    else:
        print(f"{len(images)} bench image tag(s); none superseded")
    return 0


def _prune(keep: int, dry_run: bool) -> int:
    from bench.images import inventory

    c = client()
    usage = c.df()  # what the layers take now, and what each image shares
    stale = inventory.superseded(inventory.held(c, usage), keep)
    if dry_run:
        for h in stale:
            print(f"would remove {h.tag}")
        frees = inventory.amount(inventory.unique_bytes(stale))
        print(f"{len(stale)} superseded: removing them frees at least {frees}")
        return 0
    outcome = inventory.remove(c, stale)
    for h, why in outcome:
        print(f"removed {h.tag}" if not why else f"kept {h.tag}: {why}")
    gone = sum(1 for _, why in outcome if not why)
    shrunk = inventory.layers_bytes(usage) - inventory.layers_bytes(c.df())
    freed = inventory.amount(max(0, shrunk))
    print(f"removed {gone} of {len(stale)}; {freed} freed")
    return 0 if gone == len(stale) else 1


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
