"""Processes of one distributed trial agreeing on a number without the framework's
collectives: each writes its proposal into a folder all of them see (the trial's working
directory, shared by its nodes already), waits for all ``world`` proposals and takes the
largest.  Every process ends with the same value; none needs to know its rank."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from bench.trial.runtime.protocol import write_json_atomic


def agree_max(folder: Path, world: int, mine: int, timeout_s: float, poll_s: float = 0.02) -> int:
    """The largest of the ``world`` processes' proposals (``mine`` among them)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json", mine)
    deadline = time.monotonic() + timeout_s
    while True:
        found = [p for p in folder.glob("*.json")]
        if len(found) >= world:
            return max(int(json.loads(p.read_text())) for p in found)
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"steps_per_epoch=-1 (auto): {len(found)} of {world} processes proposed a step "
                f"count within {timeout_s:g} s (in {folder}); set steps_per_epoch explicitly"
            )
        time.sleep(poll_s)
