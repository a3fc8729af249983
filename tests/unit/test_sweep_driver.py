"""A sweep without a subprocess: bench's sweeper logic (:func:`run_sweep`) and its jobs
(:func:`run_job`) on the real config tree, with a fake store and a fake launcher that
replays recorded epochs.  What a user sees at the CLI (exit status, refusals before any
run, the summary, skips, Ctrl-C) is decided here; the e2e tests run it for real."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus

from bench.cli import CONF_DIR
from bench.core.config import BenchConfig
from bench.core.identity import config_hash
from bench.core.result import KILLED, OK, OOM, EpochRecord, TrialResult
from bench.launchers.base import TrialInterrupted
from bench.sweep import driver, session
from bench.sweep.jobs import SweepRef


class FakeRun:
    def __init__(self, store: FakeStore, run_id: str, parent: str, cfg: BenchConfig) -> None:
        self.store, self.run_id, self.parent, self.cfg = store, run_id, parent, cfg
        self.epochs: list[EpochRecord] = []
        self.result: TrialResult | None = None

    def log_epoch(self, record: EpochRecord) -> None:
        self.epochs.append(record)

    def finish(self, result: TrialResult, files: list[Path]) -> None:
        self.result = result


class FakeStore:
    """The store protocol in memory: parent runs, trial runs, ok runs by config hash."""

    uri, where = "fake://", "fake store"

    def __init__(self) -> None:
        self.sweeps: dict[str, dict[str, Any]] = {}
        self.trials: list[FakeRun] = []
        self.ok: dict[str, str] = {}
        self.busy: dict[str, tuple[str, int]] = {}  # config hash -> (owner, looks left)
        self.rounds: dict[int, float] = {}  # the drift check's reference step per round
        self.parity: dict[str, str] = {}  # parity=true: each group's verdict ("": the sweep's)

    def note_parity(self, sweep_id: str, group: str, text: str, verdict: str) -> None:
        self.parity[group] = verdict

    def spooled_to(self) -> Path | None:
        return None

    def note_reused_run(self, sweep_id: str, run_id: str) -> None:
        pass

    def note_round(self, sweep_id: str, round_: int, reference_s: float) -> None:
        self.rounds[round_] = reference_s

    def start_sweep(self, name: str, tags: dict[str, str]) -> str:
        sweep_id = f"sweep{len(self.sweeps)}"
        self.sweeps[sweep_id] = {"name": name, "tags": tags, "ended": None}
        return sweep_id

    def end_sweep(self, sweep_id: str, ok: bool, killed: bool, summary: str) -> None:
        self.sweeps[sweep_id]["ended"] = (ok, killed, summary)

    def find_ok_run(self, cfg: BenchConfig) -> dict[str, Any] | None:
        run_id = self.ok.get(config_hash(cfg))
        return {"run_id": run_id, "metrics": {"trial_samples_per_s": 1.0}} if run_id else None

    def running_elsewhere(self, cfg: BenchConfig) -> str:
        """Another process's run of the config: its owner for the next ``busy`` looks."""
        owner, left = self.busy.get(config_hash(cfg), ("", 0))
        if left <= 0:
            return ""
        self.busy[config_hash(cfg)] = (owner, left - 1)
        if left == 1:  # it ends ok: the waiting sweep reuses its run
            self.ok[config_hash(cfg)] = "elsewhere"
        return owner

    def start_trial(self, sweep_id: str, cfg: BenchConfig, name: str, tags: dict[str, str]) -> Any:
        run = FakeRun(self, f"run{len(self.trials)}", sweep_id, cfg)
        self.trials.append(run)
        return run

    def sweep_trials(self, sweep_id: str) -> list[dict[str, Any]]:
        return []

    def close_trial(self, run_id: str, status: str, error: str) -> None:
        pass

    def reap_orphans(self) -> int:
        return 0


class ReplayLauncher:
    """Replays two recorded epochs; batch_size 512 runs out of memory; ``stop_at`` raises
    Ctrl-C in that trial after its first epoch."""

    stop_at: int | None = None
    launched: list[BenchConfig] = []

    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: Any) -> TrialResult:
        type(self).launched.append(cfg)
        first = EpochRecord(1, 2, 8, 0.1, 80.0, 50.0, 50.0, 50.0, loss=2.3)
        on_epoch(first)
        if self.stop_at == len(self.launched):
            stopped = TrialResult(KILLED, cfg.framework.name, cfg.model.name, cfg.mode)
            stopped.epochs = [first]
            raise TrialInterrupted(stopped)
        if cfg.batch_size == 512:
            return TrialResult(OOM, cfg.framework.name, cfg.model.name, cfg.mode, error="OOM")
        second = dataclasses.replace(first, epoch=2)
        on_epoch(second)
        result = TrialResult(OK, cfg.framework.name, cfg.model.name, cfg.mode)
        result.epochs = [first, second]
        result.summary["trial_samples_per_s"] = 80.0
        return result


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> FakeStore:
    fake = FakeStore()
    monkeypatch.setattr(session, "host_environment", lambda: {"git_commit": "abc"})
    ReplayLauncher.launched, ReplayLauncher.stop_at = [], None
    return fake


@pytest.fixture
def hydra_conf() -> Iterator[None]:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        yield


def sweep(
    store: FakeStore,
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    batch: int | None = None,
    dry_run: bool = False,
) -> tuple[int, list[list[str]]]:
    """Run ``-m ARGS`` through the sweeper's logic with ``store`` and the replaying launcher
    passed in (one context for the sweep, as bench's sweeper makes it); jobs run in this
    process, each in the environment the sweeper gives it and with the sweep's context.
    Returns the exit status and the launched batches."""
    opened: list[str] = []

    def open_store(uri: str, experiment: str) -> FakeStore:
        opened.append(uri)
        return store

    context = session.SweepContext(open_store, lambda name: ReplayLauncher())
    # The sweep's own config (Hydra composes it without the swept values: repeats, launcher).
    fixed = [a for a in args if "," not in a and "${" not in a and not a.startswith("+")]
    config = compose("config", overrides=fixed, return_hydra_config=True)
    launched: list[list[str]] = []

    def compose_job(overrides: list[str]) -> Any:
        return compose("config", overrides=overrides)

    def launch(jobs: list[list[str]], start: int) -> list[JobReturn]:
        out = []
        for n, job in enumerate(jobs, start):
            launched.append(job)
            ref = SweepRef.from_overrides(job)
            assert ref is not None
            task = [o for o in job if not o.startswith("++hydra.")]
            for key, value in zip(
                (session_env := ("BENCH_SWEEP_RUN", "BENCH_SWEEP_TOTAL", "BENCH_SWEEP_VARYING")),
                (ref.sweep_id, str(ref.total), "+".join(ref.varying)),
                strict=True,
            ):
                monkeypatch.setenv(key, value)
            row = driver.run_job(compose_job(task), task, tmp_path / str(n), n + 1, context)
            for key in session_env:
                monkeypatch.delenv(key)
            out.append(JobReturn(overrides=job, status=JobStatus.COMPLETED, _return_value=row))
        return out

    parsed = OverridesParser.create().parse_overrides(args)
    code = driver.run_sweep(config, compose_job, launch, parsed, context, batch, dry_run=dry_run)
    assert len(opened) <= 1  # one store per sweep, shared by its jobs
    return code, launched


TINY = ["model=lenet5", "epochs=2", "steps_per_epoch=2", "warmup_steps=1", "batch_size=4"]


def test_a_sweep_runs_every_job_once_under_one_parent(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, launched = sweep(store, ["framework=torch,tf", *TINY], tmp_path, monkeypatch)
    assert code == 0 and len(launched) == 2
    (sweep_id,) = store.sweeps
    assert store.sweeps[sweep_id]["ended"][:2] == (True, False)
    assert [t.parent for t in store.trials] == [sweep_id, sweep_id]
    assert [t.cfg.framework.name for t in store.trials] == ["torch", "tf"]
    assert all(len(t.epochs) == 2 and t.result and t.result.status == OK for t in store.trials)
    out = capsys.readouterr()
    assert "2 trials: 2 ok" in out.out and "framework=tf model=lenet5" in out.out
    assert "[2/2] framework=tf model=lenet5" in out.err


def test_a_failed_trial_is_a_row_and_the_exit_status_is_1(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    args = ["framework=torch", *TINY[:-1], "batch_size=2,512"]
    code, _ = sweep(store, args, tmp_path, monkeypatch)
    assert code == 1
    assert [t.result.status for t in store.trials if t.result] == [OK, OOM]
    assert store.sweeps["sweep0"]["ended"][:2] == (False, False)
    assert "1 ok, 1 oom" in capsys.readouterr().out


def test_bad_input_in_any_job_stops_the_sweep_before_any_run(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, launched = sweep(
        store, ["framework=torch", *TINY[:-1], "batch_size=4,0"], tmp_path, monkeypatch
    )
    assert (code, launched, store.sweeps) == (2, [], {})
    assert "batch_size: must be >= 1, got 0" in capsys.readouterr().err


def test_an_unresolvable_value_in_one_job_stops_the_sweep(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Once a warning from a Hydra callback: the sweep then ran unvalidated and crashed on
    its second job, leaving its parent run RUNNING."""
    monkeypatch.delenv("BENCH_NOPE_X", raising=False)
    args = ["framework=torch", *TINY[:-1], "batch_size=4,${oc.env:BENCH_NOPE_X}"]
    code, launched = sweep(store, args, tmp_path, monkeypatch, batch=1)
    assert (code, launched, store.sweeps) == (2, [], {})
    assert "batch_size: " in capsys.readouterr().err


def test_a_rerun_skips_configs_with_an_ok_run(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    sweep(store, ["framework=torch,tf", *TINY], tmp_path, monkeypatch)
    store.ok = {config_hash(t.cfg): t.run_id for t in store.trials}
    ReplayLauncher.launched = []
    code, _ = sweep(store, ["framework=torch,tf", *TINY], tmp_path, monkeypatch)
    assert code == 0 and ReplayLauncher.launched == []
    assert "2 trials: 2 skipped" in capsys.readouterr().out


def test_a_configuration_running_in_another_sweep_is_waited_for_then_reused(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 29, finding 7: two identical sweeps started together ran every configuration
    twice, side by side, and the report counted the contended runs as repeats."""
    monkeypatch.setattr(session, "OWNER_POLL_S", 0.01)
    sweep(store, ["framework=torch", *TINY], tmp_path, monkeypatch)  # learns the config's hash
    (first,) = store.trials
    store.trials.clear()
    store.busy[config_hash(first.cfg)] = ("otherhost/4242/1.00", 3)
    ReplayLauncher.launched = []
    code, _ = sweep(store, ["framework=torch", *TINY], tmp_path, monkeypatch)
    assert code == 0 and ReplayLauncher.launched == [] and store.trials == []
    out = capsys.readouterr()
    assert "is running in another bench process (pid 4242 on otherhost); waiting" in out.err
    assert "1 trial: 1 skipped" in out.out


def test_ctrl_c_records_the_trial_as_killed_and_ends_the_sweep(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    ReplayLauncher.stop_at = 2
    code, launched = sweep(
        store, ["framework=torch,tf,torch", *TINY[:-1], "batch_size=4,8"], tmp_path, monkeypatch
    )
    assert code == 130 and len(launched) == 2  # nothing after the stopped trial
    assert [t.result.status for t in store.trials if t.result] == [OK, KILLED]
    assert store.sweeps["sweep0"]["ended"][:2] == (False, True)
    assert "1 ok, 1 killed" in capsys.readouterr().out


def test_an_interrupt_python_swallows_while_the_store_is_made_still_stops_the_sweep(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51: Ctrl-C arriving while a finaliser ran during store creation was raised
    inside it, where Python swallows it ("Exception ignored in ..."): every trial ran and
    the sweep ended 0.  bench's handler counts each interrupt, and the sweep looks."""
    import signal
    import sys

    from bench import cli

    class Finaliser:
        def __del__(self) -> None:  # the garbage collector closing a connection, say
            cli._interrupt(signal.SIGINT, None)

    start_sweep = store.start_sweep

    def start_with_a_finaliser(name: str, tags: dict[str, str]) -> str:
        Finaliser()  # collected at once: the handler's KeyboardInterrupt is swallowed
        return start_sweep(name, tags)

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)  # Python's print
    monkeypatch.setattr(store, "start_sweep", start_with_a_finaliser)
    try:
        code, launched = sweep(store, ["framework=torch,tf", *TINY], tmp_path, monkeypatch)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert (code, launched) == (130, [])
    assert store.sweeps["sweep0"]["ended"][1] is True  # closed as killed, no trial run


def test_repeats_launch_in_batches_with_the_sweeps_reference(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, launched = sweep(
        store, ["framework=torch,tf", *TINY, "repeats=3"], tmp_path, monkeypatch, batch=4
    )
    assert code == 0 and len(launched) == 6
    assert [job[0] for job in launched] == ["repeat=0"] * 2 + ["repeat=1"] * 2 + ["repeat=2"] * 2
    refs = {SweepRef.from_overrides(job) for job in launched}
    assert refs == {SweepRef("sweep0", 6, ("repeat", "framework"))}
    assert len({config_hash(t.cfg) for t in store.trials}) == 6  # repeat is hashed
    assert sorted(store.rounds) == [0, 1, 2] and all(t > 0 for t in store.rounds.values())


def test_an_unknown_key_added_with_plus_is_refused(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, launched = sweep(store, ["framework=torch", *TINY, "+batchsize=4"], tmp_path, monkeypatch)
    assert (code, launched, store.sweeps) == (2, [], {})
    assert "batchsize: no such key; did you mean batch_size?" in capsys.readouterr().err


def test_a_store_that_fails_is_exit_1_not_bad_input(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    def refuse(name: str, tags: dict[str, str]) -> str:
        raise RuntimeError("the store refused")

    monkeypatch.setattr(store, "start_sweep", refuse)
    code, launched = sweep(store, ["framework=torch", *TINY], tmp_path, monkeypatch)
    assert (code, launched) == (1, [])
    err = capsys.readouterr().err
    assert "cannot be written (the store refused); no trial was started" in err
    assert "Traceback" not in err


def test_cells_this_machine_cannot_run_are_listed_not_refused(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from bench.checks.device import host_gpus

    if host_gpus()[0]:
        pytest.skip("this host has a GPU: the cuda cell runs")
    args = ["framework=torch", "device=cpu,cuda", *TINY]
    code, launched = sweep(store, args, tmp_path, monkeypatch)
    assert code == 2 and not launched  # refused as bad input without skip_unavailable
    assert "device=cuda" in capsys.readouterr().err
    code, launched = sweep(store, [*args, "skip_unavailable=true"], tmp_path, monkeypatch)
    assert code == 0 and len(launched) == 1 and "device=cpu" in launched[0]
    out = capsys.readouterr()
    assert "1 cell(s) of the matrix cannot run on this machine" in out.err
    assert "Not run on this machine (1 cells of the matrix):" in out.out
    assert "framework=torch model=lenet5 device=cuda: needs a GPU" in out.out
    args = ["framework=torch", "device=cuda", "skip_unavailable=true", *TINY]
    code, launched = sweep(store, args, tmp_path, monkeypatch)
    assert code == 2 and not launched
    assert "no trial this machine can run" in capsys.readouterr().err


def test_a_dry_run_checks_every_job_and_runs_none(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, launched = sweep(
        store, ["framework=torch,tf", *TINY], tmp_path, monkeypatch, dry_run=True
    )
    assert (code, launched, store.sweeps, store.trials) == (0, [], {}, [])
    out = capsys.readouterr().out.splitlines()
    assert out[2:4] == ["1  framework=torch model=lenet5", "2  framework=tf model=lenet5"]
    assert out[-1].startswith("2 trials would run")
    code, _ = sweep(
        store,
        ["framework=torch", *TINY[:-1], "batch_size=4,0"],
        tmp_path,
        monkeypatch,
        dry_run=True,
    )
    assert code == 2 and "batch_size: must be >= 1, got 0" in capsys.readouterr().err


def test_a_dry_run_of_an_auto_sweep_lists_every_round_as_a_maximum(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    args = ["framework=torch,tf", "repeats=auto", "max_repeats=3", *TINY]
    code, launched = sweep(store, args, tmp_path, monkeypatch, dry_run=True)
    assert (code, launched) == (0, [])
    out = capsys.readouterr().out.splitlines()
    assert sum("repeat=2" in line for line in out) == 2  # the last possible round is listed
    assert out[-1].startswith(
        "at most 6 trials would run (repeats=auto, a dry run: every check passed"
    )
    assert out[-1].endswith(
        "the first two rounds (4 trials) always run; each later round runs only the "
        "configurations with a comparison still open"
    )


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [True, False])
def test_composing_a_long_sweep_shows_its_progress_and_a_short_one_says_nothing(
    tty: bool,
) -> None:
    from bench.sweep.compose import compose_all

    now = [0.0]

    def compose(job: list[str]) -> Any:
        now[0] += 0.4  # a study's job: Hydra takes 0.1-0.3 s
        return compose_fixed(job)

    # Hydra composes once per set of group choices: five models, five compositions.
    models = ("lenet5", "resnet18", "vgg16", "alexnet", "mobilenet_v2")
    jobs = [[f"model={m}", "batch_size=4"] for m in models]
    slow = Stream(tty)
    counting = session.Counting("composing:", slow, clock=lambda: now[0], report_s=1.5)
    assert len(compose_all(compose, jobs, counting)) == 5
    counting.close()
    if tty:  # counts once a second has gone, with what is left, then a closing line
        assert slow.getvalue() == (
            "\rbench: composing: 3/5, about 1 s left\x1b[K"
            "\rbench: composing: 4/5, about 0 s left\x1b[K"
            "\rbench: composing: 5/5\x1b[K\rbench: composing: 5/5 in 2 s\x1b[K\n"
        )
    else:  # a log file gets the closing line (and a line every 10 s: none here)
        assert slow.getvalue() == "bench: composing: 5/5 in 2 s\n"
    now[0] = 0.0
    quick = Stream(tty)
    counting = session.Counting("composing:", quick, clock=lambda: now[0], report_s=5)
    compose_all(compose, jobs[:2], counting)
    counting.close()
    assert quick.getvalue() == ""


def compose_fixed(job: list[str]) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=job)


def test_hydra_composes_once_per_set_of_group_choices_and_each_job_gets_its_own_values() -> None:
    from bench.sweep.compose import compose_all
    from bench.sweep.jobs import expand

    parser = OverridesParser.create()
    calls: list[list[str]] = []

    def compose(job: list[str]) -> Any:
        calls.append(job)
        return compose_fixed(job)

    jobs = expand(parser.parse_overrides(["model=lenet5", "batch_size=2,4"]), repeats=3)
    composed = compose_all(compose, jobs)
    assert len(jobs) == 6 and calls == [["model=lenet5"]]  # plain values applied to copies
    by_job = {tuple(job): cfg for _, job, cfg in composed}
    for job, cfg in by_job.items():
        assert cfg.repeat == int(job[0].removeprefix("repeat="))
        assert cfg.batch_size == int(dict(o.split("=") for o in job)["batch_size"])
    assert len({id(cfg) for cfg in by_job.values()}) == 6  # copies, not one shared object
    assert len({id(cfg.model) for cfg in by_job.values()}) == 6
    # A value that follows the repeat: the interpolation resolves with each job's own.
    calls.clear()
    jobs = expand(parser.parse_overrides(["model=lenet5", "seed=${repeat}"]), repeats=3)
    composed = compose_all(compose, jobs)
    assert len(calls) == 1
    assert sorted((cfg.repeat, cfg.seed) for _, _, cfg in composed) == [(0, 0), (1, 1), (2, 2)]


def test_a_long_composition_logs_its_progress_with_an_estimate_where_no_terminal_shows_it() -> None:
    now = [0.0]
    log = Stream(False)
    counting = session.Counting("composing:", log, clock=lambda: now[0])
    for done in range(100):
        counting(done, 100)
        now[0] += 0.25  # 25 s in all: a line at 10 s and at 20 s, then the closing line
    counting(100, 100)
    counting.close()
    assert log.getvalue().splitlines() == [
        "bench: composing: 40/100, about 15 s left",
        "bench: composing: 80/100, about 5 s left",
        "bench: composing: 100/100 in 25 s",
    ]


def test_a_sweeps_context_opens_its_store_once_and_travels_without_it() -> None:
    """One store per sweep: the sweeper and the jobs it runs in this process share the one
    its context opened; a job sent elsewhere (pickled with the task function, as submitit
    sends it) gets the context without the open store and opens its own."""
    import functools
    import pickle

    from bench import tracking
    from bench.cli import task

    opened: list[str] = []

    def open_store(uri: str, experiment: str) -> FakeStore:
        opened.append(uri)
        return FakeStore()

    context = session.SweepContext(open_store, lambda name: ReplayLauncher())
    cfg = BenchConfig()
    first = context.store_of(cfg)
    assert context.store_of(cfg) is first and opened == [cfg.tracking.uri]
    sent = session.SweepContext(store=FakeStore())  # the defaults: picklable by reference
    job = pickle.loads(pickle.dumps(functools.partial(task, context=sent)))
    assert job.func is task and job.keywords["context"].store is None
    assert job.keywords["context"].open_store is tracking.open_store


def test_the_summary_names_a_models_source_where_it_is_not_the_zoos(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 32: model=hf model.name=llama is hf:llama, the zoo's mobilenet_v2 and its stock
    twin are two rows with two names, in the progress lines and the summary table."""
    from bench.checks import own_models

    # No child process to build it: the probe that check() asks, and warm()'s ahead of it.
    monkeypatch.setattr(own_models, "_probe", lambda *request: {})
    run = ["epochs=2", "steps_per_epoch=2", "warmup_steps=1", "batch_size=4"]
    code, launched = sweep(
        store, ["framework=torch", "model=hf,lenet5", *run], tmp_path, monkeypatch
    )
    assert code == 0 and len(launched) == 2
    out = capsys.readouterr()
    rows = [line.split()[1:4] for line in out.out.splitlines() if " framework=" in line]
    assert rows == [["framework=torch", "model=hf:llama", "ok"],
                    ["framework=torch", "model=lenet5", "ok"]]  # fmt: skip
    assert "[1/2] framework=torch model=hf:llama ..." in out.err  # its progress line
    args = ["framework=tf", "model=mobilenet_v2", "model.source=bench,stock", *run]
    code, launched = sweep(store, args, tmp_path, monkeypatch)
    assert code == 0 and len(launched) == 2
    out = capsys.readouterr()
    rows = [line.split()[1:4] for line in out.out.splitlines() if " framework=" in line]
    assert rows == [["framework=tf", "model=mobilenet_v2", "ok"],
                    ["framework=tf", "model=stock:mobilenet_v2", "ok"]]  # fmt: skip


def test_parity_true_with_model_hf_runs_the_lm_logit_check_before_the_first_trial(
    store: FakeStore, hydra_conf: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32: an hf family under torch and tf gets one LM logit check, before any trial,
    and every trial of it the verdict."""
    from bench.checks import own_models
    from bench.sweep import parity

    checked: list[parity.Group] = []

    def lm_check(group: parity.Group) -> tuple[str, str]:
        checked.append(group)
        assert ReplayLauncher.launched == []  # before the first trial
        return parity.FAILED, "llama: FAILED: ..."

    monkeypatch.setattr(own_models, "_probe", lambda *request: {})  # check()'s and warm()'s
    monkeypatch.setattr(parity, "lm_check", lm_check)
    args = ["framework=torch,tf", "model=hf", "parity=true", "mode=train,generate",
            "prompt_len=8", "new_tokens=4", "epochs=2", "steps_per_epoch=2", "warmup_steps=1",
            "batch_size=4"]  # fmt: skip
    code, launched = sweep(store, args, tmp_path, monkeypatch)
    assert code == 0 and len(launched) == 4 and len(checked) == 1
    assert checked[0].model == "llama" and dict(checked[0].lm)["hidden_size"] == "256"
    assert store.parity == {checked[0].name: "failed", "": "failed"}
    assert all("++hydra.job.env_set.BENCH_PARITY=failed" in job for job in launched)
