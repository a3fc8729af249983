"""A sweep's runs: the parent run, one trial run per job, the summary at the end.

:meth:`Sweep.open` starts the parent run (on the side that starts the sweep);
:meth:`Sweep.attach` joins it from a job (in the same process, or a Slurm job elsewhere);
:meth:`Sweep.run` runs one trial in a job (skipping it when an ok run with its config
exists) and returns its summary :class:`Row`; :meth:`Sweep.finish` prints the table of every
job's row, ends the parent run and decides the exit status.  Progress goes to stderr, a
line per trial; the summary table to stdout.

What a sweep works with comes in as a :class:`SweepContext`, made where the sweep starts
(bench's sweeper, the CLI's task function, ``bench reproduce``): the factory that opens the
tracking store (once per sweep) and the one that gives a trial its launcher.  Tests pass
fakes of both.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from bench import tracking
from bench.core import metrics, sysinfo
from bench.core.config import BenchConfig
from bench.core.result import DIVERGED, ERROR, OK, TIMEOUT, EpochRecord, TrialResult
from bench.core.tables import text_table
from bench.envs import environments
from bench.launchers import Launcher, TrialInterrupted
from bench.launchers import get as get_launcher
from bench.launchers.collect import Caps, collect
from bench.sweep.jobs import BenchExit
from bench.tracking import mllog, recent
from bench.trial.runtime.processes import shielded

SKIPPED = "skipped"


@dataclass
class Row:
    label: str
    status: str
    samples_per_s: float | None
    seconds: float
    run_id: str = ""
    # mode=generate: its own figures in a few words (time to first token, decode rate)
    detail: str = ""
    # the host monitor's tag: other processes shared the trial's CPUs ('' : they did not)
    contention: str = ""
    # contention=wait's gate gave up: the load did not let go within its bounds
    # (bench.trial.monitors.contention; repeats=auto stops on rounds of such trials)
    gave_up: bool = False
    # mode=serve: LoadGen's figures and verdict (serving_detail; '' for the other modes)
    serving: str = ""


class TrialStopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a job's trial, which was recorded as ``row``."""

    def __init__(self, row: Row) -> None:
        super().__init__("trial stopped")
        self.row = row


OWNER_POLL_S = 2.0  # how often a trial waiting for another process's run looks again


class Counting:
    """Progress through a long preparatory step (composing a sweep's jobs: a few ms each,
    so tens of seconds for a matrix of 10,000): on a terminal a line that counts, shown once
    the step has taken ``after_s``, with an estimate of what is left; on any other stream
    (a log file, CI) a line every ``every_s``; on any stream a closing line when it took
    ``report_s`` or more.  Quick steps say nothing."""

    def __init__(
        self,
        what: str,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        after_s: float = 1.0,
        report_s: float = 5.0,
        every_s: float = 10.0,
    ) -> None:
        self.what, self.stream, self.clock = what, stream or sys.stderr, clock
        self.after_s, self.report_s, self.every_s = after_s, report_s, every_s
        self.tty = self.stream.isatty()
        self.started = clock()
        self.shown = False
        self.logged = self.started  # when a line last went to a stream that is no terminal
        self.done = self.total = 0

    def _left(self, took: float) -> str:
        if not self.done or self.done >= self.total:
            return ""
        return f", about {took / self.done * (self.total - self.done):.0f} s left"

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = self.clock()
        took = now - self.started
        if took < self.after_s:
            return
        if self.tty:
            self.stream.write(f"\rbench: {self.what} {done}/{total}{self._left(took)}\x1b[K")
            self.stream.flush()
            self.shown = True
        elif now - self.logged >= self.every_s and done < total:
            self.stream.write(f"bench: {self.what} {done}/{total}{self._left(took)}\n")
            self.stream.flush()
            self.logged = now

    def close(self) -> None:
        took = self.clock() - self.started
        if took >= self.report_s:
            line = f"bench: {self.what} {self.done}/{self.total} in {took:.0f} s"
            self.stream.write(f"\r{line}\x1b[K\n" if self.shown else f"{line}\n")
        elif self.shown:
            self.stream.write("\r\x1b[K")  # a quick step leaves no line behind
        self.stream.flush()


class Progress:
    """Quiet by default: a line per trial; on a terminal, epochs update that line."""

    def __init__(
        self,
        index: int,
        total: int | None,
        label: str,
        epochs: int,
        stream: TextIO | None = None,
        note: str = "",
    ) -> None:
        self.stream, self.epochs = stream or sys.stderr, epochs
        self.tty = self.stream.isatty()
        self.prefix = f"[{index}/{total if total else '?'}] {label}"
        start = f"{self.prefix} ... ({note})" if note else f"{self.prefix} ..."
        self._write(start, end="" if self.tty else "\n")

    def epoch(self, record: EpochRecord) -> None:
        if self.tty:
            self._write(
                f"\r{self.prefix}  epoch {record.epoch}/{self.epochs}  "
                f"{record.samples_per_s:,.1f} samples/s",
                end="",
            )

    def end(self, row: Row, note: str = "") -> None:
        unit = "tokens/s" if row.detail else "samples/s"  # mode=generate: generated tokens
        rate = f"{row.samples_per_s:,.1f} {unit}" if row.samples_per_s else "-"
        rate += f"  [{row.detail}]" if row.detail else ""
        rate += f"  [{row.serving}]" if row.serving else ""
        line = f"{self.prefix}  {row.status}  {rate}  ({row.seconds:.1f} s)"
        self._write(
            f"\r{line}\x1b[K" if self.tty else f"  -> {row.status}  {rate}  ({row.seconds:.1f} s)"
        )
        if note:
            self._write(f"    {note.strip()}")

    def _write(self, text: str, end: str = "\n") -> None:
        self.stream.write(text + end)
        self.stream.flush()


@contextlib.contextmanager
def _store_failure_exits(uri: str) -> Iterator[None]:
    """A failure of the store at ``uri`` inside: one line saying why, and exit 1."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - one line: the store, not bench, is at fault
        print(f"bench: {tracking.why_unavailable(uri, exc)}; no trial was started", file=sys.stderr)
        raise BenchExit(1) from None


def ok_notes(result: TrialResult, row: Row) -> str:
    """What an ok trial's line adds: where tuning=best's settings came from and which they
    are, what the contention gate waited for, and whether others shared its CPUs."""
    notes = []
    source = result.environment.get("tuning_source", "")
    if source:
        pick = result.environment.get("tuning_pick", "")
        notes.append(f"tuning: {tuning_said(source)}" + (f"; pick: {pick}" if pick else ""))
    discarded = int(result.summary.get(metrics.TRIAL_WINDOWS_DISCARDED, 0))
    waited = result.summary.get(metrics.TRIAL_CONTENTION_WAIT_S, 0.0)
    if discarded or waited >= 1:
        notes.append(
            f"contention=wait: {discarded} shared window{'s' if discarded != 1 else ''} "
            f"measured again, {waited:.0f} s waited for other processes to let go"
        )
    if row.gave_up:  # the gate's tag says what the host monitor's would, and why
        notes.append(result.environment.get("contention_gate", "")[:300])
    elif row.contention:
        notes.append(row.contention)
    return "\n    ".join(notes)


def tuning_said(source: str) -> str:
    """A tuning source (bench.trial.tuning.Tuned.source) in the console's words: "searched", or
    "from the cache (<date>)"."""
    if source.startswith("cache "):
        return "from the cache (" + source.rpartition("(")[2].rstrip(")") + ")"
    return "searched" + source.removeprefix("search")


def _before_epochs(cfg: BenchConfig) -> str:
    """What may keep a trial from its first epoch for long, said when it starts."""
    if cfg.tuning.name == "best":
        return (
            f"tuning=best: searching the settings first, up to {cfg.tuning.budget_s:.0f} s, "
            "unless a search is cached"
        )
    return ""


def generation_detail(summary: dict[str, float]) -> str:
    """A mode=generate trial's figures for the summary table ('' for the other modes; its
    samples/s are generated tokens/s, prefill included)."""
    if metrics.TRIAL_DECODE_TOKENS_PER_S not in summary:
        return ""
    return (
        f"TTFT {summary[metrics.TRIAL_TIME_TO_FIRST_TOKEN_MS]:,.1f} ms, "
        f"TPOT p50 {summary[metrics.TRIAL_TIME_PER_OUTPUT_TOKEN_P50_MS]:,.1f} ms, "
        f"decode {summary[metrics.TRIAL_DECODE_TOKENS_PER_S]:,.1f} tok/s"
    )


def serving_detail(summary: dict[str, float], environment: dict[str, str]) -> str:
    """A mode=serve trial's figures for the summary table ('' for the other modes): LoadGen's
    throughput (QPS where a query is one sample), its p99 latency and verdict; find_peak's
    highest VALID load; a causal LM's p99 time to first token and median time per output
    token."""
    if metrics.TRIAL_SERVE_LATENCY_P99_MS not in summary:
        return ""
    scenario = environment.get("serve.scenario", "")
    unit = "QPS" if scenario in ("Server", "SingleStream") else "samples/s"
    parts = []
    if metrics.SERVE_PEAK_QPS in summary:
        parts.append(f"peak {summary[metrics.SERVE_PEAK_QPS]:,.1f} QPS")
    parts.append(f"{summary.get(metrics.TRIAL_SERVE_SAMPLES_PER_S, 0.0):,.1f} {unit}")
    parts.append(f"p99 {summary[metrics.TRIAL_SERVE_LATENCY_P99_MS]:,.1f} ms")
    if metrics.TRIAL_SERVE_TTFT_P99_MS in summary:
        parts.append(f"TTFT p99 {summary[metrics.TRIAL_SERVE_TTFT_P99_MS]:,.1f} ms")
    if metrics.TRIAL_SERVE_TPOT_P50_MS in summary:
        parts.append(f"TPOT p50 {summary[metrics.TRIAL_SERVE_TPOT_P50_MS]:,.2f} ms")
    verdict = environment.get("serve.result", "")
    return ", ".join(parts) + (f", {verdict}" if verdict else "")


def format_table(rows: list[Row]) -> str:
    detail = any(row.detail for row in rows)  # mode=generate: a column of its own
    serving = any(row.serving for row in rows)  # mode=serve: one too
    # A generation's rate is generated tokens/s: the column says so.
    rate = "tokens/s" if rows and all(r.detail for r in rows) else "samples/s"
    rate = "samples or tokens/s" if detail and rate == "samples/s" else rate
    header: tuple[str, ...] = ("#", "trial", "status", rate, "time_s", "run")
    body = [
        (
            str(i),
            row.label,
            row.status,
            f"{row.samples_per_s:,.1f}" if row.samples_per_s else "-",
            f"{row.seconds:.1f}",
            row.run_id[:8],
            *([row.detail or "-"] if detail else []),
            *([row.serving or "-"] if serving else []),
        )
        for i, row in enumerate(rows, 1)
    ]
    header = (*header, "generation") if detail else header
    return text_table((*header, "serving") if serving else header, body)


@dataclass
class SweepContext:
    """A sweep's collaborators, made where the sweep starts and passed down to its jobs:
    ``open_store`` opens the tracking store of a URI and experiment, ``launcher`` gives the
    launcher a trial names (``launcher.name``).  ``store`` is the sweep's store, opened once
    by :meth:`store_of` and then shared by the sweep and every job it runs in this process
    (so a switch to the spool holds for all of them).  A job sent elsewhere (a Slurm job)
    gets the context without the store, and opens its own there."""

    open_store: Callable[[str, str], tracking.Store] = tracking.open_store
    launcher: Callable[[str], Launcher] = get_launcher
    store: tracking.Store | None = None

    def store_of(self, cfg: BenchConfig) -> tracking.Store:
        """The sweep's store (one sweep logs to one tracking URI and experiment: checked
        before it starts), opened on first use."""
        if self.store is None:
            self.store = self.open_store(cfg.tracking.uri, cfg.tracking.experiment)
        return self.store

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "store": None}  # the open store stays in this process


def _top(name: str) -> str:
    """The entry of a trial's folder that holds ``name`` (a path the trial's result names),
    or ``name`` itself where it points outside (refused when collected)."""
    path = PurePosixPath(name)
    inside = path.parts and not path.is_absolute() and ".." not in path.parts
    return path.parts[0] if inside else name


def host_environment() -> dict[str, str]:
    return {**sysinfo.git_environment(), **sysinfo.gpu_environment(), **sysinfo.slurm_environment()}


def trial_lock(cfg: BenchConfig) -> Path | None:
    """The lock the trial's environment was installed from (environments.lock_of), or None
    where the trial runs a framework no lock of bench's installed: ``framework.installed``
    is set (``framework.version=installed``, or a pin the interpreter does not have), and
    ``bench reproduce`` must not take the host's lock for it."""
    if cfg.framework.installed:
        return None
    from bench.core.versions import own_release
    from bench.images import image_variant

    release, variant = own_release(cfg.framework.version), image_variant(cfg)
    return environments.lock_of(cfg.framework.name, release, variant, environments.extra_of(cfg))


def _caps(cfg: BenchConfig) -> Caps:
    """The most of a trial's files its run keeps (``launcher.max_artifact_*``)."""
    return Caps(cfg.launcher.max_artifact_mb * 2**20, cfg.launcher.max_artifact_files)


class Sweep:
    def __init__(
        self,
        store: tracking.Store,
        sweep_id: str,
        total: int | None,
        report: bool = False,
        claims: list[Any] | None = None,
        launcher: Callable[[str], Launcher] = get_launcher,
    ) -> None:
        self.store, self.sweep_id, self.total = store, sweep_id, total
        self.launcher = launcher
        self.claims = list(claims or [])
        self.report = report or bool(self.claims)  # claims are checked in the report
        self.host_env = host_environment()
        # (label, why) of the matrix's cells this machine cannot run (skip_unavailable=true)
        self.not_run: list[tuple[str, str]] = []

    @classmethod
    def open(
        cls,
        cfg: BenchConfig,
        total: int | None,
        name: str,
        overrides: list[str],
        context: SweepContext,
    ) -> Sweep:
        """Start the parent run of a sweep of ``total`` trials in ``context``'s store."""
        with _store_failure_exits(cfg.tracking.uri):
            store = context.store_of(cfg)
            reaped = store.reap_orphans()
            if reaped:
                print(
                    f"bench: {reaped} run(s) left RUNNING by a bench process that is gone are "
                    "now marked KILLED (their trials run again)",
                    file=sys.stderr,
                )
            tags = tracking.environment_tags(host_environment())
            tags["bench.overrides"] = tracking.redact(" ".join(overrides))[:4000]
            if total is not None:
                tags["bench.total_trials"] = str(total)
            sweep_id = store.start_sweep(name, tags)
        recent.remember(cfg.tracking.uri)  # where `bench reproduce` and `bench ui` look
        if store.spooled_to() is not None:
            print(f"bench: results are kept in {store.where}", file=sys.stderr)
        return cls(store, sweep_id, total, cfg.report, cfg.claims, context.launcher)

    @classmethod
    def attach(
        cls, cfg: BenchConfig, sweep_id: str, total: int | None, context: SweepContext
    ) -> Sweep:
        """Join a sweep whose parent run was opened elsewhere (by the sweeper)."""
        store = context.store_of(cfg)
        return cls(store, sweep_id, total, cfg.report, cfg.claims, context.launcher)

    def _wait_for_owner(self, cfg: BenchConfig, label: str) -> None:
        """One owner per configuration: while another live bench process runs this
        configuration in the same store (two identical sweeps started together), wait for
        it rather than run beside it on the same cores, which would make both contended
        measurements; then its ok run is reused like any other.  Waits at most the trial's
        own timeout and a minute, then runs anyway, saying so."""
        owner = self.store.running_elsewhere(cfg)
        if not owner:
            return
        host, _, rest = owner.partition("/")
        print(
            f"bench: {label} is running in another bench process (pid "
            f"{rest.partition('/')[0]} on {host}); waiting for it rather than running beside it",
            file=sys.stderr,
        )
        deadline = time.monotonic() + cfg.timeout_s + 60.0
        while owner and time.monotonic() < deadline:
            time.sleep(OWNER_POLL_S)
            owner = self.store.running_elsewhere(cfg)
        if owner:
            print(f"bench: {label}: still running elsewhere; running it here too", file=sys.stderr)

    def run(
        self,
        cfg: BenchConfig,
        label: str,
        workdir: Path,
        index: int,
        tags: dict[str, str] | None = None,
    ) -> Row:
        """Run one trial (``tags``: extra tags for its run) unless an ok run exists.  Raises
        :class:`TrialStopped` after recording a trial that Ctrl-C or SIGTERM stopped."""
        progress = Progress(index, self.total, label, cfg.epochs, note=_before_epochs(cfg))
        started = time.time()
        self._wait_for_owner(cfg, label)
        if not cfg.force:
            done = self.store.find_ok_run(cfg)
            if done is not None:
                row = Row(
                    label,
                    SKIPPED,
                    done["metrics"].get(metrics.TRIAL_SAMPLES_PER_S),
                    0.0,
                    done["run_id"],
                )
                progress.end(row, "(an ok run with this config exists; force=true reruns it)")
                self.store.note_reused_run(self.sweep_id, done["run_id"])
                return row
        tags = {"bench.sweep_index": str(index), **(tags or {})}
        lock = trial_lock(cfg)
        if lock is not None:  # the lock the trial's environment was installed from
            tags["bench.lock_sha"] = environments.lock_hash_of(lock)
        tags.update({f"bench.{k}": v for k, v in sysinfo.slurm_environment().items()})
        run = self.store.start_trial(self.sweep_id, cfg, label, tags)

        def on_epoch(record: EpochRecord) -> None:
            run.log_epoch(record)
            progress.epoch(record)

        extra = [lock] if lock is not None else []
        try:
            result = self.launcher(cfg.launcher.name).launch(cfg, workdir, on_epoch)
        except TrialInterrupted as stop:
            with shielded():  # the stopped trial is recorded whole, whatever else arrives
                row = self._record(
                    run, stop.result, workdir, label, started, progress, extra, _caps(cfg)
                )
            if stop.result.status == TIMEOUT:  # the scheduler's time limit: a result
                return row
            raise TrialStopped(row) from stop
        except Exception as exc:  # noqa: BLE001 - a launcher bug must not end the sweep
            result = TrialResult(
                status=ERROR,
                framework=cfg.framework.name,
                model=cfg.model.name,
                mode=cfg.mode,
                error="the launcher failed:\n" + "".join(traceback.format_exception(exc)),
            )
        written = mllog.write(cfg, result, workdir)  # goal=accuracy: MLPerf's log of the run
        extra += [written] if written is not None else []
        return self._record(run, result, workdir, label, started, progress, extra, _caps(cfg))

    def _record(
        self,
        run: tracking.TrialRun,
        result: TrialResult,
        workdir: Path,
        label: str,
        started: float,
        progress: Progress,
        extra: list[Path] | None = None,
        caps: Caps | None = None,
    ) -> Row:
        for key, value in self.host_env.items():
            result.environment.setdefault(key, value)
        # A file in a sub-folder (rank1/events.jsonl, nodes/node1/torchrun.log) is logged with
        # its whole top folder, so that the ranks' and nodes' same-named files stay apart.
        # What the trial wrote is not trusted: copies of its regular files are logged, and
        # whatever else it left (a link to a host file, a FIFO, a name outside its folder)
        # is named in bench.refused_files and never read (bench.launchers.collect).
        names = ["worker.log", *(_top(name) for name in result.files)]
        beside = workdir.parent if workdir.parent.is_dir() else None
        with tempfile.TemporaryDirectory(prefix=".collected-", dir=beside) as staged:
            taken = collect(workdir, names, Path(staged), caps)
            if taken.refused:
                result.environment["refused_files"] = "; ".join(taken.refused)[:4000]
                print(
                    f"bench: {label}: not collected from {workdir}: " + "; ".join(taken.refused),
                    file=sys.stderr,
                )
            run.finish(result, taken.files + (extra or []))
        result.marks["logged"] = time.time()
        rate = result.summary.get(metrics.TRIAL_SAMPLES_PER_S)
        row = Row(
            label,
            result.status,
            rate,
            time.time() - started,
            getattr(run, "run_id", ""),
            generation_detail(result.summary),
            result.environment.get("contention", "")[:300],
            result.environment.get("contention_gate", "").startswith("bound hit"),
            serving_detail(result.summary, result.environment),
        )
        last = result.error.strip().splitlines()[-1] if result.error.strip() else ""
        progress.end(row, last[:300] if result.status != OK else ok_notes(result, row))
        return row

    def finish(self, rows: list[Row], killed: bool = False) -> int:
        """End the parent run, print the summary of ``rows``; return the exit status."""
        failed = any(r.status not in (OK, SKIPPED) for r in rows)
        table = format_table(rows)
        self.store.end_sweep(self.sweep_id, ok=not failed, killed=killed, summary=table)
        print()
        print(table)
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        tally = ", ".join(f"{n} {status}" for status, n in counts.items())
        trials = f"{len(rows)} trial{'s' if len(rows) != 1 else ''}"
        print(f"\n{trials}: {tally}. Results: {self._where()}")
        if counts.get(DIVERGED):
            print(
                f"{counts[DIVERGED]} diverged: an epoch's training loss was not finite (NaN or "
                "infinite); recorded, never reused by a rerun nor compared in the report"
            )
        shared = [
            i for i, r in enumerate(rows, 1) if r.status == OK and (r.contention or r.gave_up)
        ]
        if shared:
            which = f"trial{'s' if len(shared) > 1 else ''} {', '.join(map(str, shared))}"
            print(
                f"Ran beside other processes' CPU load: {which} (tag bench.contention, or "
                "bench.contention_gate where contention=wait gave up); such rates are low and "
                "noisy: rerun on a quiet machine before comparing"
            )
        if self.not_run:
            print(f"Not run on this machine ({len(self.not_run)} cells of the matrix):")
            for label, why in self.not_run:
                print(f"  {label}: {why}")
        reported = killed or not self.report or self._write_report()
        return 130 if killed else int(failed or not reported)

    def _where(self) -> str:
        """Where the results are; a spool is named as one, with what to do about it."""
        spool = self.store.spooled_to()
        if spool is None:
            return self.store.where
        return (
            f"{spool} (a spool: the tracking store {self.store.uri} could not be "
            "reached or written); once it is back: python -m bench.cli.sync"
        )

    def _write_report(self) -> bool:
        """report=true: the comparison report of this sweep, logged to its parent run."""
        store = self.store
        if store.spooled_to() is not None:
            print(
                "bench: report=true: no report, some results are in the spool; after "
                "python -m bench.cli.sync, run python -m bench.report",
                file=sys.stderr,
            )
            return False
        from bench.report import claims, report_sweep

        try:
            if self.claims:  # kept with the sweep, for any later report of it
                tracking.log_claims(store.uri, self.sweep_id, self.claims)
            where = report_sweep(store.uri, self.sweep_id, claims.parse(self.claims))
        except Exception as exc:  # noqa: BLE001 - the trials are recorded; only the report fails
            print(f"bench: the report could not be written: {exc}", file=sys.stderr)
            return False
        print(f"Report: {where}")
        return True

    def record_ended(self, cfg: BenchConfig, label: str, status: str, why: str, job: str) -> Row:
        """A trial whose job ended without a result (Slurm ended it, or never ran it): close
        the run the job opened, or record one, with ``status`` and ``why``."""
        trials = self.store.sweep_trials(self.sweep_id) if job else []
        mine = [t for t in trials if t["tags"].get("bench.slurm_job_id") == job]
        if mine:
            if mine[0]["running"]:
                self.store.close_trial(mine[0]["run_id"], status, why)
                return Row(label, status, None, mine[0]["seconds"], mine[0]["run_id"])
            t = mine[0]
            return Row(
                label, t["status"], t[metrics.TRIAL_SAMPLES_PER_S], t["seconds"], t["run_id"]
            )
        run = self.store.start_trial(self.sweep_id, cfg, label, {"bench.slurm_job_id": job})
        run.finish(TrialResult(status, cfg.framework.name, cfg.model.name, cfg.mode, error=why), [])
        return Row(label, status, None, 0.0, getattr(run, "run_id", ""))
