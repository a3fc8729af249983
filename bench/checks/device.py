"""The device preflight: once per sweep, before any trial, the device each framework of the
sweep will actually train on under the sweep's ``device`` setting, and a refusal (exit 2)
where that would make the sweep measure the device instead of the framework.

With ``device=auto`` (the default) each framework takes a GPU when it sees one, and whether
it sees one depends on its build: torch's wheel brings its own CUDA libraries; TensorFlow
finds a GPU only with CUDA libraries that match its build (``tensorflow[and-cuda]``); MXNet
needs its CUDA build.  On a GPU host a sweep could otherwise run torch on the GPU and
TensorFlow on the CPU, which the report would only call "not comparable" after the sweep.

- ``device=cuda`` with a framework that sees no GPU: refused, naming the framework, what it
  sees and the fix.
- frameworks compared under one ``device`` setting (and launcher) that would run on
  different kinds of device: refused the same way, unless ``allow_mixed_devices=true``
  (then said on stderr; the setting is logged with every run).

Each framework is asked in a short child process of its own interpreter
(:mod:`bench.trial.runtime.device_probe`), and the answer is cached per environment (its
interpreter, its set-up stamp, ``CUDA_VISIBLE_DEVICES`` and the driver version) under
``$BENCH_CACHE`` (default ``~/.cache/bench``)/devices.  Where NVML finds no NVIDIA GPU
on the host, no framework can see one, and nobody is asked.  ``launcher=docker`` answers
from the image variant (the CUDA images see the GPUs they are given).  A Slurm sweep is not
probed here (its trials run on other hosts); each run logs the device it used.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS
from bench.core.paths import cache_dir, owned_private, private_dir, write_private


@dataclass(frozen=True)
class Seen:
    """What a framework sees: its GPU count, and in words what decides it."""

    gpus: int
    detail: str
    host_has_gpu: bool = True  # False: the host has none, so no build of any framework helps


Probe = Callable[[BenchConfig], Seen]

FIXES = {name: spec.gpu_fix for name, spec in FRAMEWORKS.items()}


def host_gpus() -> tuple[int, str]:
    """NVIDIA GPUs on this host by NVML, and the driver version ('' without a driver)."""
    from bench.core.sysinfo import gpu_environment

    env = gpu_environment()
    return int(env.get("gpu_count", "0")), env.get("gpu_driver", "")


def seen(cfg: BenchConfig) -> Seen:
    """What ``cfg``'s framework will see where ``cfg``'s launcher runs it."""
    if cfg.launcher.name == "docker":
        from bench.images import resolved_variant

        if resolved_variant(cfg.launcher.docker) == "cuda":
            return Seen(1, f"its CUDA image, launcher.docker.gpus={cfg.launcher.docker.gpus!r}")
        return Seen(0, "its CPU image (launcher.docker.gpus is empty)")
    count, driver = host_gpus()
    if count == 0:
        return Seen(0, "no NVIDIA GPU on this host (NVML finds none)", host_has_gpu=False)
    from bench.envs.environments import extra_of

    return ask(cfg.framework.name, driver, cfg.framework.version, extra_of(cfg))


def ask(framework: str, driver: str = "", version: str = "", extra: str = "") -> Seen:
    """The framework's own answer, from its interpreter (that of ``version``'s environment,
    with ``extra``, for a non-pinned one); cached per environment."""
    from bench.envs import interpreters

    python = interpreters.python_for(framework, version, extra)
    venv = Path(python).parent.parent
    stamps = sorted(p.name for p in venv.glob(".bench-*")) if venv.is_dir() else []
    key = json.dumps(
        [
            framework,
            os.path.abspath(python),
            stamps,
            os.environ.get("CUDA_VISIBLE_DEVICES"),
            driver,
        ]
    )
    cached_at = cache_dir() / "devices" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if owned_private(cached_at):  # not another user's answer in a shared cache
        cached = json.loads(cached_at.read_text())
        return Seen(int(cached["gpus"]), str(cached["detail"]))
    problem = interpreters.problem(framework, version)
    if problem:
        return Seen(0, problem)
    done = subprocess.run(
        [python, "-m", "bench.trial.runtime.device_probe", framework],
        capture_output=True, text=True, env=interpreters.child_env(), timeout=300,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return Seen(0, f"asking {framework} failed: {done.stderr.strip()[-300:]}")
    answer = json.loads(lines[-1])
    names = answer.get("names") or []
    detail = str(answer["detail"]) + (f"; {', '.join(names)}" if names else "")
    private_dir(cached_at.parent)
    write_private(cached_at, json.dumps({"gpus": int(answer["gpus"]), "detail": detail}))
    return Seen(int(answer["gpus"]), detail)


def kind(cfg: BenchConfig, s: Seen) -> str:
    """The device kind ``cfg`` trains on: cpu, or cuda."""
    return "cpu" if cfg.device == "cpu" or s.gpus == 0 else "cuda"


def _where(fw: str, k: str, s: Seen) -> str:
    gpus = f"{s.gpus} GPU{'s' if s.gpus != 1 else ''}"
    return f"{fw} on {'the GPU' if k == 'cuda' else 'the CPU'} ({gpus} seen: {s.detail})"


def check(configs: Sequence[tuple[str, BenchConfig]], probe: Probe | None = None) -> list[str]:
    """The sweep's device problems (each naming ``device``); notes for what
    ``allow_mixed_devices=true`` let through go to stderr.  ``probe``: :func:`seen`."""
    probe = probe or seen
    answers: dict[tuple[str, str, str], Seen] = {}
    problems: list[str] = []
    groups: dict[tuple[str, str], dict[str, tuple[str, Seen]]] = {}
    allowed: dict[tuple[str, str], bool] = {}
    for _, cfg in configs:
        if cfg.device == "cpu":
            continue  # nothing to ask: every framework runs on the CPU
        fw = cfg.framework.name
        where = (fw, cfg.launcher.name, cfg.launcher.docker.variant + cfg.launcher.docker.gpus)
        if where not in answers:
            answers[where] = probe(cfg)
        s = answers[where]
        if cfg.device == "cuda" and s.gpus == 0:
            fix = (
                f"{FIXES[fw]}, run it in its CUDA image (launcher=docker "
                "launcher.docker.gpus=all), or set device=cpu"
                if s.host_has_gpu
                else "set device=cpu (or auto)"
            )
            problems.append(f"device: device=cuda, but {fw} sees no GPU ({s.detail}); {fix}")
            continue
        group = (cfg.device, cfg.launcher.name)
        groups.setdefault(group, {})[fw] = (kind(cfg, s), s)
        allowed[group] = allowed.get(group, False) or cfg.allow_mixed_devices
    for group, by_framework in groups.items():
        if len({k for k, _ in by_framework.values()}) < 2:
            continue
        described = "; ".join(_where(fw, k, s) for fw, (k, s) in by_framework.items())
        if allowed[group]:
            print(
                f"bench: allow_mixed_devices=true: with device={group[0]}, {described}. "
                "Their comparison measures the device too.",
                file=sys.stderr,
            )
            continue
        on_cpu = [fw for fw, (k, _) in by_framework.items() if k == "cpu"]
        fixes = ", ".join(FIXES[fw] for fw in on_cpu if fw in FIXES)
        problems.append(
            f"device: with device={group[0]} the compared frameworks would train on different "
            f"devices: {described}. Fix: {fixes} (scripts/setup.sh does on a host where "
            "nvidia-smi answers), or run them in their CUDA images (launcher=docker "
            "launcher.docker.gpus=all), or set device=cpu for all; allow_mixed_devices=true "
            "runs it anyway"
        )
    return problems
