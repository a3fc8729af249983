"""What bench's sweeper and its task function do.

:func:`run_sweep` (the sweeper, ``-m``): expand the jobs, compose and validate every one of
them (any problem stops the sweep with exit 2 before its first trial, and no run is made),
open the parent run, launch the jobs through Hydra's launcher, collect each job's row and
finish: summary, parent run, exit status.  It returns the sweep's exit status (0; 1 if a
trial or bench failed; 2 for bad input, before any run; 130 after Ctrl-C).

Both take the sweep's collaborators (the store, the launchers) as a
:class:`~.session.SweepContext`, which the caller makes: bench's sweeper one per sweep,
handing the same one to the jobs it runs in this process.

:func:`run_job` (the task function, once per job, wherever the launcher runs it): turn the
job's config into a typed one, join its sweep, run its trial, return its row.  Without a
sweep (a plain ``python -m bench``, no ``-m``) the job is a sweep of one trial of its own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ParamSpec

from omegaconf import DictConfig

from bench.analysis import drift
from bench.checks.availability import split_unavailable
from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError, auto_repeats
from bench.core.result import ERROR, OK
from bench.core.tables import text_table
from bench.launchers.base import on_time_limit_warning
from bench.sweep import parity, rounds
from bench.sweep.compose import compose_all, to_bench_config
from bench.sweep.jobs import BenchExit, SweepRef, check_all, expand, fail, trial_label, varying
from bench.sweep.session import Counting, Row, Sweep, SweepContext, TrialStopped
from bench.trial.runtime.processes import interrupts, shielded

P = ParamSpec("P")


def sweep_name(overrides: Sequence[str] = ()) -> str:
    """A sweep's parent run's name: what it varies first, so that MLflow's runs table (which
    cuts names short) tells sweeps apart, then when it started; Hydra's and the store's
    settings left out.  ``sweep-<date>`` for a sweep of the defaults."""
    shown = [o.lstrip("+") for o in overrides
             if not o.lstrip("+~").startswith(("hydra", "tracking.", "report="))]  # fmt: skip
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if not shown:
        return f"sweep-{stamp}"
    what = " ".join(shown)
    return f"{what[:77] + '...' if len(what) > 80 else what} · {stamp}"


def _interrupted() -> None:
    print(
        "bench: interrupted; the running trial was stopped and recorded as killed",
        file=sys.stderr,
    )


def _exit_status(sweep: Callable[P, int]) -> Callable[P, int]:
    """``sweep`` with a refusal (exit 2) or bench's own failure (exit 1), said already where
    it was found and raised as :class:`BenchExit`, returned as its status."""

    @functools.wraps(sweep)
    def run(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return sweep(*args, **kwargs)
        except BenchExit as stop:
            return int(stop.code or 0)

    return run


@_exit_status
def run_sweep(
    config: DictConfig,
    compose: Callable[[list[str]], DictConfig],
    launch: Callable[[list[list[str]], int], Sequence[Any]],
    arguments: Sequence[Any],
    context: SweepContext,
    max_batch_size: int | None = None,
    slurm_partition: Callable[[str | None], tuple[str, int] | None] | None = None,
    blocks: Sequence[Sequence[Any]] = (),
    dry_run: bool = False,
) -> int:
    """Run a sweep: ``arguments`` are the parsed overrides (sweeper params first; ``blocks``
    those of each block of the sweeper's grid, where it has one),
    ``compose`` composes one job's config, ``launch`` runs a batch of jobs (Hydra's
    launcher) and returns their JobReturns, ``context`` holds the store and the launchers
    (the jobs that run in this process must be given the same one); ``dry_run``: stop after
    the checks, listing the trials.  Returns the sweep's exit status."""
    heard = interrupts()  # one arriving later and swallowed by Python still stops the sweep

    def stop_if_interrupted() -> None:
        if interrupts() > heard:
            raise KeyboardInterrupt

    auto, repeats = sweep_repeats(config)
    launcher = str(config.hydra.launcher.get("_target_", ""))
    try:
        jobs = expand(arguments, repeats, blocks)
        if not jobs:
            raise ConfigError(["the sweep has no trials"])
        counting = Counting("composing the sweep's trials:")
        try:
            composed = compose_all(compose, jobs, counting)
        finally:
            counting.close()
        slurm = "slurm" in launcher.lower()
        composed, not_run = split_unavailable(composed, slurm)
        jobs = [job for _, job, _ in composed]
        _say_not_run(not_run)
        if not jobs:
            raise ConfigError(["the sweep has no trial this machine can run (see above)"])
        partition = None
        if slurm and slurm_partition is not None and any(c.nodes > 1 for _, _, c in composed):
            partition = slurm_partition(config.hydra.launcher.get("partition"))
        check_all([(label, cfg) for label, _, cfg in composed], slurm, partition)
    except ConfigError as exc:
        fail(exc.problems)
    if dry_run:
        _say_planned([label for label, _, _ in composed], len(not_run), auto)
        return 0
    first = composed[0][2]
    given = [str(a.input_line) for a in arguments]
    with _no_crash():
        sweep = Sweep.open(first, len(jobs), sweep_name(given), given, context)
        sweep.not_run = not_run
    ref = SweepRef(sweep.sweep_id, len(jobs), varying(jobs))
    # Jobs that run in this process go one at a time, so that each row is kept as soon as
    # its trial ends (Ctrl-C in one trial keeps the rows before it); jobs sent elsewhere (a
    # Slurm array) go in batches.
    in_process = launcher.endswith("BasicLauncher")
    size = max_batch_size if max_batch_size and max_batch_size > 0 else len(jobs)
    size = 1 if in_process else size
    rows: list[Row] = []
    try:
        verdicts = parity.run_checks([c for _, _, c in composed], sweep.store, sweep.sweep_id)

        drift = _Drift(sweep, repeats > 1 and in_process)

        def run_jobs(indices: list[int]) -> list[Row]:
            ran: list[Row] = []
            for start in range(0, len(indices), size):
                stop_if_interrupted()  # one swallowed while the store was made, or after a trial
                chosen = indices[start : start + size]
                drift.before(rounds.round_of(jobs[chosen[0]]))
                batch = [
                    jobs[i] + ref.overrides() + parity.overrides(composed[i][2], verdicts)
                    for i in chosen
                ]
                for done, i in zip(launch(batch, chosen[0]), chosen, strict=True):
                    row = _row_of(done, composed[i][0], composed[i][2])
                    rows.append(row)
                    ran.append(row)
            return ran

        if auto:
            _run_rounds(jobs, first, run_jobs, rounds.unmeasured([c for _, _, c in composed]))
        else:
            run_jobs(list(range(len(jobs))))
        stop_if_interrupted()
        drift.after()
        drift.say()
    except KeyboardInterrupt as stop:
        with shielded():  # the parent run is closed whatever else arrives
            sweep.finish([*rows, stop.row] if isinstance(stop, TrialStopped) else rows, True)
        _interrupted()
        return 130
    with _no_crash():
        code = sweep.finish(rows)
    if interrupts() > heard:  # one swallowed while the sweep was closed
        _interrupted()
        return 130
    return code


class _Drift:
    """The drift check (bench.analysis.drift): a reference step before each round of a
    sweep with repeats whose trials run on this machine (not a Slurm array's), logged on its
    parent run, and one after the last round; at the end, the rounds that moved and those
    whose reference changed while they ran."""

    def __init__(self, sweep: Sweep, enabled: bool) -> None:
        self.sweep, self.enabled = sweep, enabled
        self.reference = drift.Reference()
        self.times: dict[int, float] = {}
        self.final: float | None = None  # after the last round

    def after(self) -> None:
        if self.enabled and self.times:
            self.final = self.reference.time()

    def before(self, round_: int) -> None:
        if not self.enabled or round_ in self.times:
            return
        seconds = self.reference.time()
        self.times[round_] = seconds
        self.sweep.store.note_round(self.sweep.sweep_id, round_, seconds)

    def say(self) -> None:
        rounds_, times = list(self.times), list(self.times.values())
        moved = drift.flagged(times)
        if moved:
            middle = statistics.median(times)
            shown = ", ".join(
                f"round {rounds_[i] + 1} {100 * (times[i] / middle - 1):+.0f}%" for i in moved
            )
            print(
                f"bench: the machine drifted: the reference step moved by more than "
                f"{100 * drift.THRESHOLD:g}% from the sweep's median in {shown} (metric "
                "reference_step_s on the sweep's run); compare those rounds' trials with care",
                file=sys.stderr,
            )
        within = drift.changed_within(times, self.final)
        if within:
            shown = ", ".join(
                f"round {rounds_[i] + 1} ({100 * change:+.0f}% after it)"
                for i, change in within.items()
            )
            print(
                f"bench: the machine changed during {shown}: its reference step after the "
                f"round differs by more than {100 * drift.THRESHOLD:g}% from the one before "
                "it (load began or ended while its trials ran); compare those rounds' trials "
                "with care",
                file=sys.stderr,
            )


def sweep_repeats(config: DictConfig) -> tuple[bool, int]:
    """(repeats=auto, how many times each job runs: max_repeats rounds at most under auto)."""
    auto = str(config.get("repeats", 1)).strip().lower() == "auto"
    return auto, int(config.get("max_repeats", 10)) if auto else _repeats(config.get("repeats", 1))


def _repeats(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        fail([f"repeats: an integer >= 1 or auto; got {value!r}"])
        raise  # unreachable: fail raises


def _run_rounds(
    jobs: list[list[str]],
    cfg: BenchConfig,
    run_jobs: Callable[[list[int]], list[Row]],
    unmeasured: frozenset[str] = frozenset(),
) -> None:
    """repeats=auto (bench.sweep.rounds): run round after round, each over the
    configurations whose comparisons are not all settled, until none is left, the last
    round or the budget.  Overrides of ``unmeasured`` keys (:func:`rounds.unmeasured`) are
    no part of a configuration: jobs that differ only in them are one, as in the report."""
    started = time.monotonic()

    def config_of(job: list[str]) -> rounds.Config:
        return rounds.config_of(job, unmeasured)

    configs = list(dict.fromkeys(config_of(j) for j in jobs))
    pairs = rounds.comparisons(configs, cfg.claims)  # a claim's sides are a comparison too
    by_round: dict[int, list[int]] = {}
    for i, job in enumerate(jobs):
        by_round.setdefault(rounds.round_of(job), []).append(i)
    seen: list[tuple[rounds.Config, str, float | None]] = []
    # per round, per ok run: whether contention=wait's gate gave up on it (drift.loaded_rounds)
    loaded: list[list[bool]] = []
    active = set(configs)
    last = max(by_round)
    kept: dict[rounds.Comparison, rounds.Status] = {}  # settled is sticky
    for r in sorted(by_round):
        chosen = [i for i in by_round[r] if config_of(jobs[i]) in active]
        loaded.append([])
        for i, row in zip(chosen, run_jobs(chosen), strict=True):
            seen.append((config_of(jobs[i]), row.status, row.samples_per_s))
            if row.status == OK:
                loaded[-1].append(row.gave_up)
        done = r + 1
        if done < 2:
            continue
        statuses = rounds.settle(pairs, rounds.times_of(seen), done, last + 1,
                                 cfg.equivalence_margin, kept)  # fmt: skip
        active = rounds.still_open(configs, statuses) if pairs else set()
        over = cfg.repeats_budget_s > 0 and time.monotonic() - started >= cfg.repeats_budget_s
        settled = sum(s.settled and not s.capped for s in statuses)
        capped = sum(s.capped for s in statuses)
        stuck = drift.loaded_rounds(loaded) >= drift.LOADED_ROUNDS
        if not active or over or r == last or stuck:
            if stuck and active:  # more rounds would measure the load, not the frameworks
                why = (
                    f"the machine stayed loaded: every ok trial of the last "
                    f"{drift.LOADED_ROUNDS} rounds was timed under load that contention=wait "
                    "could not wait out (tag bench.contention_gate), so no more rounds are "
                    f"asked for; {len(statuses) - settled} of {len(statuses)} comparisons "
                    "still open"
                )
            elif capped:  # the last look ends an open comparison as futile: say the cap ended it
                why = f"max_repeats reached; {capped} of {len(statuses)} comparisons still open"
            elif not active:
                why = "every comparison is settled"
            else:
                why = "the budget (repeats_budget_s) is spent" if over else "max_repeats reached"
            tally = rounds.tally(statuses)
            print(f"bench: repeats=auto: {done} rounds ({why}): {tally}", file=sys.stderr)
            for line in rounds.describe(statuses):
                print(line, file=sys.stderr)
            return
        print(
            f"bench: repeats=auto: round {done}: {settled} of {len(statuses)} comparisons "
            f"settled; {len(active)} configurations run another round:",
            file=sys.stderr,
        )
        for line in rounds.describe(statuses):
            print(line, file=sys.stderr)


def _say_planned(labels: Sequence[str], not_run: int, auto: bool = False) -> None:
    """The trials a dry run found ready, in the order a sweep would run them.  ``auto``
    (repeats=auto): every round up to max_repeats is listed, and the total is a maximum."""
    print(text_table(("#", "trial"), [(str(i), label) for i, label in enumerate(labels, 1)]))
    skipped = f"; {not_run} cell(s) this machine cannot run are listed above" if not_run else ""
    if auto:
        first = sum(1 for label in labels if re.search(r"\brepeat=[01]\b", label))
        print(
            f"\nat most {len(labels)} trial{'s' if len(labels) != 1 else ''} would run "
            "(repeats=auto, a dry run: every check "
            f"passed; nothing was started and no MLflow run was made{skipped}): the first "
            f"two rounds ({first} trials) always run; each later round runs only the "
            "configurations with a comparison still open"
        )
        return
    print(
        f"\n{len(labels)} trial{'s' if len(labels) != 1 else ''} would run (a dry run: every "
        f"check passed; nothing was started and no MLflow run was made{skipped})"
    )


def _say_not_run(not_run: Sequence[tuple[str, str]]) -> None:
    if not_run:
        print(
            f"bench: {len(not_run)} cell(s) of the matrix cannot run on this machine and are "
            "skipped (skip_unavailable=true):",
            file=sys.stderr,
        )
        for label, why in not_run:
            print(f"  {label}: {why}", file=sys.stderr)


@contextlib.contextmanager
def _no_crash() -> Iterator[None]:
    """bench's own failure (the store refuses, a bug) is exit 1 with its traceback, never
    taken for bad input (Hydra would end it with exit 1, which the CLI reads as a refusal)."""
    try:
        yield
    except (BenchExit, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - reported, then exit 1
        traceback.print_exception(exc)
        print(f"bench: the sweep failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise BenchExit(1) from None


def _row_of(done: Any, label: str, cfg: BenchConfig) -> Row:
    """A job's row: what it returned, or an error row for a job that raised."""
    from hydra.core.utils import JobStatus

    try:
        value = done.return_value  # raises what the job raised
    except Exception as exc:  # noqa: BLE001 - recorded as the job's row
        value = exc
    if done.status == JobStatus.COMPLETED and isinstance(value, Row):
        return value
    why = value if done.status == JobStatus.FAILED else "no result"
    print(f"bench: the job of {label} failed: {why}", file=sys.stderr)
    return Row(label, ERROR, None, 0.0)


def run_job(
    config: DictConfig, overrides: list[str], workdir: Path, index: int, context: SweepContext
) -> Row:
    """One Hydra job: one trial of the sweep named in the job's environment (through
    ``context``, the sweep's own when the job runs in the sweeper's process), or a sweep of
    its own when there is none (a plain run)."""
    try:
        cfg = to_bench_config(config)
    except ConfigError as exc:
        fail(exc.problems)
    if os.environ.get("SLURM_JOB_ID"):  # Slurm warns with SIGUSR2 before its time limit
        on_time_limit_warning()
    ref = SweepRef.from_env()
    if ref is None:
        return _single(cfg, overrides, workdir, context)
    sweep = Sweep.attach(cfg, ref.sweep_id, ref.total, context)
    label = trial_label(cfg, overrides, ref.varying)
    try:  # checked by the sweeper; a job elsewhere (a Slurm node) checks its machine again
        validate(cfg)
    except ConfigError as exc:
        return sweep.record_ended(cfg, label, ERROR, "\n".join(exc.problems), "")
    return sweep.run(cfg, label, workdir, index, parity.trial_tags())


def _single(cfg: BenchConfig, overrides: list[str], workdir: Path, context: SweepContext) -> Row:
    if not auto_repeats(cfg) and (
        not isinstance(cfg.repeats, int) or isinstance(cfg.repeats, bool)
    ):
        fail([f"repeats: an integer >= 1 or auto; got {cfg.repeats!r}"])
    if auto_repeats(cfg) or cfg.repeats > 1:
        fail([f"repeats: {cfg.repeats} runs of a configuration are a sweep; add -m"])
    label = trial_label(cfg, overrides, ())
    try:
        check_all([(label, cfg)])
    except ConfigError as exc:
        fail(exc.problems)
    heard = interrupts()
    with _no_crash():
        sweep = Sweep.open(cfg, 1, sweep_name(overrides), overrides, context)
    try:
        if interrupts() > heard:  # swallowed by Python while the store was made
            raise KeyboardInterrupt
        verdicts = parity.run_checks([cfg], sweep.store, sweep.sweep_id)
        verdict = verdicts.get(parity.group_of(cfg))
        with _no_crash():
            row = sweep.run(cfg, label, workdir, 1, {"bench.parity": verdict} if verdict else None)
    except KeyboardInterrupt as stop:
        with shielded():
            sweep.finish([stop.row] if isinstance(stop, TrialStopped) else [], killed=True)
        _interrupted()
        raise BenchExit(130) from None
    with _no_crash():
        code = sweep.finish([row])
    raise BenchExit(130 if interrupts() > heard else code)
