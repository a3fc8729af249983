"""One composition per command where Hydra would make two.

Hydra 1.3's entry point composes the whole configuration once only to read ``hydra.mode``
(``Hydra.get_mode``), then composes it again to run: about a quarter of a second each on bench's
configuration, paid by every command before it does anything.  In bench, ``hydra.mode`` is set
only by the configuration files that have a ``hydra:`` block (the study presets in
``conf/experiment/`` and ``conf/scales/``) or by a ``hydra.*`` override.  A command line that
selects none of those and adds no configuration folder of its own has no mode from its
configuration, which is exactly what ``get_mode`` would have answered (None: ``-m`` or not
decides); for it the first composition is skipped.  tests/config/test_hydra_mode.py holds this
to Hydra's own answer, command line by command line.  Anything else composes twice, as Hydra does.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any


@cache
def mode_groups(conf_dir: str) -> frozenset[str]:
    """The config groups (top folders of ``conf_dir``) with a file that sets ``hydra.mode``,
    and ``""`` when a file at the top (the primary config) sets it: then no command line is
    plain.  A file that cannot be read as a mapping counts as setting it."""
    import yaml

    groups = set()
    root = Path(conf_dir)
    for path in root.rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        if not re.search(r"^hydra\b", text, re.MULTILINE):  # no top-level `hydra` key
            continue
        try:
            settings = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            sets_mode = "mode" in (settings.get("hydra") or {})
        except (yaml.YAMLError, AttributeError, TypeError):
            sets_mode = True
        if sets_mode:
            parts = path.relative_to(root).parts
            groups.add(parts[0] if len(parts) > 1 else "")
    return frozenset(groups)


def plain(args: list[str], conf_dir: str) -> bool:
    """Whether Hydra's mode can come from nothing but ``-m``: no flag but ``-m``, no
    ``hydra.mode`` or ``hydra.searchpath`` override, no option of a group whose files set
    ``hydra.mode``.  Other ``hydra.*`` keys and Hydra's own groups (``hydra/job_logging=...``,
    ``hydra/launcher=...``: its plugins' settings, registered in Python) leave the mode alone."""
    groups = mode_groups(conf_dir)
    if "" in groups:
        return False
    for arg in args:
        if arg in ("-m", "--multirun"):
            continue
        if arg.startswith("-"):  # --config-dir, -cp, -cn, --cfg, ...: Hydra's own way
            return False
        key = arg.partition("=")[0].lstrip("+~")
        if key == "hydra" or key.startswith(("hydra.mode", "hydra.searchpath")):
            return False  # the mode itself, or configuration folders of the user's
        if re.split(r"[./@]", key, maxsplit=1)[0] in groups:
            return False
    return True


@contextlib.contextmanager
def one_composition(args: list[str], conf_dir: str) -> Iterator[None]:
    """Within the block, Hydra's ``get_mode`` answers None without composing when ``args`` is
    :func:`plain`."""
    if not plain(args, conf_dir):
        yield
        return
    from hydra._internal.hydra import Hydra

    original = Hydra.get_mode

    def get_mode(self: Any, config_name: str | None, overrides: list[str]) -> None:
        return None

    Hydra.get_mode = get_mode  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = original  # type: ignore[method-assign]
