"""Where bench's own files are.  In a source checkout (and its editable install) ``conf/``
and ``docker/`` sit beside the package; an installed wheel carries copies of them inside
the package (``bench/_data/``, put there by setup.py's build step), so that ``bench`` runs
from any directory."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# A file each folder must hold, so that an unrelated conf/ beside site-packages is not taken.
_MARKERS = {"conf": "config.yaml", "docker": "torch.Dockerfile"}


def data(name: str) -> Path:
    """bench's ``conf`` or ``docker`` folder."""
    beside = PACKAGE.parent / name
    if (beside / _MARKERS[name]).is_file():
        return beside
    return PACKAGE / "_data" / name
