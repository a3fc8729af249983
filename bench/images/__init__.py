"""bench's per-framework container images: pinned, tagged by content hash, built when missing.

An image is ``bench/<framework>:<variant>-<hash>``, where the hash covers everything that
goes into it: the framework's Dockerfile and constraints file (docker/), the wheels it may
take from the wheelhouse, bench's trial side (:data:`bench.core.paths.TRIAL_SIDE`, baked in, so
that the image alone reruns a trial; the host side, such as the CLI, the sweep or the
report, is neither in the image nor in its hash), the build arguments, the base image's
digest and the image's labels.  An unchanged image is never rebuilt and a changed one
always is.

The base is pinned by digest: a base named by tag is resolved to ``repo@sha256:...`` (pulled
first if it is missing) or, for a base built here that no registry knows
(scripts/build_base_image.sh), to a tag named after its image id.  Images are built with
BuildKit through the Docker CLI (:mod:`bench.images.buildkit`); a CA bundle for pip goes in as a
build secret: it is neither in a layer, nor in the build context, nor in the hash.

    bench images build torch --variant cpu --base-image bench-base:bookworm
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bench.core import paths
from bench.core.frameworks import FRAMEWORKS, WITH_IMAGE
from bench.core.versions import own_release

if TYPE_CHECKING:
    from docker import DockerClient

    from bench.core.config import BenchConfig, DockerConfig

DOCKER = paths.data("docker")  # the Dockerfiles and constraints
VARIANTS = ("cpu", "cuda")
# uid of the `bench` user in the images; trials of a root host run as this uid.
BENCH_UID = 1000
# Used when launcher.docker.base_image is empty: the frameworks' official CUDA images, and
# the official Python image (the framework then comes from pip) for the CPU variants.
# Each framework's CUDA base is its spec's (bench.core.frameworks).
PYTHON_BASE = "python:3.11-slim-bookworm"
DEFAULT_BASES = {
    **{(name, "cuda"): spec.cuda_image for name, spec in FRAMEWORKS.items()},
    **{(name, "cpu"): PYTHON_BASE for name in FRAMEWORKS},
    ("mlflow", "cpu"): PYTHON_BASE,
}
LOCAL_BASE_HINT = (
    "without a registry, build a local base with `bash scripts/build_base_image.sh` and "
    "pass launcher.docker.base_image=bench-base:bookworm"
)


class ImageError(RuntimeError):
    """An image that cannot be found, pulled or built; the message names the field."""


@dataclass(frozen=True)
class BuildSpec:
    name: str  # a framework (torch, tf, mxnet), or mlflow: the tracking server of compose.yaml
    variant: str
    base_image: str = ""
    ca_bundle: str = ""
    wheelhouse: str = ""
    # A framework version other than the pinned one (framework.version): the image installs
    # it from its generated, hashed lock (bench.envs.environments.image_lock) instead.
    version: str = ""

    @classmethod
    def from_config(cls, cfg: BenchConfig) -> BuildSpec:
        d = cfg.launcher.docker
        return cls(
            cfg.framework.name,
            resolved_variant(d),
            d.base_image,
            d.ca_bundle,
            d.wheelhouse,
            own_release(cfg.framework.version),
        )

    @property
    def base(self) -> str:
        return self.base_image or DEFAULT_BASES[(self.name, self.variant)]


@dataclass
class Image:
    id: str  # sha256:... (the digest of the image's config)
    tag: str
    digest: str  # the registry digest when it has one, else its id
    base_image: str
    base_digest: str
    size_bytes: int
    build_s: float = 0.0  # time spent building it just now; 0 when it was there

    def environment(self) -> dict[str, str]:
        """Result environment entries, logged as ``bench.<key>`` tags."""
        env = {"image.id": self.id, "image.tag": self.tag, "image.digest": self.digest}
        if self.base_image:
            env["base_image"] = self.base_image
        if self.base_digest:
            env["base_image.digest"] = self.base_digest
        return env


def resolved_variant(d: DockerConfig) -> str:
    if d.variant in VARIANTS:
        return d.variant
    return "cuda" if d.gpus.strip() else "cpu"


def image_variant(cfg: BenchConfig) -> str:
    """The image variant a trial runs in under launcher=docker; "" for any other launcher."""
    return resolved_variant(cfg.launcher.docker) if cfg.launcher.name == "docker" else ""


_clients: list[DockerClient] = []


def client() -> DockerClient:
    """A client of the Docker engine (``DOCKER_HOST``, else the local socket), checked to
    answer; one per process."""
    import docker

    try:
        c = _clients[0] if _clients else docker.from_env(timeout=300)
        c.ping()
    except docker.errors.DockerException as exc:
        raise ImageError(
            f"cannot reach the Docker engine ({exc}); start dockerd "
            "(scripts/system_deps.sh does) or set DOCKER_HOST"
        ) from exc
    if not _clients:
        _clients.append(c)
    return c


def _digest_of(img: Any) -> str:
    """The registry digest of an image, or its id when no registry knows it."""
    repo_digests = img.attrs.get("RepoDigests") or []
    return str(repo_digests[0].split("@", 1)[1]) if repo_digests else str(img.id)


# A base that no registry knows (built here) is pinned by a tag named after its image id:
# BuildKit reads a local image by name, and takes a bare ``sha256:<id>`` for a registry's
# ``library/sha256`` repository.
LOCAL_BASE_REPO = "bench/base-id"


def _pinned_ref(img: Any) -> str:
    repo_digests = img.attrs.get("RepoDigests") or []
    if repo_digests:
        return str(repo_digests[0])
    name = str(img.id).removeprefix("sha256:")
    img.tag(LOCAL_BASE_REPO, name)  # re-pointed at this id on every build
    return f"{LOCAL_BASE_REPO}:{name}"


def resolve_base(c: DockerClient, ref: str) -> tuple[str, str]:
    """(a reference to ``ref`` pinned by digest, that digest); pulls ``ref`` if missing."""
    import docker
    from docker.utils import parse_repository_tag

    try:
        img = c.images.get(ref)
    except docker.errors.ImageNotFound:
        repo, tag = parse_repository_tag(ref)
        try:
            img = c.images.pull(repo, tag=tag or "latest")
        except docker.errors.APIError as exc:
            raise ImageError(
                f"launcher.docker.base_image: {ref!r} is not in the local engine and cannot "
                f"be pulled ({exc.explanation or exc}); {LOCAL_BASE_HINT}"
            ) from exc
    return _pinned_ref(img), _digest_of(img)


def context_files(spec: BuildSpec) -> dict[str, Path]:
    """What goes into the build context, by path inside it (the repository's layout)."""
    fw = spec.name
    files: dict[str, Path] = {}
    for name in (f"{fw}.Dockerfile", f"constraints-{fw}.txt"):
        if not (DOCKER / name).is_file():
            raise ImageError(
                f"launcher.docker.image: docker/{name} is missing from {DOCKER}; bench builds "
                "its images from its own files (or pass an image to run)"
            )
        files[f"docker/{name}"] = DOCKER / name
    if spec.wheelhouse:
        from packaging.utils import canonicalize_name

        from bench.envs.environments import lock_pins

        pinned = set(lock_pins(DOCKER / f"constraints-{fw}.txt"))
        for wheel in sorted(Path(spec.wheelhouse).glob("*.whl")):
            name, version = wheel.name.split("-")[:2]
            # A CPU-only build (a +cpu local version) must not stand in for the CUDA one.
            cpu_for_cuda = spec.variant == "cuda" and "+cpu" in version
            if canonicalize_name(name) in pinned and not cpu_for_cuda:
                files[f"docker/wheelhouse/{wheel.name}"] = wheel
    if spec.version:
        from bench.envs.environments import image_lock

        files["docker/version.lock"] = image_lock(fw, spec.version, spec.variant)
    if fw != "mlflow":
        files.update(trial_sources())
    return files


def trial_sources() -> dict[str, Path]:
    """bench's trial side (:data:`bench.core.paths.TRIAL_SIDE`) and the package's ``__init__``, by
    path inside the build context: all the image runs of bench, and all its hash covers."""
    package = paths.PACKAGE
    found = [package / "__init__.py"]
    for name in paths.TRIAL_SIDE:
        where = package.joinpath(*name.split(".")[1:])
        if where.is_dir():
            found += [p for p in where.rglob("*") if p.is_file()]
        else:
            found.append(where.with_suffix(".py"))
    files: dict[str, Path] = {}
    for path in sorted(found):
        inside = path.relative_to(package)
        if not {"__pycache__", "_data"} & set(inside.parts) and path.suffix != ".pyc":
            files[f"bench/{inside.as_posix()}"] = path
    return files


_file_digests: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _file_digests:
        with open(path, "rb") as f:
            _file_digests[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return _file_digests[key]


def content_hash(
    files: dict[str, Path], buildargs: dict[str, str], labels: dict[str, str] | None = None
) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}\0{_file_digest(files[rel])}\n".encode())
    h.update(json.dumps(buildargs, sort_keys=True).encode())
    if labels:  # what the image says of itself is part of it
        h.update(json.dumps(labels, sort_keys=True).encode())
    return h.hexdigest()[:16]


def kind_labels(spec: BuildSpec, base_digest: str) -> dict[str, str]:
    """The labels of bench's image for ``spec`` (all but its content hash)."""
    return {
        "bench.image": spec.name,
        "bench.variant": spec.variant,
        "bench.version": spec.version,  # "" for the pinned one (bench.images.inventory)
        "bench.base_image": spec.base,
        "bench.base_image.digest": base_digest,
        "org.opencontainers.image.base.name": spec.base,
        "org.opencontainers.image.base.digest": base_digest,
    }


@dataclass
class Plan:
    """What :func:`ensure` would build: the tag, its inputs and the pinned base."""

    spec: BuildSpec
    tag: str
    files: dict[str, Path]
    buildargs: dict[str, str]
    base_digest: str

    @property
    def labels(self) -> dict[str, str]:
        return {
            **kind_labels(self.spec, self.base_digest),
            "bench.content_hash": self.tag.rsplit("-", 1)[1],
        }


def plan(spec: BuildSpec, c: DockerClient) -> Plan:
    pinned, base_digest = resolve_base(c, spec.base)
    files = context_files(spec)
    buildargs = {"BASE_IMAGE": pinned, "VARIANT": spec.variant, "BENCH_UID": str(BENCH_UID)}
    digest = content_hash(files, buildargs, kind_labels(spec, base_digest))
    tag = f"bench/{spec.name}:{spec.variant}-{digest}"
    return Plan(spec, tag, files, buildargs, base_digest)


_ensured: dict[BuildSpec, Image] = {}


def _build_once(p: Plan, c: DockerClient, log: TextIO) -> tuple[Any, float]:
    """Build ``p`` under a file lock per tag, unless another process built it meanwhile;
    the image and the seconds this process spent building it."""
    import docker

    lock = paths.cache_dir() / "images" / (re.sub(r"[^\w.-]", "_", p.tag) + ".lock")
    with paths.locked(lock, best_effort=True):
        try:
            return c.images.get(p.tag), 0.0  # built by another process while this one waited
        except docker.errors.ImageNotFound:
            pass
        print(f"bench: building image {p.tag} on {p.spec.base} (once)", file=log, flush=True)
        started = time.monotonic()
        _build(p)
        build_s = time.monotonic() - started
        img = c.images.get(p.tag)
        mib = img.attrs["Size"] / 2**20
        print(f"bench: built {p.tag} in {build_s:.0f} s ({mib:,.0f} MiB)", file=log, flush=True)
        return img, build_s


def ensure(spec: BuildSpec, c: DockerClient | None = None, log: TextIO = sys.stderr) -> Image:
    """bench's image for ``spec``, built if its content-hash tag is missing.

    Remembered for the rest of the process, so that every trial of a sweep runs in the image
    resolved for its first one.  Two processes that want the same missing image (two sweeps,
    or a sweep and ``bench images build``) build it once: the second waits on a file lock
    under bench's cache and then finds the tag."""
    if spec in _ensured:
        return _ensured[spec]
    import docker

    c = c or client()
    p = plan(spec, c)
    try:
        img, build_s = c.images.get(p.tag), 0.0
    except docker.errors.ImageNotFound:
        img, build_s = _build_once(p, c, log)
    image = Image(
        id=str(img.id),
        tag=p.tag,
        digest=_digest_of(img),
        base_image=spec.base,
        base_digest=p.base_digest,
        size_bytes=int(img.attrs["Size"]),
        build_s=build_s,
    )
    _ensured[spec] = image
    return image


def existing(ref: str, c: DockerClient | None = None) -> Image:
    """An image named by ``launcher.docker.image``, as it is (never built nor pulled)."""
    import docker

    c = c or client()
    try:
        img = c.images.get(ref)
    except docker.errors.ImageNotFound as exc:
        raise ImageError(
            f"launcher.docker.image: no image {ref!r} in the local Docker engine; pull or "
            "load it first, or leave launcher.docker.image empty to build bench's own"
        ) from exc
    labels = img.labels or {}
    tags = img.tags or []
    return Image(
        id=str(img.id),
        tag=ref if ref in tags or not tags else str(tags[0]),
        digest=_digest_of(img),
        base_image=labels.get("bench.base_image", ""),
        base_digest=labels.get("bench.base_image.digest", ""),
        size_bytes=int(img.attrs["Size"]),
    )


def _stage(p: Plan, where: Path) -> None:
    """The build context: exactly the hashed files, hard-linked where the file system allows."""
    for rel, src in p.files.items():
        dst = where / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)


def _build(p: Plan) -> None:
    """Build with BuildKit (:mod:`bench.images.buildkit`); the CA bundle goes in as a build secret,
    never into the context or a layer."""
    from bench.images import buildkit

    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        _stage(p, Path(tmp))
        try:
            buildkit.build(
                Path(tmp),
                f"docker/{p.spec.name}.Dockerfile",
                p.tag,
                p.buildargs,
                p.labels,
                ca_bundle=str(Path(p.spec.ca_bundle).resolve()) if p.spec.ca_bundle else "",
            )
        except buildkit.BuildKitError as exc:
            raise ImageError(_build_failure(p, str(exc))) from exc


def _build_failure(p: Plan, tail: str) -> str:
    hint = ""
    if "CERTIFICATE_VERIFY_FAILED" in tail:
        hint = "\n(pip could not verify TLS: pass a CA bundle with launcher.docker.ca_bundle)"
    return f"building {p.tag} on {p.spec.base} failed:\n{tail}{hint}"


COMPOSE_SERVICES = (*WITH_IMAGE, "mlflow")  # compose.yaml's services that bench builds


def compose_env(
    variant: str, base_image: str = "", wheelhouse: str = "", c: DockerClient | None = None
) -> dict[str, str]:
    """What compose.yaml needs to build the images bench would build, under bench's tags:
    per service its content-hash tag and pinned base, and the shared build arguments."""
    c = c or client()
    env = {
        "BENCH_VARIANT": variant,
        "BENCH_UID": str(BENCH_UID),
        "DOCKER_BUILDKIT": "1",  # compose v1 builds through the docker CLI with BuildKit
        "COMPOSE_DOCKER_CLI_BUILD": "1",
    }
    for name in COMPOSE_SERVICES:
        v = "cpu" if name == "mlflow" else variant
        p = plan(BuildSpec(name, v, base_image, "", wheelhouse if name != "mlflow" else ""), c)
        env[f"BENCH_{name.upper()}_IMAGE"] = p.tag
        env[f"BENCH_{name.upper()}_BASE"] = p.buildargs["BASE_IMAGE"]
        env[f"BENCH_{name.upper()}_BASE_NAME"] = p.spec.base  # as named: its label
    return env
