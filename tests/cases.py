"""Parametrised cases of which a few named ones are the slow tier's (``pytest.mark.slow``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest


def slow_cases(cases: Sequence[tuple[list[str], Any]], slow: Iterable[str]) -> list[Any]:
    """``cases`` as pytest params with the command line as the id, those in ``slow`` marked
    slow; a name in ``slow`` that is no case's id is an error, so the list cannot rot."""
    slow = set(slow)
    ids = [" ".join(args) for args, _ in cases]
    missing = slow - set(ids)
    if missing:
        raise ValueError(f"slow cases that are no case: {sorted(missing)}")
    return [
        pytest.param(args, expected, id=case, marks=[pytest.mark.slow] if case in slow else [])
        for (args, expected), case in zip(cases, ids, strict=True)
    ]
