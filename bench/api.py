"""bench from Python (a notebook, a script): run a sweep and read its results and verdicts
as pandas tables, without a shell.

    import bench
    results = bench.run("model=lenet5", "framework=torch,tf", steps_per_epoch=2)
    verdicts = bench.compare(results.attrs["tracking_uri"])

:func:`run` runs ``python -m bench -m ...`` in a child process, exactly as the command
line does (bench's own checks, exit statuses and store), and returns the sweep's runs;
:func:`runs` reads the runs of a store, :func:`compare` the report's verdicts of them.
``import bench`` stays cheap: ``bench.run`` and its kin import this module on first use.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.core import metrics
from bench.core.config import TrackingConfig

if TYPE_CHECKING:
    import pandas

# The figures a table of runs shows first, where a run has them.
FIRST = (
    metrics.TRIAL_SAMPLES_PER_S,
    metrics.EPOCH_TIME_S,
    metrics.TRIAL_TIME_S,
    metrics.FINAL_LOSS,
)


class SweepRefused(ValueError):
    """bench refused the sweep's input (exit status 2): the message is bench's."""


def _override(key: str, value: Any) -> str:
    """A keyword as an override: a list or tuple sweeps its values (``framework=["torch",
    "tf"]`` -> ``framework=torch,tf``); booleans as Hydra spells them."""
    if isinstance(value, list | tuple):
        return f"{key}={','.join(_value(v) for v in value)}"
    return f"{key}={_value(value)}"


def _value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def overrides_of(overrides: Sequence[str], keys: dict[str, Any]) -> list[str]:
    """The command line of :func:`run`'s arguments: the overrides as given, then each
    keyword (``tracking_uri=`` is ``tracking.uri``; a double underscore a dot:
    ``optimizer__lr=0.1`` is ``optimizer.lr=0.1``)."""
    out = list(overrides)
    for key, value in keys.items():
        name = "tracking.uri" if key == "tracking_uri" else key.replace("__", ".")
        out.append(_override(name, value))
    return out


def _store_of(args: Sequence[str]) -> tuple[str, str | None]:
    uri, experiment = TrackingConfig.uri, None
    for arg in args:
        key, _, value = arg.partition("=")
        if key.lstrip("+") == "tracking.uri":
            uri = value
        elif key.lstrip("+") == "tracking.experiment":
            experiment = value
    return uri, experiment


def run(*overrides: str, quiet: bool = False, **keys: Any) -> pandas.DataFrame:
    """Run a sweep (``bench -m OVERRIDES KEY=VALUE...``) and return its runs, one row each
    (:func:`runs`).  Bad input raises :class:`SweepRefused` with bench's message; a failed
    trial is a row with its status, as in the store.  ``quiet``: bench's progress lines are
    not passed on.  The table's ``attrs`` hold the store and the exit status."""
    args = overrides_of(overrides, keys)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "-m", *args],
        stdout=subprocess.PIPE if quiet else None,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if not quiet and done.stderr:
        sys.stderr.write(done.stderr)
    if done.returncode == 2:
        lines = [line for line in done.stderr.splitlines() if line.startswith("bench")]
        raise SweepRefused("\n".join(lines) or done.stderr.strip())
    if done.returncode not in (0, 1):
        raise RuntimeError(f"bench stopped with exit status {done.returncode}")
    uri, experiment = _store_of(args)
    table = runs(uri, experiment, sweep="latest")
    table.attrs["exit_status"] = done.returncode
    return table


def runs(
    uri: str = TrackingConfig.uri, experiment: str | None = None, sweep: str | None = None
) -> pandas.DataFrame:
    """The trial runs of a store as a table, one row per run: its id, name, status, the
    compared keys (params) and its figures (metrics), the main figures first.  ``sweep``: a
    parent run id or ``"latest"``; with only ``experiment``, every run of it; with neither,
    the latest sweep."""
    import pandas

    from bench.tracking import load_runs

    found = load_runs(uri, experiment, sweep)
    rows = []
    for r in found.records:
        row: dict[str, Any] = {"run_id": r.run_id, "name": r.name, "status": r.status}
        row.update(r.params)
        row.update(r.metrics)
        rows.append(row)
    table = pandas.DataFrame(rows)
    first = [c for c in ("run_id", "name", "status", *FIRST) if c in table.columns]
    table = table[first + [c for c in table.columns if c not in first]]
    table.attrs.update(tracking_uri=uri, experiment=found.experiment, sweep=found.sweep_id)
    return table


def compare(
    uri: str = TrackingConfig.uri, experiment: str | None = None, sweep: str | None = "latest"
) -> pandas.DataFrame:
    """The report's verdicts on the runs :func:`runs` reads, one row per compared pair:
    what is compared, the configuration, the verdict (``faster``, ``no significant
    difference``, ``equivalent``, ``not tested``, ``not comparable``), the faster side, the
    time ratio and its 95% interval, and the verdict in words."""
    import pandas

    from bench.report import verdicts
    from bench.tracking import load_runs

    found = load_runs(uri, experiment, None if experiment and sweep == "latest" else sweep)
    rows = [
        {
            "compared": what,
            "configuration": label,
            "verdict": v.kind,
            "faster": v.faster if v.kind == "faster" else "",
            "ratio": v.ratio,
            "ci_low": v.ci_low,
            "ci_high": v.ci_high,
            "text": v.text,
        }
        for what, label, v in verdicts(found)
    ]
    columns = ["compared", "configuration", "verdict", "faster", "ratio", "ci_low", "ci_high"]
    return pandas.DataFrame(rows, columns=[*columns, "text"])
