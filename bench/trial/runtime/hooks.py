"""Trial hooks: what a check harness changes in a real trial, handed to
:func:`bench.trial.loop.run_trial` as its ``hooks`` argument; the trial never looks for one.

There is one hook today, the parity check's (``parity``: train from given weights on given
batches and write back the losses and final weights; see
:mod:`bench.trial.frameworks.parity_hook`).  The check (:mod:`bench.parity.strategy`) writes
``hooks.json`` into the trial's folder before it starts the trial; the entry points that
run a trial (``python -m bench.trial.worker``, the inline launcher, a distributed rank, an MXNet
kvstore worker) build :class:`TrialHooks` from that file with :meth:`TrialHooks.read`, and
the runners that start processes of their own (the distributed coordinator, the kvstore
job) write it again where their processes read it.  No environment variable switches a
hook on.

A trial run with a hook says so: :meth:`TrialHooks.mark` puts ``hooks`` (the names, e.g.
``parity``) into the result's environment, which becomes the run's MLflow tag
``bench.hooks``, so that such a run is never taken for a normal one.  The launchers mark
the results they make themselves (a timeout, a trial that died) too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.core.result import TrialResult
from bench.trial.runtime.protocol import read_regular, write_json_atomic

# The file in a trial's folder that names its hooks: {"parity": "<folder>"}, the folder
# relative to the trial's folder or absolute.
HOOKS = "hooks.json"
# The result's environment key (MLflow tag ``bench.hooks``) that names the hooks a run used.
TAG = "hooks"


@dataclass(frozen=True)
class TrialHooks:
    """The hooks one trial runs with; the default, no hook at all, is a normal trial."""

    # parity: the folder with the parity check's weights and batches, where each process
    # writes its losses and weights (:mod:`bench.trial.frameworks.parity_hook`).
    parity: Path | None = None
    # fault: a fault the convergence check injects into this trial (:mod:`bench.trial.faults`,
    # :mod:`bench.parity.convergence`), to prove that the check sees it; "" none.
    fault: str = ""

    @property
    def names(self) -> list[str]:
        named = ["parity"] if self.parity is not None else []
        return named + ([f"fault={self.fault}"] if self.fault else [])

    def environment(self) -> dict[str, str]:
        """What a result of a trial with these hooks records ({} without hooks)."""
        return {TAG: ",".join(self.names)} if self.names else {}

    def mark(self, result: TrialResult) -> None:
        """Note on ``result`` that it came from a trial with these hooks (none: nothing)."""
        result.environment.update(self.environment())

    def write(self, folder: Path) -> None:
        """Name these hooks in ``folder/hooks.json`` (a relative folder is relative to
        ``folder``); without hooks, remove the file."""
        path = folder / HOOKS
        named = {"parity": str(self.parity)} if self.parity is not None else {}
        if self.fault:
            named["fault"] = self.fault
        if not named:
            path.unlink(missing_ok=True)
            return
        write_json_atomic(path, named)

    @classmethod
    def read(cls, folder: Path) -> TrialHooks:
        """The hooks ``folder/hooks.json`` names, their folders made absolute; none where
        there is no such file.  Raises ValueError for a file :meth:`write` did not write."""
        path = folder / HOOKS
        if not path.exists() and not path.is_symlink():
            return cls()
        try:
            named = json.loads(read_regular(path, limit=1 << 16))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable hooks file: {exc}") from None
        if not isinstance(named, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in named.items()
        ):
            raise ValueError(f"{path}: expected an object of hook names to folders")
        unknown = sorted(set(named) - {"parity", "fault"})
        if unknown:
            raise ValueError(f"{path}: unknown hooks {unknown}; known: ['parity', 'fault']")
        parity = named.get("parity")
        return cls(
            parity=None if parity is None else (folder / parity).absolute(),
            fault=named.get("fault", ""),
        )


# A normal trial: no hook.
NO_HOOKS = TrialHooks()
