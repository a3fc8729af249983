"""Building an image with BuildKit through the Docker CLI.

docker-py's ``api.build`` speaks only to Docker's legacy builder (deprecated since Engine
23), which has neither cache mounts nor build secrets, so bench builds through the ``docker``
command with BuildKit on: ``docker buildx build --load`` where the CLI has the buildx
plugin; otherwise ``DOCKER_BUILDKIT=1 docker build`` on a CLI older than 23 (Debian's
``docker.io`` 20.10 has BuildKit built in and no buildx).  A CLI of 23 or later without
buildx cannot build with BuildKit at all; every ``docker`` on ``PATH`` is tried, so a newer
CLI placed in front of the distribution's one does not hide it.

The Dockerfiles rely on BuildKit (``RUN --mount=type=cache`` for pip's downloads,
``--mount=type=secret`` for a CA bundle that never enters a layer) and carry no
``# syntax=`` line: its frontend image would have to be pulled.  The CLI talks to the engine
the SDK talks to (``DOCKER_HOST``, inherited).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The id of the build secret that carries a CA bundle for pip (the Dockerfiles mount it at
# /run/secrets/ca when given; nothing is mounted otherwise).
CA_SECRET = "ca"
INSTALL_HINT = (
    "install Docker's buildx plugin (Debian/Ubuntu: docker-buildx, Docker CE: "
    "docker-buildx-plugin), or put a Docker CLI older than 23 first on PATH"
)


class BuildKitError(RuntimeError):
    """No Docker CLI here can build with BuildKit, or a build failed."""


@dataclass(frozen=True)
class Builder:
    argv: tuple[str, ...]  # the build command up to its options
    env: tuple[tuple[str, str], ...]  # what the environment adds
    what: str  # for messages: "docker buildx (v0.12.1)", "docker 20.10.24 (DOCKER_BUILDKIT=1)"


def _run(argv: list[str], timeout_s: float = 20.0) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def _docker_clis() -> list[str]:
    """Every ``docker`` executable on PATH, first one first, each once."""
    found: list[str] = []
    seen: set[str] = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder or ".") / "docker"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            real = os.path.realpath(candidate)
            if real not in seen:
                seen.add(real)
                found.append(str(candidate))
    return found


def _client_major(cli: str) -> int | None:
    """The CLI's major version, from ``docker --version`` (which needs no engine)."""
    code, out = _run([cli, "--version"])
    found = re.search(r"version (\d+)\.", out)
    return int(found.group(1)) if code == 0 and found else None


_found: list[Builder] = []


def builder() -> Builder:
    """The first Docker CLI on PATH that builds with BuildKit (looked up once per process);
    :class:`BuildKitError` says what each one lacks."""
    if _found:
        return _found[0]
    tried: list[str] = []
    for cli in _docker_clis():
        code, out = _run([cli, "buildx", "version"])
        if code == 0:
            found = Builder((cli, "buildx", "build", "--load"), (), f"{cli} buildx ({out})")
            _found.append(found)
            return found
        major = _client_major(cli)
        if major is not None and major < 23:
            found = Builder(
                (cli, "build"), (("DOCKER_BUILDKIT", "1"),), f"{cli} {major}.x, DOCKER_BUILDKIT=1"
            )
            _found.append(found)
            return found
        tried.append(f"{cli} (client {major if major is not None else '?'}.x, no buildx plugin)")
    if not tried:
        raise BuildKitError(
            f"no docker command on PATH; bench builds images with it: {INSTALL_HINT}"
        )
    raise BuildKitError(
        f"no Docker CLI here can build with BuildKit: {'; '.join(tried)}; {INSTALL_HINT}"
    )


def build(
    context: Path,
    dockerfile: str,
    tag: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    ca_bundle: str = "",
    timeout_s: float = 7200.0,
) -> list[str]:
    """Build ``context`` (a folder) with BuildKit and tag the image in the engine; returns
    the build's output lines.  A failed build raises :class:`BuildKitError` carrying them."""
    b = builder()
    argv = [*b.argv, "--progress=plain", "-f", str(context / dockerfile), "-t", tag]
    for key, value in buildargs.items():
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    if ca_bundle:
        argv += ["--secret", f"id={CA_SECRET},src={ca_bundle}"]
    argv.append(str(context))
    env = {**os.environ, **dict(b.env)}
    try:
        done = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            timeout=timeout_s,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.output if isinstance(exc.output, str) else ""
        raise BuildKitError(
            f"the build did not end within {timeout_s:.0f} s:\n{_tail(output)}"
        ) from exc
    if done.returncode != 0:
        raise BuildKitError(f"{b.what} exited {done.returncode}:\n{_tail(done.stdout)}")
    return done.stdout.splitlines()


def _tail(output: str, lines: int = 25) -> str:
    kept = [line for line in output.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])
