"""What the Docker launcher asks of the host and its engine, checked before a sweep: GPUs
as device requests (and the NVIDIA container runtime they need), the ulimits NVIDIA
recommends (as far as this host lets them be raised), and what this host says of the
launcher's settings (:func:`files`, :func:`engine`: the host stage of bench's checks)."""

from __future__ import annotations

import os
import re
import resource
import shutil
from pathlib import Path
from typing import Any

from docker.types import DeviceRequest, Ulimit

from bench import images
from bench.core.config import BenchConfig

# NVIDIA's recommendation for deep-learning containers (with --ipc=host): unlimited locked
# memory and a 64 MiB stack.
RECOMMENDED_ULIMITS = {"memlock": -1, "stack": 64 * 2**20}
_RLIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK}
_CAP_SYS_RESOURCE = 24
_GPU_ID = re.compile(r"[0-9]+|(GPU|MIG)-[0-9A-Za-z/:-]+")


# --- GPUs -----------------------------------------------------------------------------------


def parse_gpus(gpus: str) -> int | list[str] | None:
    """``launcher.docker.gpus`` as None (no GPU), a count (-1: all) or device ids.

    Forms: "" | "all" | a count "2" | ids "0,1" or "device=0" (one id, as docker's --gpus
    writes it).  Raises ValueError saying what is wrong."""
    text = gpus.strip()
    if not text:
        return None
    if text == "all":
        return -1
    if re.fullmatch(r"[0-9]+", text):
        if int(text) == 0:
            raise ValueError(
                "'0' asks for no GPU: leave it empty for none, or write device=0 for the GPU "
                "with id 0"
            )
        return int(text)
    ids = [part.strip() for part in text.removeprefix("device=").split(",")]
    bad = [part for part in ids if not _GPU_ID.fullmatch(part)]
    if bad:
        raise ValueError(
            f"{gpus!r} is not 'all', a count (2) or device ids (0,1 or device=0): bad id {bad[0]!r}"
        )
    return ids


def device_requests(gpus: str) -> list[DeviceRequest]:
    """The engine's device requests for ``launcher.docker.gpus`` (what ``--gpus`` sends)."""
    wanted = parse_gpus(gpus)
    if wanted is None:
        return []
    if isinstance(wanted, int):
        return [DeviceRequest(driver="nvidia", count=wanted, capabilities=[["gpu"]])]
    return [DeviceRequest(driver="nvidia", device_ids=wanted, capabilities=[["gpu"]])]


def nvidia_runtime_problem(info: dict[str, Any], hook_on_path: bool) -> str:
    """Why an engine (``docker info``) cannot pass GPUs to a container ('' if it can)."""
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    if "nvidia" in runtimes or info.get("DefaultRuntime") == "nvidia" or hook_on_path:
        return ""
    return (
        "GPUs were asked for but this Docker engine has no NVIDIA container runtime "
        f"(its runtimes: {', '.join(runtimes) or 'none'}); install the NVIDIA Container "
        "Toolkit and restart dockerd, or leave launcher.docker.gpus empty"
    )


def _local_engine() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


def _nvidia_hook_on_path() -> bool:
    """The toolkit's hook, with which a local engine serves GPU device requests."""
    return _local_engine() and bool(
        shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-container-cli")
    )


# --- limits ------------------------------------------------------------------------------


def granted(wanted: int, hard: int, can_raise: bool) -> int:
    """The most of ``wanted`` (-1: unlimited) an engine can grant when its own hard limit is
    ``hard`` (-1: unlimited): raising past it takes CAP_SYS_RESOURCE."""
    if can_raise or hard == -1:
        return wanted
    return hard if wanted == -1 else min(wanted, hard)


def _can_raise_limits() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> _CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError):
        pass
    return True


def ulimits() -> list[Ulimit]:
    """NVIDIA's recommended limits, as far as the engine can grant them.

    A local engine started without CAP_SYS_RESOURCE (some sandboxes) fails to start a
    container whose limits exceed its own; there the limits are capped at the engine's hard
    limit (this process's, on the same host), and the result records what was applied."""
    can_raise = not _local_engine() or _can_raise_limits()
    out = []
    for name, wanted in RECOMMENDED_ULIMITS.items():
        hard = resource.getrlimit(_RLIMITS[name])[1]
        value = granted(wanted, -1 if hard == resource.RLIM_INFINITY else hard, can_raise)
        out.append(Ulimit(name=name, soft=value, hard=value))
    return out


# --- the host stage of bench's checks (bench.checks.host) ------------------------------------


def files(cfg: BenchConfig) -> list[str]:
    """The files ``launcher=docker``'s settings name that this host lacks, each naming its
    field ([] if none)."""
    d = cfg.launcher.docker
    problems: list[str] = []
    if d.ca_bundle and not _readable_pem(d.ca_bundle):
        problems.append(
            f"launcher.docker.ca_bundle: {d.ca_bundle!r} is not a readable PEM file of "
            "certificates (default: $PIP_CERT)"
        )
    if d.wheelhouse and not Path(d.wheelhouse).is_dir():
        problems.append(
            f"launcher.docker.wheelhouse: {d.wheelhouse!r} is not a directory of wheels "
            "(default: $PIP_FIND_LINKS)"
        )
    return problems


_engine_info: dict[str, Any] = {}


def engine(cfg: BenchConfig) -> list[str]:
    """What the engine says of ``launcher=docker``'s settings, which passed every other
    check: it answers, has the image (or bench's Dockerfile is here), the NVIDIA runtime
    for GPUs, the base image; at most one problem."""
    d = cfg.launcher.docker
    gpus = parse_gpus(d.gpus) is not None
    try:
        c = images.client()
    except images.ImageError as exc:
        return [f"launcher: docker: {exc}"]
    if d.image:
        try:
            images.existing(d.image, c)
        except images.ImageError as exc:
            return [str(exc)]
    else:
        dockerfile = images.DOCKER / f"{cfg.framework.name}.Dockerfile"
        if not dockerfile.is_file():
            return [
                f"launcher.docker.image: {dockerfile} is missing; bench builds its images "
                "from its own files (or pass an image to run)"
            ]
    if gpus:
        if not _engine_info:
            _engine_info.update(c.info())
        problem = nvidia_runtime_problem(_engine_info, _nvidia_hook_on_path())
        if problem:
            return [f"launcher.docker.gpus: {d.gpus!r}: {problem}"]
    if not d.image:  # bench builds its image on this base: it must be here or pullable
        problem = base_problem(c, images.BuildSpec.from_config(cfg).base)
        if problem:
            return [problem]
    return []


_bases: dict[str, str] = {}


def base_problem(c: Any, base: str) -> str:
    """Why the base image ``base`` cannot be had ('' if it is on this engine or a registry
    it reaches knows it), asked once per base and process: found before any trial rather
    than when the first trial's build starts."""
    if base not in _bases:
        import docker

        why = ""
        try:
            c.images.get(base)
        except docker.errors.ImageNotFound:
            try:
                c.images.get_registry_data(base)
            except Exception as exc:  # noqa: BLE001 - any refusal is the reason
                said = getattr(exc, "explanation", None) or str(exc)
                why = (
                    f"launcher.docker.base_image: {base!r} is not in the local engine and no "
                    f"registry it reaches has it ({str(said).splitlines()[0][:160]}); "
                    f"{images.LOCAL_BASE_HINT}"
                )
        except Exception as exc:  # noqa: BLE001 - the engine's own error, in one line
            why = f"launcher.docker.base_image: {base!r}: {str(exc).splitlines()[0][:160]}"
        _bases[base] = why
    return _bases[base]


def _readable_pem(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"-----BEGIN CERTIFICATE-----" in f.read()
    except OSError:
        return False
