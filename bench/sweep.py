"""A sweep on the host: skip finished trials, launch the rest, record every outcome.

One :class:`Sweep` per ``python -m bench`` invocation.  It owns the MLflow parent run,
prints progress to stderr and the summary table to stdout, and decides the exit status.
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bench import launchers, sysinfo, tracking
from bench.config import BenchConfig
from bench.launchers import TrialInterrupted
from bench.result import ERROR, OK, TIMEOUT, EpochRecord, TrialResult

SKIPPED = "skipped"


@dataclass
class Row:
    label: str
    status: str
    samples_per_s: float | None
    seconds: float
    run_id: str = ""


class Progress:
    """Quiet by default: a line per trial; on a terminal, epochs update that line."""

    def __init__(self, total: int | None, stream: TextIO = sys.stderr) -> None:
        self.total, self.stream = total, stream
        self.tty = stream.isatty()
        self.prefix = ""

    def start(self, index: int, label: str, epochs: int) -> None:
        total = self.total if self.total is not None else "?"
        self.prefix = f"[{index}/{total}] {label}"
        self.epochs = epochs
        self._write(f"{self.prefix} ...", end="" if self.tty else "\n")

    def epoch(self, record: EpochRecord) -> None:
        if self.tty:
            self._write(
                f"\r{self.prefix}  epoch {record.epoch}/{self.epochs}  "
                f"{record.samples_per_s:,.1f} samples/s",
                end="",
            )

    def end(self, row: Row) -> None:
        rate = f"{row.samples_per_s:,.1f} samples/s" if row.samples_per_s else "-"
        line = f"{self.prefix}  {row.status}  {rate}  ({row.seconds:.1f} s)"
        self._write(
            f"\r{line}\x1b[K" if self.tty else f"  -> {row.status}  {rate}  ({row.seconds:.1f} s)"
        )

    def _write(self, text: str, end: str = "\n") -> None:
        self.stream.write(text + end)
        self.stream.flush()


def format_table(rows: list[Row]) -> str:
    header = ("#", "trial", "status", "samples/s", "time_s", "run")
    body = [
        (
            str(i),
            row.label,
            row.status,
            f"{row.samples_per_s:,.1f}" if row.samples_per_s else "-",
            f"{row.seconds:.1f}",
            row.run_id[:8],
        )
        for i, row in enumerate(rows, 1)
    ]
    widths = [max(len(r[c]) for r in (header, *body)) for c in range(len(header))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
        for r in (header, *body)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Sweep:
    def __init__(
        self, cfg: BenchConfig, total: int | None, name: str, overrides: list[str]
    ) -> None:
        self._setup(cfg, total)
        tags = {f"bench.{k}": v for k, v in self.host_env.items()}
        tags["bench.overrides"] = " ".join(overrides)[:4000]
        if total is not None:
            tags["bench.total_trials"] = str(total)
        self.sweep_id = self.store.start_sweep(name, tags)
        if isinstance(self.store, tracking.Spool):
            print(f"bench: results are kept in {self.store.where}", file=sys.stderr)

    @classmethod
    def attach(cls, cfg: BenchConfig, sweep_id: str, total: int | None) -> Sweep:
        """Join a sweep whose parent run another process opened (a Slurm job's side)."""
        sweep = cls.__new__(cls)
        sweep._setup(cfg, total)
        sweep.sweep_id = sweep_id
        return sweep

    def _setup(self, cfg: BenchConfig, total: int | None) -> None:
        self.total = total
        self.store = tracking.open_store(cfg.tracking.uri, cfg.tracking.experiment)
        self.host_env = {
            **sysinfo.git_environment(),
            **sysinfo.gpu_environment(),
            **sysinfo.slurm_environment(),
        }
        self.rows: list[Row] = []
        self.progress = Progress(total)
        self.finished = False
        self.report = cfg.report  # write the comparison report when the sweep ends
        # Set when the trials run in other processes (e.g. Slurm jobs): the summary is then
        # read back from the store, and `configs` maps each job's overrides to its config.
        self.remote = False
        self.configs: dict[tuple[str, ...], BenchConfig] = {}

    def run(
        self, cfg: BenchConfig, label: str, workdir: Path, tags: dict[str, str] | None = None
    ) -> TrialResult | None:
        """Run one trial (``tags``: extra tags for its run) unless an ok run exists."""
        index = len(self.rows) + 1
        self.progress.start(index, label, cfg.epochs)
        started = time.time()
        if not cfg.force:
            done = self.store.find_ok_run(cfg)
            if done is not None:
                row = Row(
                    label,
                    SKIPPED,
                    done["metrics"].get("trial_samples_per_s"),
                    0.0,
                    done["run_id"],
                )
                self._add(row, note=" (an ok run with this config exists; force=true reruns it)")
                tracking.note_reused_run(self.store, self.sweep_id, done["run_id"])
                return None
        tags = {"bench.sweep_index": str(index), **(tags or {})}
        tags.update({f"bench.{k}": v for k, v in sysinfo.slurm_environment().items()})
        run = self.store.start_trial(self.sweep_id, cfg, label, tags)

        def on_epoch(record: EpochRecord) -> None:
            run.log_epoch(record)
            self.progress.epoch(record)

        launcher = launchers.get(cfg.launcher.name)
        try:
            result = launcher.launch(cfg, workdir, on_epoch)
        except TrialInterrupted as stop:
            self._record(run, stop.result, workdir, label, started)
            if stop.result.status == TIMEOUT:  # the scheduler's time limit: a result
                return stop.result
            self.finish(killed=True)
            raise KeyboardInterrupt from stop
        except Exception as exc:  # noqa: BLE001 - a launcher bug must not end the sweep
            result = TrialResult(
                status=ERROR,
                framework=cfg.framework.name,
                model=cfg.model.name,
                mode=cfg.mode,
                error="the launcher failed:\n" + "".join(traceback.format_exception(exc)),
            )
        self._record(run, result, workdir, label, started)
        return result

    def _record(
        self, run: tracking.TrialRun, result: TrialResult, workdir: Path, label: str, started: float
    ) -> None:
        for key, value in self.host_env.items():
            result.environment.setdefault(key, value)
        # A file in a sub-folder (rank1/events.jsonl, nodes/node1/torchrun.log) is logged with
        # its whole top folder, so that the ranks' and nodes' same-named files stay apart.
        tops = dict.fromkeys(Path(name).parts[0] for name in result.files)
        files = [workdir / "worker.log"] + [workdir / top for top in tops]
        run.finish(result, files)
        result.marks["logged"] = time.time()
        run_id = getattr(run, "run_id", "")
        rate = result.summary.get("trial_samples_per_s")
        self._add(Row(label, result.status, rate, time.time() - started, run_id))
        if result.status != OK and result.error:
            last = result.error.strip().splitlines()[-1] if result.error.strip() else ""
            print(f"    {last[:300]}", file=sys.stderr)

    def _add(self, row: Row, note: str = "") -> None:
        self.rows.append(row)
        self.progress.end(row)
        if note:
            print(f"    {note.strip()}", file=sys.stderr)

    def _remote_rows(self) -> list[Row]:
        """Rows for trials that ran elsewhere, read back from the store.  A trial whose
        Slurm job ended before it logged a result is closed with the status Slurm gives."""
        from bench import slurm

        trials = self.store.sweep_trials(self.sweep_id)
        by_job = {t["tags"].get("bench.slurm_job_id", ""): t for t in trials}
        for ended in slurm.ENDED_BY_SLURM:
            status = slurm.status_for(ended.state)
            why = (
                f"Slurm did not accept the job: {ended.error}"
                if ended.state == slurm.NOT_SUBMITTED
                else f"Slurm job {ended.job_id} ended in state {ended.state}: {ended.error}"
            )
            trial = by_job.get(ended.job_id) if ended.job_id else None
            if trial is None:  # it never got as far as opening its run
                cfg = self.configs.get(tuple(ended.overrides))
                if cfg is None:
                    continue
                run = self.store.start_trial(
                    self.sweep_id,
                    cfg,
                    " ".join(ended.overrides),
                    {"bench.slurm_job_id": ended.job_id},
                )
                result = TrialResult(
                    status, cfg.framework.name, cfg.model.name, cfg.mode, error=why
                )
                run.finish(result, [])
                trials.append(
                    {
                        "run_id": getattr(run, "run_id", ""),
                        "name": " ".join(ended.overrides),
                        "status": status,
                        "samples_per_s": None,
                        "seconds": 0.0,
                        "running": False,
                        "tags": {},
                    }
                )
            elif trial["running"]:
                self.store.close_trial(trial["run_id"], status, why)
                trial["status"], trial["running"] = status, False
        for trial in trials:  # any other run its job left open
            if trial["running"]:
                job = trial["tags"].get("bench.slurm_job_id", "")
                state = slurm.job_state(job) if job else ""
                status = slurm.status_for(state) if state else ERROR
                why = (
                    f"the trial's job {job or '?'} ended (state {state or 'unknown'}) "
                    "before it logged a result"
                )
                self.store.close_trial(trial["run_id"], status, why)
                trial["status"] = status
        return [
            Row(t["name"], t["status"], t["samples_per_s"], t["seconds"], t["run_id"])
            for t in trials
        ]

    @property
    def failed(self) -> bool:
        return any(r.status not in (OK, SKIPPED) for r in self.rows)

    def finish(self, killed: bool = False) -> int:
        """End the parent run, print the summary; return the process exit status."""
        if self.finished:
            return 130 if killed else int(self.failed)
        self.finished = True
        if self.remote:
            self.rows = self._remote_rows()
        table = format_table(self.rows)
        self.store.end_sweep(self.sweep_id, ok=not self.failed, killed=killed, summary=table)
        print()
        print(table)
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        tally = ", ".join(f"{n} {status}" for status, n in counts.items())
        print(f"\n{len(self.rows)} trials: {tally}. Results: {self.store.where}")
        reported = killed or not self.report or self._write_report()
        return 130 if killed else int(self.failed or not reported)

    def _write_report(self) -> bool:
        """report=true: the comparison report of this sweep, logged to its parent run."""
        store = self.store
        if not isinstance(store, tracking.MlflowStore) or store.spool is not None:
            print(
                "bench: report=true: no report, some results are in the spool; after "
                "python -m bench.sync, run python -m bench.report",
                file=sys.stderr,
            )
            return False
        from bench.report import report_sweep

        try:
            where = report_sweep(store.uri, self.sweep_id)
        except Exception as exc:  # noqa: BLE001 - the trials are recorded; only the report fails
            print(f"bench: the report could not be written: {exc}", file=sys.stderr)
            return False
        print(f"Report: {where}")
        return True
