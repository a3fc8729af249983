"""Image build time: Docker's legacy builder (how bench built images before it used
BuildKit: docker-py's ``api.build``, pip with ``--no-cache-dir``) against BuildKit through
the Docker CLI (``bench.images.buildkit``: pip's downloads in a cache mount).

For one framework's cpu image on a local base, it times:

    legacy, cold      DOCKER_BUILDKIT=0 docker build --no-cache, the Dockerfile of REV
    legacy, changed   the same after a change to the constraints (the pip layer rebuilt:
                      every package downloaded again)
    buildkit, cold    the current Dockerfile, BuildKit's cache (cache mounts too) emptied
    buildkit, changed the same after a change to the constraints (pip layer rebuilt, its
                      downloads from the cache mount)
    buildkit, same    a second build of unchanged inputs (every layer cached)

    .venv/bin/python scripts/measure/bench_image_build.py [--framework torch]
        [--base-image bench-base:bookworm] [--legacy-rev ba5141b^] [--wheelhouse DIR]

It empties BuildKit's build cache (``docker builder prune -af``): run it alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CA = "/etc/ssl/certs/ca-certificates.crt"


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])} ... failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return time.perf_counter() - t0


def context_at(rev: str, where: Path, wheelhouse: str) -> Path:
    """The repository at ``rev`` (git archive), with the CA bundle and wheels where the
    Dockerfile of that time looked for them."""
    where.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    if Path(CA).exists():
        shutil.copy(CA, where / "docker" / "ca-bundle.pem")  # the legacy build's CA
    if wheelhouse:
        (where / "docker" / "wheelhouse").mkdir(exist_ok=True)
        for wheel in Path(wheelhouse).glob("*.whl"):
            shutil.copy(wheel, where / "docker" / "wheelhouse" / wheel.name)
    return where


def touch_constraints(context: Path, framework: str, n: int) -> None:
    path = context / "docker" / f"constraints-{framework}.txt"
    path.write_text(path.read_text() + f"# changed {n}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", default="torch", choices=("torch", "tf", "mlflow"))
    parser.add_argument("--base-image", default="bench-base:bookworm")
    parser.add_argument("--legacy-rev", default="ba5141b^")
    parser.add_argument("--wheelhouse", default=os.environ.get("PIP_FIND_LINKS", ""))
    args = parser.parse_args()
    docker = shutil.which("docker", path="/usr/bin") or "docker"  # a CLI with BuildKit
    fw = args.framework
    common = ["--build-arg", f"BASE_IMAGE={args.base_image}", "--build-arg", "VARIANT=cpu"]
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        old = context_at(args.legacy_rev, Path(tmp, "old"), args.wheelhouse)
        new = context_at("HEAD", Path(tmp, "new"), args.wheelhouse)
        (new / "docker" / "ca-bundle.pem").unlink(missing_ok=True)
        legacy = {**os.environ, "DOCKER_BUILDKIT": "0"}
        argv = [docker, "build", "-q", *common]
        dockerfile = f"docker/{fw}.Dockerfile"
        tag = ["-t", f"bench-legacy/{fw}:measure"]
        rows.append(
            (
                "legacy, cold",
                timed([*argv, "-f", str(old / dockerfile), "--no-cache", *tag, str(old)], legacy),
            )
        )
        touch_constraints(old, fw, 1)
        rows.append(
            ("legacy, changed", timed([*argv, "-f", str(old / dockerfile), *tag, str(old)], legacy))
        )
        kit = {**os.environ, "DOCKER_BUILDKIT": "1"}
        secret = ["--secret", f"id=ca,src={CA}"] if Path(CA).exists() else []
        secret += ["-f", str(new / dockerfile)]
        tag = ["-t", f"bench-buildkit/{fw}:measure"]
        timed([docker, "builder", "prune", "-af"], kit)
        rows.append(("buildkit, cold", timed([*argv, *secret, "--no-cache", *tag, str(new)], kit)))
        touch_constraints(new, fw, 1)
        rows.append(("buildkit, changed", timed([*argv, *secret, *tag, str(new)], kit)))
        rows.append(("buildkit, same", timed([*argv, *secret, *tag, str(new)], kit)))
    subprocess.run([docker, "rmi", f"bench-legacy/{fw}:measure", f"bench-buildkit/{fw}:measure"],
                   capture_output=True)  # fmt: skip
    print(f"{fw} image, cpu variant, on {args.base_image} (wheelhouse: {args.wheelhouse or '-'})")
    for what, seconds in rows:
        print(f"  {what:<18} {seconds:7.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
