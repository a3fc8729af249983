"""The launchers' shared watch loop, without a subprocess: fake children that replay a
recorded ``events.jsonl`` and end (or not) as a test says.  Each launcher records the same
status for the same event: a scheduler's time-limit warning is ``timeout``, Ctrl-C is
``killed``, ``timeout_s`` is ``timeout``, a child that dies without a result is what its
launcher says it is, and the epochs finished before any of these are kept."""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bench.core.config import BenchConfig
from bench.core.result import ERROR, KILLED, OK, OOM, TIMEOUT, EpochRecord, TrialResult
from bench.launchers import base, docker, inline, process
from bench.trial.runtime.protocol import EVENTS, RESULT, write_json_atomic


def record(epoch: int) -> EpochRecord:
    return EpochRecord(epoch, 5, 160, 0.5, 320.0, 100.0, 110.0, 120.0, loss=2.0 - epoch / 10)


class FakeChild(base.Child):
    """Appends one recorded epoch per poll to events.jsonl; ends after ``epochs`` epochs
    (writing result.json when ``writes_result``), or runs until stopped when ``epochs`` is
    None.  ``interrupt`` raises that exception from inside the wait, after the first epoch,
    as a signal handler would."""

    def __init__(
        self,
        workdir: Path,
        epochs: int | None,
        writes_result: bool = True,
        interrupt: BaseException | None = None,
    ) -> None:
        self.workdir, self.epochs, self.writes_result = workdir, epochs, writes_result
        self.interrupt = interrupt
        self.written = 0
        self.stopped: float | None = None
        self.closed = False
        self.launched = 123.0

    def done(self, wait_s: float) -> bool:
        if self.stopped is not None:
            return True
        if self.epochs is not None and self.written >= self.epochs:
            if self.writes_result:
                result = TrialResult(OK, "torch", "lenet5", "train", device="cpu")
                result.epochs = [record(e + 1) for e in range(self.epochs)]
                write_json_atomic(self.workdir / RESULT, result.to_dict())
            return True
        with open(self.workdir / EVENTS, "a") as f:
            f.write(json.dumps(dataclasses.asdict(record(self.written + 1))) + "\n")
        self.written += 1
        if self.interrupt is not None and self.written == 1:
            raise self.interrupt
        time.sleep(min(wait_s, 0.01))
        return False

    def stop(self, grace_s: float) -> None:
        self.stopped = grace_s

    def died(self) -> tuple[str, str]:
        return ERROR, "the fake child ended without a result"

    def close(self) -> None:
        self.closed = True


def watched(launcher_cls: type[base.WatchedLauncher], child: FakeChild) -> base.WatchedLauncher:
    """A real launcher class whose start() hands back ``child`` instead of a process or a
    container: everything else (the loop, the statuses, the result) is the launcher's own."""

    class Faked(launcher_cls):  # type: ignore[valid-type,misc]
        def start(self, cfg: BenchConfig, workdir: Path, environment: dict[str, str]) -> Any:
            environment["where"] = launcher_cls.__module__
            return child

    return Faked()


def cfg(timeout_s: float = 60.0) -> BenchConfig:
    c = BenchConfig(timeout_s=timeout_s)
    c.model.name = "lenet5"
    return c


WATCHED = [process.Launcher, docker.Launcher]


@pytest.mark.parametrize("launcher_cls", WATCHED)
def test_epochs_stream_and_the_result_is_the_childs(
    launcher_cls: type[base.WatchedLauncher], tmp_path: Path
) -> None:
    child = FakeChild(tmp_path, epochs=3)
    seen: list[EpochRecord] = []
    result = watched(launcher_cls, child).launch(cfg(), tmp_path, seen.append)
    assert result.status == OK and [e.epoch for e in seen] == [1, 2, 3]
    assert result.environment["where"] == launcher_cls.__module__
    assert result.marks["launched"] == 123.0 and child.closed and child.stopped is None


@pytest.mark.parametrize("launcher_cls", WATCHED)
def test_timeout_s_stops_the_child_and_keeps_its_epochs(
    launcher_cls: type[base.WatchedLauncher], tmp_path: Path
) -> None:
    child = FakeChild(tmp_path, epochs=None)
    c = cfg(timeout_s=0.3)
    result = watched(launcher_cls, child).launch(c, tmp_path, lambda e: None)
    assert result.status == TIMEOUT and "timeout_s" in result.error
    assert child.stopped == c.launcher.kill_grace_s and child.closed
    assert len(result.epochs) >= 1 and result.environment["where"] == launcher_cls.__module__


@pytest.mark.parametrize("launcher_cls", WATCHED)
@pytest.mark.parametrize(
    ("interrupt", "status"), [(base.TimeLimitReached(), TIMEOUT), (KeyboardInterrupt(), KILLED)]
)
def test_an_interrupt_stops_the_child_with_the_same_status_in_every_launcher(
    launcher_cls: type[base.WatchedLauncher],
    interrupt: BaseException,
    status: str,
    tmp_path: Path,
) -> None:
    """Slurm's warning before the time limit is a timeout under every launcher (the docker
    launcher once recorded it as killed), and Ctrl-C is killed."""
    child = FakeChild(tmp_path, epochs=None, interrupt=interrupt)
    with pytest.raises(base.TrialInterrupted) as stop:
        watched(launcher_cls, child).launch(cfg(), tmp_path, lambda e: None)
    assert stop.value.result.status == status
    assert [e.epoch for e in stop.value.result.epochs] == [1]
    assert child.stopped is not None and child.closed


@pytest.mark.parametrize("launcher_cls", WATCHED)
def test_a_child_without_a_result_is_what_its_launcher_says(
    launcher_cls: type[base.WatchedLauncher], tmp_path: Path
) -> None:
    child = FakeChild(tmp_path, epochs=2, writes_result=False)
    result = watched(launcher_cls, child).launch(cfg(), tmp_path, lambda e: None)
    assert result.status == ERROR and "without a result" in result.error
    assert len(result.epochs) == 2


@pytest.mark.parametrize("launcher_cls", WATCHED)
def test_a_launch_error_is_an_error_result(
    launcher_cls: type[base.WatchedLauncher], tmp_path: Path
) -> None:
    class Refusing(launcher_cls):  # type: ignore[valid-type,misc]
        def start(self, cfg: BenchConfig, workdir: Path, environment: dict[str, str]) -> Any:
            environment["image"] = "x"
            raise base.LaunchError("no engine here")

    result = Refusing().launch(cfg(), tmp_path, lambda e: None)
    assert (result.status, result.error, result.environment) == (
        ERROR,
        "no engine here",
        {"image": "x"},
    )


def test_events_are_read_only_up_to_a_complete_line(tmp_path: Path) -> None:
    from bench.trial.runtime.protocol import EventReader

    path = tmp_path / EVENTS
    reader = EventReader(path)
    assert reader.poll() == []  # no file yet
    line = json.dumps(dataclasses.asdict(record(1)))
    path.write_text(line[:20])
    assert reader.poll() == []
    path.write_text(line + "\n" + line[:7])
    assert [e.epoch for e in reader.poll()] == [1]
    with open(path, "a") as f:
        f.write(line[7:] + "\n")
    assert [e.epoch for e in reader.poll()] == [1] and len(reader.epochs) == 2


@pytest.mark.parametrize(
    ("interrupt", "status"), [(base.TimeLimitReached, TIMEOUT), (KeyboardInterrupt, KILLED)]
)
def test_the_inline_launcher_records_the_same_statuses(
    interrupt: type[BaseException],
    status: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    def trial(c: BenchConfig, on_epoch: Any, workdir: Path, hooks: Any) -> TrialResult:
        on_epoch(record(1))
        raise interrupt

    monkeypatch.setattr(inline, "execute", trial)
    with pytest.raises(base.TrialInterrupted) as stop:
        inline.Launcher().launch(cfg(), tmp_path, lambda e: None)
    assert stop.value.result.status == status and len(stop.value.result.epochs) == 1


def test_the_inline_launcher_times_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def trial(c: BenchConfig, on_epoch: Any, workdir: Path, hooks: Any) -> TrialResult:
        on_epoch(record(1))
        time.sleep(5)
        raise AssertionError("not stopped")

    monkeypatch.setattr(inline, "execute", trial)
    result = inline.Launcher().launch(cfg(timeout_s=0.2), tmp_path, lambda e: None)
    assert result.status == TIMEOUT and len(result.epochs) == 1


def test_the_time_limit_signal_reaches_the_watch_loop(tmp_path: Path) -> None:
    """The real signal path: SIGUSR2 (Slurm's warning) raises TimeLimitReached in the main
    thread while the loop waits, and the trial is recorded as a timeout."""
    previous = signal.getsignal(signal.SIGUSR2)
    base.on_time_limit_warning()
    try:
        child = FakeChild(tmp_path, epochs=None)
        threading.Timer(0.2, lambda: signal.raise_signal(signal.SIGUSR2)).start()
        with pytest.raises(base.TrialInterrupted) as stop:
            watched(process.Launcher, child).launch(cfg(), tmp_path, lambda e: None)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert stop.value.result.status == TIMEOUT


def test_a_process_killed_under_a_memory_cap_is_out_of_memory(tmp_path: Path) -> None:
    c = cfg()
    c.launcher.memory_limit_mb = 300
    assert process.died(-signal.SIGSEGV, c, tmp_path / "log")[0] == OOM
    assert process.died(-signal.SIGTERM, c, tmp_path / "log")[0] == KILLED
    assert process.died(3, c, tmp_path / "log")[0] == ERROR
    (tmp_path / "log").write_text(
        "libgomp: Thread creation failed: Resource temporarily unavailable"
    )
    assert process.died(1, c, tmp_path / "log")[0] == OOM
    c.launcher.memory_limit_mb = 0
    assert process.died(1, c, tmp_path / "log")[0] == ERROR
