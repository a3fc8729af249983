"""Other processes on the trial's CPUs (the host monitor's ``other_cpu_pct`` and tag
``contention``): a trial measured on a shared machine is said to be, in its run and in the
sweep's summary, where its rates would otherwise pass for the framework's own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import tracking
from bench.core.config import BenchConfig, DistributedConfig, ModelConfig
from bench.core.result import OK, TrialResult
from bench.core.strategies.ddp import DDPConfig
from bench.sweep import session
from bench.trial.monitors import Telemetry
from bench.trial.monitors.cpu import _TICK, CpuBusy, CpuMonitor, ProcessTree

STAT = """cpu  900 0 900 5000 0 0 0 0 0 0
cpu0 100 10 200 1000 50 5 5 1 30 0
cpu1 400 0 400 2000 0 0 0 0 0 0
cpu2 7 0 3 1000 0 0 0 0 0 0
intr 12345
"""


def test_busy_time_of_the_trials_cpus_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    # user nice system (idle, iowait left out) irq softirq steal; guest is within user
    assert CpuBusy({0, 2}, stat).read() == pytest.approx((321 + 10) / _TICK)
    assert CpuBusy({1}, stat).read() == pytest.approx(800 / _TICK)


class Clocked:
    """Counters that grow at set rates as the test moves a clock: the machine's busy CPU
    seconds on the trial's CPUs (CpuBusy's read) and the trial's own (ProcessTree's)."""

    def __init__(self) -> None:
        self.now, self.machine_s, self.own_s = 0.0, 0.0, 0.0
        self.cpus: set[int] = {0, 1}

    def advance(self, seconds: float, own: float, machine: float) -> None:
        self.now += seconds
        self.own_s += own * seconds
        self.machine_s += machine * seconds

    def clock(self) -> float:
        return self.now

    def read(self) -> float:
        return self.machine_s

    def tree_read(self) -> tuple[float, float]:  # (CPU s, RSS MiB)
        return self.own_s, 100.0


def monitor_of(fake: Clocked, one_process: bool = True) -> CpuMonitor:
    tree = ProcessTree()
    tree.read = fake.tree_read  # type: ignore[method-assign]
    return CpuMonitor(
        60.0, 0.0, tree=tree, rapl="not here", clock=fake.clock,
        busy=fake, judge_contention=one_process,  # type: ignore[arg-type]
    )  # fmt: skip


def windows(monitor: CpuMonitor, fake: Clocked, rates: list[tuple[float, float]]) -> list[dict]:
    monitor.start()
    out = []
    for own, machine in rates:
        start = fake.now
        fake.advance(2.0, own, machine)
        out.append(monitor.window(start, fake.now, samples=1))
    return out


def test_a_window_shared_with_another_process_is_said_to_be() -> None:
    fake = Clocked()
    monitor = monitor_of(fake)
    # the trial used one core of two; others the second, then 80% of it
    got = windows(monitor, fake, [(1.0, 2.0), (1.0, 1.8)])
    report = monitor.stop(None)
    assert [w["other_cpu_pct"] for w in got] == pytest.approx([100.0, 80.0])
    assert report.summary["trial_other_cpu_pct"] == pytest.approx(90.0)
    assert report.tags["contention"].startswith(
        "other processes used 0.9 of the trial's 2 CPUs in its timed windows, which were 95% busy"
    )


@pytest.mark.parametrize(
    ("rates", "one_process"),
    [
        ([(2.0, 2.2)], True),  # others took little: the trial had the machine
        ([(0.5, 1.2)], True),  # others' 0.7 core while a core stayed idle: not saturated
        ([(1.0, 2.0)], False),  # a distributed trial's ranks are each other's "others"
    ],
    ids=["quiet", "room-to-spare", "distributed"],
)
def test_no_contention_where_the_machine_was_not_shared(
    rates: list[tuple[float, float]], one_process: bool
) -> None:
    fake = Clocked()
    monitor = monitor_of(fake, one_process)
    windows(monitor, fake, rates)
    report = monitor.stop(None)
    assert "contention" not in report.tags
    assert report.summary["trial_other_cpu_pct"] > 0


def test_telemetry_judges_only_one_process_trials() -> None:
    made: list[CpuMonitor] = []

    def host(interval_s: float, origin: float) -> CpuMonitor:
        made.append(CpuMonitor(interval_s, origin, rapl="not here"))
        return made[-1]

    for distributed, contention, judged in [
        (DistributedConfig(), "tag", True),
        (DDPConfig(), "tag", False),
        (DistributedConfig(), "off", False),  # contention=off: measured, never judged
    ]:
        cfg = BenchConfig(device="cpu", distributed=distributed, contention=contention)
        telemetry = Telemetry(cfg, host=host)
        telemetry.start("cpu")
        telemetry.stop(None)
        assert made[-1].judge_contention is judged


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads /proc/stat")
def test_a_busy_process_outside_the_tree_counts_as_others() -> None:
    """The monitor watches a sleeping process; this one spins on one of its CPUs."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        cpu = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {cpu})
        monitor = CpuMonitor(
            0.05, time.perf_counter(), tree=ProcessTree(sleeper.pid), rapl="not here",
            busy=CpuBusy({cpu}),
        )  # fmt: skip
        monitor.start()
        start = time.perf_counter()
        while time.perf_counter() - start < 0.6:
            pass
        figures = monitor.window(start, time.perf_counter(), samples=1)
        report = monitor.stop(None)
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        sleeper.kill()
        sleeper.wait()
    assert figures["cpu_util_pct"] < 10  # the sleeper
    assert figures["other_cpu_pct"] > 60  # this process, on the one CPU watched
    assert "contention" in report.tags  # that CPU was saturated, by someone else


class Shared:
    """A launcher whose trial ends ok, its host monitor having seen others on its CPUs."""

    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: object) -> TrialResult:
        result = TrialResult(OK, cfg.framework.name, cfg.model.name, cfg.mode)
        result.summary.update({"trial_samples_per_s": 50.0, "trial_other_cpu_pct": 95.0})
        result.environment["contention"] = "other processes used 1.0 of the trial's 2 CPUs"
        return result


@pytest.mark.slow
def test_the_sweep_says_which_trials_ran_on_a_shared_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tracking.MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")
    sweep = session.Sweep(store, store.start_sweep("s", {}), 1, launcher=lambda name: Shared())
    cfg = BenchConfig(model=ModelConfig(name="lenet5"), device="cpu")
    rows = [sweep.run(cfg, "trial1", tmp_path / "t1", 1)]
    assert sweep.finish(rows) == 0  # an ok result, said to be shared
    captured = capsys.readouterr()
    assert "other processes used 1.0 of the trial's 2 CPUs" in captured.err  # its line
    assert "Ran beside other processes' CPU load: trial 1 (tag bench.contention, or" in captured.out
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("bench").experiment_id
    (run,) = client.search_runs([experiment], "tags.`bench.sweep_index` = '1'")
    assert run.data.tags["bench.contention"].startswith("other processes used 1.0")
    assert run.data.metrics["trial_other_cpu_pct"] == 95.0
