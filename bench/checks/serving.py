"""mode=serve's refusals before any trial (bench.trial.serve): what is not wired for serving
yet, and LoadGen missing from the interpreter that would run the trial.  The keys' own
ranges and choices are :func:`bench.core.rules.check`'s."""

from __future__ import annotations

import importlib.util

from bench.core.config import BenchConfig
from bench.core.frameworks import JAX, MXNET, TF, TORCH

# The frameworks whose sessions serve (bench.frameworks.base.Predict).
SERVING_FRAMEWORKS = (TORCH, TF, JAX, MXNET)
LOADGEN = "mlperf_loadgen"


def check(cfg: BenchConfig) -> list[str]:
    """The problems of serving ``cfg`` (none unless mode=serve)."""
    if cfg.mode != "serve":
        return []
    from bench.models import own_causal_lm

    problems: list[str] = []
    if cfg.framework.name not in SERVING_FRAMEWORKS:
        problems.append(
            f"mode: serve is wired for framework={', '.join(SERVING_FRAMEWORKS)}; "
            f"framework={cfg.framework.name} has no serving session"
        )
    if own_causal_lm(cfg.model):
        problems.append(
            f"mode: serve does not serve causal LMs yet (LoadGen's token latencies are not "
            f"wired); {cfg.model.name} is one: use mode=generate"
        )
    for key in ("breakdown", "profile"):
        if getattr(cfg, key):
            problems.append(f"{key}: not wired for mode=serve; leave it false")
    if cfg.tuning.name != "default":
        problems.append(
            "tuning: best searches training and inference steps; mode=serve takes "
            "tuning=default (set compile=, threads= and serve.max_batch by hand)"
        )
    if cfg.launcher.name == "inline" and importlib.util.find_spec(LOADGEN) is None:
        problems.append(
            "mode: serve needs MLPerf's LoadGen in this interpreter (pip install "
            "mlcommons-loadgen; bench's locks pin it)"
        )
    return problems
