"""Run each trial in its own fresh container of the framework's pinned image (``launcher=docker``).

The container runs ``python -m bench.trial.worker /trial`` with the trial's working directory
bind-mounted at ``/trial``: the worker appends its per-epoch records there and the host
streams them into MLflow as they come, exactly as with ``launcher=process`` (the container
needs no route to the tracking server).  The container has no network, runs as a non-root
user, never sees the Docker socket, has the host's IPC namespace and the memlock and stack
limits NVIDIA recommends for deep learning, and gets GPUs as device requests.

Nothing outlives a trial.  The container is created with auto-remove, so the engine deletes
it as soon as it exits; a timeout or Ctrl-C stops it; and if the host process itself dies,
the worker stops on its own once the heartbeat file that the host keeps touching goes stale
(:mod:`bench.trial.runtime.heartbeat`).  Containers of a host process that is gone are
removed when the next trial starts.  The exit code comes from waiting on the container and
an out-of-memory kill from the engine's event log, since the container is gone by the time it
is looked at.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker

from bench import images
from bench.core import paths
from bench.core.config import BenchConfig, to_dict
from bench.core.result import ERROR, HOST_OOM
from bench.launchers.base import Child, LaunchError, WatchedLauncher
from bench.launchers.docker_host import device_requests, ulimits
from bench.trial.data import ENV_EXTRA_MD5
from bench.trial.runtime import heartbeat
from bench.trial.runtime.processes import owner_alive, owner_label
from bench.trial.runtime.protocol import CONFIG, LOG, tail, write_config

MOUNT = "/trial"
DATA_MOUNT = "/data"
CACHE_MOUNT = "/bench-cache"
HEARTBEAT_FILE = ".heartbeat"
LABEL_TRIAL = "bench.trial.loop"  # the trial's working directory on the host
LABEL_OWNER = "bench.owner"  # host/pid/start time of the bench process that started it


# --- the container ---------------------------------------------------------------------------


def _user() -> tuple[int, int]:
    """The trial's uid:gid: the host user's, or the images' `bench` user for a root host."""
    uid, gid = os.getuid(), os.getgid()
    return (uid, gid) if uid != 0 else (images.BENCH_UID, images.BENCH_UID)


def _data_root(cfg: BenchConfig) -> Path | None:
    """The host directory a labelled data set is read from, mounted read-only."""
    if cfg.data.name == "synthetic":
        return None
    root = Path(os.path.expanduser(cfg.data.root)).resolve()
    return root if root.is_dir() else None


def cache_folder(cfg: BenchConfig) -> Path | None:
    """``tuning=best``: the host folder kept across containers as the container's bench cache
    (``BENCH_CACHE``), one per framework, version and image variant, so that a
    configuration's repeats reuse one search, as under ``launcher=process``, instead of each
    fresh container searching again.  Only containers of that image read it; the host never
    reads what they leave there."""
    if cfg.tuning.name != "best":
        return None
    image = f"{cfg.framework.name}-{cfg.framework.version or 'pinned'}-{images.image_variant(cfg)}"
    where = paths.private_dir(paths.cache_dir() / "containers" / re.sub(r"[^\w.-]+", "_", image))
    uid, gid = _user()
    if os.getuid() == 0 and (where.stat().st_uid, where.stat().st_gid) != (uid, gid):
        os.chown(where, uid, gid)  # the trial's user in the container owns it
    return where


def container_config(cfg: BenchConfig) -> dict[str, Any]:
    """The config the worker reads inside the container (paths as it sees them)."""
    data = to_dict(cfg)
    if _data_root(cfg) is not None:
        data["data"]["root"] = DATA_MOUNT
    return data


def container_options(cfg: BenchConfig, workdir: Path, owner: str) -> dict[str, Any]:
    """Keyword arguments of ``containers.create`` for the trial in ``workdir``."""
    uid, gid = _user()
    volumes = {str(workdir): {"bind": MOUNT, "mode": "rw"}}
    root = _data_root(cfg)
    if root is not None:
        volumes[str(root)] = {"bind": DATA_MOUNT, "mode": "ro"}
    cache = cache_folder(cfg)
    if cache is not None:
        volumes[str(cache)] = {"bind": CACHE_MOUNT, "mode": "rw"}
    opts: dict[str, Any] = {
        "command": ["sh", "-c", f"exec python3 -m bench.trial.worker {MOUNT} >{MOUNT}/{LOG} 2>&1"],
        "name": f"bench-trial-{uuid.uuid4().hex[:12]}",
        "user": f"{uid}:{gid}",
        "working_dir": MOUNT,
        "environment": {
            heartbeat.ENV_PATH: f"{MOUNT}/{HEARTBEAT_FILE}",
            heartbeat.ENV_TIMEOUT: str(cfg.launcher.docker.heartbeat_timeout_s),
            "HOME": "/tmp",
            "PYTHONUNBUFFERED": "1",
        },
        "volumes": volumes,
        "network_mode": "none",  # no trial is distributed yet
        # An IPC namespace and /dev/shm of its own: the host's shared memory (and what other
        # processes keep there) is not the trial's to read or write.
        "ipc_mode": "private",
        "shm_size": f"{cfg.launcher.docker.shm_size_mb}m",
        "ulimits": ulimits(),
        "security_opt": ["no-new-privileges"],
        "labels": {LABEL_TRIAL: str(workdir), LABEL_OWNER: owner},
        "init": True,
        "auto_remove": True,
    }
    if cache is not None:
        opts["environment"]["BENCH_CACHE"] = CACHE_MOUNT
    extra_sums = os.environ.get(ENV_EXTRA_MD5)
    if extra_sums:  # the data archives the host accepts, the container's reader accepts too
        opts["environment"][ENV_EXTRA_MD5] = extra_sums
    requests = device_requests(cfg.launcher.docker.gpus)
    if requests:
        opts["device_requests"] = requests
    if cfg.launcher.memory_limit_mb:
        limit = f"{cfg.launcher.memory_limit_mb}m"
        opts["mem_limit"] = opts["memswap_limit"] = limit  # no swap beyond the limit
    return opts


def _gone(c: docker.DockerClient, container_id: str, wait_s: float = 30.0) -> None:
    """Remove the container (if auto-remove has not yet) and wait until it no longer exists."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            c.api.remove_container(container_id, force=True)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError:
            pass  # removal already in progress
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)


def _stop(c: docker.DockerClient, container_id: str, grace_s: float) -> None:
    """SIGTERM, SIGKILL after ``grace_s``, then make sure the container is removed."""
    try:
        c.api.stop(container_id, timeout=max(0, math.ceil(grace_s)))
    except docker.errors.NotFound:
        return
    except docker.errors.APIError:
        pass
    _gone(c, container_id)


_orphans_checked: list[bool] = []


def remove_orphans(c: docker.DockerClient) -> int:
    """Remove trial containers whose bench process is gone; return how many."""
    removed = 0
    for found in c.api.containers(all=True, filters={"label": LABEL_OWNER}):
        if not owner_alive(found["Labels"].get(LABEL_OWNER, "")):
            _gone(c, found["Id"])
            removed += 1
    return removed


class _ExitWatch:
    """Waits for the container's exit in a thread, so the host can poll and stream meanwhile."""

    def __init__(self, c: docker.DockerClient, container_id: str) -> None:
        self.code: int | None = None
        self.done = threading.Event()
        self._c, self.container_id = c, container_id
        threading.Thread(target=self._wait, name="bench-container-wait", daemon=True).start()

    def _wait(self) -> None:
        try:
            self.code = int(self._c.api.wait(self.container_id, timeout=None)["StatusCode"])
        except (docker.errors.DockerException, OSError, ValueError, KeyError):
            pass  # already removed: the engine's event log has the exit code
        finally:
            self.done.set()


def _engine_events(c: docker.DockerClient, container_id: str, since: float) -> list[dict[str, Any]]:
    stream = c.api.events(
        since=f"{since:.9f}",
        until=f"{time.time():.9f}",
        filters={"container": container_id},
        decode=True,
    )
    return list(stream)


def _exit_state(c: docker.DockerClient, watch: _ExitWatch, since: float) -> tuple[int | None, bool]:
    """(exit code, killed by the out-of-memory killer) of an exited container."""
    code, oom = watch.code, False
    for attempt in range(10):  # the engine may log the events a moment after the exit
        events = _engine_events(c, watch.container_id, since)
        actions = [(e.get("Action") or e.get("status"), e) for e in events]
        oom = any(action == "oom" for action, _ in actions)
        for action, e in actions:
            if action == "die" and code is None:
                code = int(e.get("Actor", {}).get("Attributes", {}).get("exitCode", -1))
        if (code is not None and (oom or code != 137)) or attempt == 9:
            break
        time.sleep(0.1)
    return code, oom


def _tree(root: Path) -> list[Path]:
    paths = [root]
    for parent, dirs, files in os.walk(root):
        paths += [Path(parent, name) for name in dirs + files]
    return paths


def _hand_over(workdir: Path, uid: int, gid: int) -> None:
    """Let the trial's uid write its working directory (only a root host needs to)."""
    if os.getuid() == 0 and uid != 0:
        for path in _tree(workdir):
            os.chown(path, uid, gid, follow_symlinks=False)


def _hand_back(workdir: Path) -> None:
    """Give what the trial wrote back to the host user (root)."""
    if os.getuid() == 0:
        for path in _tree(workdir):
            try:
                os.chown(path, 0, 0, follow_symlinks=False)
            except OSError:
                pass


def _died(code: int | None, oom: bool, cfg: BenchConfig, log: Path) -> tuple[str, str]:
    """Status and message for a container that ended without the worker's result."""
    limit = cfg.launcher.memory_limit_mb
    if oom:
        where = f"at its memory limit (launcher.memory_limit_mb={limit})" if limit else ""
        status, how = HOST_OOM, f"was killed by the kernel's out-of-memory killer {where}"
    elif code == 137:
        status, how = ERROR, "was killed (SIGKILL, exit code 137)"
    elif code == heartbeat.EXIT_NO_HEARTBEAT:
        status, how = ERROR, "stopped itself: it lost the host's heartbeat"
    else:
        status, how = ERROR, f"exited with code {code}"
    return status, f"the trial's container {how.strip()} without a result; its last output:\n" + (
        tail(log)
    )


class _Container(Child):
    def __init__(
        self, c: docker.DockerClient, cfg: BenchConfig, workdir: Path, image_id: str, beat: Any
    ) -> None:
        self.c, self.cfg, self.workdir, self.beat = c, cfg, workdir, beat
        self.environment: dict[str, str] = {}
        opts = container_options(cfg, workdir, owner_label())
        self.launched = time.time()
        try:
            container = c.containers.create(image_id, **opts)
        except docker.errors.APIError as exc:
            raise LaunchError(
                f"cannot create the trial's container: {exc.explanation or exc}"
            ) from exc
        self.id = str(container.id)
        self.environment.update({"container.id": self.id, "container.name": opts["name"]})
        for limit in opts["ulimits"]:
            value = "unlimited" if limit["Hard"] == -1 else str(limit["Hard"])
            self.environment[f"container.ulimit_{limit['Name']}"] = value
        try:
            container.start()
        except docker.errors.APIError as exc:
            _gone(c, self.id)
            raise LaunchError(
                f"cannot start the trial's container: {exc.explanation or exc}"
            ) from exc
        self.watch = _ExitWatch(c, self.id)
        self.code: int | None = None
        self.oom = False

    def done(self, wait_s: float) -> bool:
        return self.watch.done.wait(wait_s)

    def stop(self, grace_s: float) -> None:
        _stop(self.c, self.id, grace_s)

    def finished(self) -> None:
        self.code, self.oom = _exit_state(self.c, self.watch, self.launched - 1)
        _gone(self.c, self.id)

    def died(self) -> tuple[str, str]:
        return _died(self.code, self.oom, self.cfg, self.workdir / LOG)

    def close(self) -> None:
        self.beat.stop()
        _hand_back(self.workdir)


class Launcher(WatchedLauncher):
    def start(self, cfg: BenchConfig, workdir: Path, environment: dict[str, str]) -> Child:
        write_config(workdir / CONFIG, container_config(cfg))
        try:
            c = images.client()
            if not _orphans_checked:
                remove_orphans(c)
                _orphans_checked.append(True)
            d = cfg.launcher.docker
            if d.image:
                image = images.existing(d.image, c)
            else:
                image = images.ensure(images.BuildSpec.from_config(cfg), c)
        except images.ImageError as exc:
            raise LaunchError(str(exc)) from exc
        except docker.errors.DockerException as exc:
            raise LaunchError(f"the Docker engine failed: {exc}") from exc
        environment.update(image.environment())
        uid, gid = _user()
        (workdir / LOG).touch()
        _hand_over(workdir, uid, gid)
        beat = heartbeat.Beat(workdir / HEARTBEAT_FILE)
        try:
            container = _Container(c, cfg, workdir, image.id, beat)
        except BaseException:
            beat.stop()
            _hand_back(workdir)
            raise
        environment.update(container.environment)
        return container
