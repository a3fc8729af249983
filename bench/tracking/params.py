"""Which config keys a trial run logs as MLflow params: the ones that can matter for it.
Every run used to carry all ~60 keys, so the UI showed ``model.seq_len`` on VGG-16 and
``launcher.docker.*`` under the process launcher.  Left out (their defaults apply, and the
whole resolved config is the run's ``config.json`` artifact, which ``bench reproduce``
reads):

- ``launcher.docker.*`` unless ``launcher=docker``;
- the sequence models' sizes (``model.seq_len``, ``model.layers``, ...) for an image model;
- ``optimizer.momentum`` with Adam (it has none);
- ``data.root`` for data that is not read from files (synthetic, scikit-learn's digits);
- ``telemetry.interval_s`` with ``telemetry.enabled=false``;
- ``tuning.refresh``, ``tuning.budget_s`` and ``tuning.probe_s`` with ``tuning=default``;
- ``framework.version`` when it is the pinned one (empty): a run without it ran the pinned
  version; likewise ``framework.installed`` when empty (the trial's interpreter had the
  pinned version, or the run predates the field);
- ``claims`` (the sweep's, checked in its report), ``skip_unavailable`` and ``scale`` (a
  study preset's: what the scale sets is logged key by key).

A strategy's settings (``distributed.backend`` under ``distributed=ddp``, ...) are logged
only with that strategy: its typed config holds no other strategy's keys.

The report groups runs with the same rule applied to their params, so runs logged before
it (with every key) and after it group together.  The config hash is unchanged: it hashes
the whole config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MODEL_KEPT = ("model.name", "model.source")
_NOT_FROM_FILES = ("synthetic", "digits")


def irrelevant(flat: Mapping[str, Any]) -> set[str]:
    """The keys of a flat config (or a run's params) that cannot matter for that run."""
    from bench.models import MODELS  # the registry only: imports no framework

    out = {"claims", "skip_unavailable", "scale"}
    if str(flat.get("launcher.name", "")) != "docker":
        out |= {k for k in flat if k.startswith("launcher.docker.")}
    spec = MODELS.get(str(flat.get("model.name", "")))
    if spec is not None and spec.task == "image":
        out |= {k for k in flat if k.startswith("model.") and k not in _MODEL_KEPT}
    if str(flat.get("optimizer.name", "")) == "adam":
        out.add("optimizer.momentum")
    if str(flat.get("data.name", "")) in _NOT_FROM_FILES:
        out.add("data.root")
    if not str(flat.get("framework.version", "")):  # the pinned version: no param
        out.add("framework.version")
    if not str(flat.get("framework.installed", "")):  # the pinned version as pinned
        out.add("framework.installed")
    if str(flat.get("timing", "")) == "auto":  # the method used is the run's timing tag
        out.add("timing")
    if str(flat.get("tuning.name", "default")) == "default":  # no search: its settings unused
        out |= {k for k in flat if k.startswith("tuning.") and k != "tuning.name"}
    if str(flat.get("telemetry.enabled", "")).lower() == "false":
        out.add("telemetry.interval_s")
    return out & set(flat)


def relevant(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``flat`` without its :func:`irrelevant` keys."""
    drop = irrelevant(flat)
    return {k: v for k, v in flat.items() if k not in drop}
