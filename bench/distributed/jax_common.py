"""Pieces the JAX strategies share (``jax_dp``, ``jax_distributed``): XLA's host devices."""

from __future__ import annotations

import re

# XLA's flag that makes its CPU client expose that many host devices (read when JAX loads).
HOST_DEVICES = "xla_force_host_platform_device_count"


def host_device_flags(existing: str, devices: int) -> str:
    """``XLA_FLAGS`` asking XLA's CPU client for ``devices`` host devices, the rest kept."""
    kept = re.sub(rf"(--)?{HOST_DEVICES}=\S*", "", existing).split()
    return " ".join([*kept, f"--{HOST_DEVICES}={devices}"])
