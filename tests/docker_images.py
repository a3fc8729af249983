"""The Docker images the e2e tests run: bench's CPU images of torch and TensorFlow and the
tracking server's, on the local base image that scripts/build_base_image.sh makes (no
registry can be reached here).

``python -m tests.docker_images`` builds them ahead: scripts/test.sh starts it in the
background beside the lint, and the Docker tests' fixture then finds them built or waits
for them (bench.images.ensure builds an image once across processes; the base image script
holds a lock too).  Every image is built once per content hash: a re-run finds them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import images

REPO = Path(__file__).resolve().parent.parent
BASE = "bench-base:bookworm"
FRAMEWORKS = ("torch", "tf")


def ca_bundle() -> str:
    for path in (os.environ.get("PIP_CERT", ""), "/etc/ssl/certs/ca-certificates.crt"):
        if path and Path(path).is_file():
            return path
    return ""


def wheelhouse() -> str:
    """A directory with a CPU build of torch (PyPI's torch is the CUDA build), if any."""
    for where in (*os.environ.get("PIP_FIND_LINKS", "").split(), "/opt/wheels"):
        if Path(where).is_dir() and list(Path(where).glob("torch-*+cpu-*.whl")):
            return where
    return ""


def build_base() -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh"), BASE], check=True)


def build_all(engine: Any) -> dict[str, images.Image]:
    """Both frameworks' images and the tracking server's, built in parallel (downloads
    overlap unpacking) unless their content-hash tags exist."""
    specs = {fw: images.BuildSpec(fw, "cpu", BASE, ca_bundle(), wheelhouse()) for fw in FRAMEWORKS}
    specs["mlflow"] = images.BuildSpec("mlflow", "cpu", BASE, ca_bundle())
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {name: pool.submit(images.ensure, spec, engine) for name, spec in specs.items()}
        return {name: future.result() for name, future in futures.items()}


if __name__ == "__main__":
    started = time.monotonic()
    build_base()
    built = build_all(images.client())
    print(f"tests.docker_images: {', '.join(i.tag for i in built.values())} ready in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)  # fmt: skip
