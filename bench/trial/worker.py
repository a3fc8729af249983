"""Entry point of a trial's own process: ``python -m bench.trial.worker WORKDIR``.

Serves the trial directory (:mod:`bench.trial.runtime.child`): reads ``WORKDIR/config.json``
(and ``WORKDIR/hooks.json``, the hooks a check harness asked for: :mod:`bench.trial.runtime.hooks`),
appends one JSON line per finished epoch to ``WORKDIR/events.jsonl`` (so the host can stream
them) and writes ``WORKDIR/result.json``.  :func:`execute` is what runs a trial of any kind,
here and in the inline launcher: in this process, or through the runner of a strategy that
starts processes of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.core import metrics
from bench.core.config import BenchConfig
from bench.core.result import ERROR, EpochCallback, TrialResult
from bench.trial.distributed.registry import STRATEGIES
from bench.trial.loop import run_trial
from bench.trial.runtime import child
from bench.trial.runtime.hooks import NO_HOOKS, TrialHooks
from bench.trial.runtime.protocol import CONFIG, read_config


def execute(
    cfg: BenchConfig,
    on_epoch: EpochCallback | None = None,
    workdir: Path | None = None,
    hooks: TrialHooks = NO_HOOKS,
) -> TrialResult:
    """Run the trial ``cfg`` describes, with ``hooks`` (a check harness's, named in the
    result); never raises for a failing trial."""
    result = _execute(cfg, on_epoch, workdir, hooks)
    hooks.mark(result)  # also where no process of the trial got as far as marking it
    return result


def _execute(
    cfg: BenchConfig, on_epoch: EpochCallback | None, workdir: Path | None, hooks: TrialHooks
) -> TrialResult:
    if cfg.tuning.name == "best":
        return _at_best(cfg, on_epoch, workdir, hooks)
    runner = STRATEGIES[cfg.distributed.name].runner
    if runner == "kvstore":  # MXNet's scheduler, servers and workers
        from bench.trial.distributed import kvstore

        return kvstore.run(cfg, on_epoch, workdir, hooks)
    if runner == "coordinator":  # rank processes started and watched from here
        from bench.trial.distributed import coordinator

        return coordinator.run(cfg, on_epoch, workdir, hooks)
    return run_trial(cfg, on_epoch, workdir, hooks=hooks)


def _at_best(
    cfg: BenchConfig, on_epoch: EpochCallback | None, workdir: Path | None, hooks: TrialHooks
) -> TrialResult:
    """tuning=best: search (or read the cached search), then run the trial at the pick."""
    from bench.trial import tuning

    try:
        # each candidate's figure goes to the trial's log (worker.log), as the search goes
        tuned = tuning.resolve(cfg, workdir, progress=_say)
    except tuning.SearchFailed as exc:  # every candidate failed: a result, with the table
        result = TrialResult(
            status=ERROR, framework=cfg.framework.name, model=cfg.model.name, mode=cfg.mode
        )
        result.error = str(exc)
        if workdir is not None:
            failed = tuning.Tuned(cfg, {}, "search", 0.0, [r.to_dict() for r in exc.rows])
            result.files += tuning.write_table(failed, workdir)
        return result
    result = run_trial(tuned.cfg, on_epoch, workdir, hooks=hooks)  # the search runs none
    result.tuned = tuned.params()
    result.summary[metrics.TUNING_SEARCH_S] = tuned.search_s
    result.environment["tuning_source"] = tuned.source
    result.environment["tuning_pick"] = tuning.said(tuned.pick)
    if cfg.mode == "serve":  # what the search ranked by (training's: samples/s)
        result.environment["tuning_objective"] = tuning.objective(cfg).name
    result.files += tuned.files
    return result


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(workdir: Path) -> int:
    child.start()
    hooks = TrialHooks.read(workdir)
    child.serve(
        read_config(workdir / CONFIG),
        workdir,
        lambda cfg, on_epoch, out: execute(cfg, on_epoch, out, hooks),
    )
    return 0


if __name__ == "__main__":
    child.exit_now(main(Path(sys.argv[1])))
