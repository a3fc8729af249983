"""CPU telemetry: the trial's process tree (psutil) and CPU package energy (RAPL).

A background thread samples, every ``telemetry.interval_s``, the CPU time and resident
memory of the trial's process and all its descendants (data-loader workers included), and
the RAPL package energy counters where they can be read.  Walking the process table for
new descendants is the expensive part, so it is done half a second after sampling starts,
then at doubling intervals up to ``CHILDREN_MAX_S``: data-loader workers start with the
warm-up steps, and a process tree seldom changes later.
Per timed epoch:

- ``cpu_util_pct``: CPU seconds the process tree used in the window / the window's length,
  in percent of one core (as ``top`` shows it: two busy cores read 200).  The cumulative
  CPU time is interpolated at both ends of the window, like the GPU energy counter.
- ``host_rss_mb``: the largest summed resident set size sampled in the window.
- ``other_cpu_pct``: CPU time that processes outside the trial's tree used, in the window,
  on the CPUs the trial may run on (its affinity; ``/proc/stat``'s per-CPU busy time less
  the tree's), in percent of one core.  Where others held at least half a core while those
  CPUs were saturated, over the timed windows on average, the tag ``contention`` says so:
  such a trial's rates are the machine's, shared, not the framework's alone (a process
  launched beside it, another sweep, a test suite); ``trial_other_cpu_pct`` is the mean over
  the windows.  Only a one-process trial is judged (a
  distributed trial's ranks are each other's "others").
- ``cpu_energy_j``, ``cpu_power_w``: the RAPL package counters' difference over the window
  (all packages, wrap-around corrected).  RAPL measures the whole socket, not just the
  trial.  It is read from ``/sys/class/powercap/intel-rapl:N`` (AMD CPUs use the same
  interface), which containers normally do not expose and recent kernels let only root
  read; the tag ``rapl`` says whether it was available and if not, why.
"""

from __future__ import annotations

import csv
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from bench.core import metrics
from bench.trial.monitors.base import Findings, Sampler, Window, epoch_of, inside, interpolate

POWERCAP = Path("/sys/class/powercap")
SAMPLES_FILE = "telemetry_host.csv"
PLOT_FILE = "telemetry_host.png"
CHILDREN_MAX_S = 30.0


class Rapl:
    """The package-level RAPL energy counters, accumulated across wrap-arounds."""

    def __init__(self, domains: list[Path]) -> None:
        self.domains = domains
        self.ranges = [int((d / "max_energy_range_uj").read_text()) for d in domains]
        self.last = [self._raw(d) for d in domains]
        self.total_uj = 0

    @classmethod
    def open(cls, root: Path = POWERCAP) -> Rapl | str:
        """The counters under ``root``, or why they cannot be read."""
        if not root.is_dir():
            return f"no {root} (inside a container, or no RAPL driver)"
        domains = sorted(
            (d for d in root.iterdir() if re.fullmatch(r"intel-rapl:\d+", d.name)),
            key=lambda d: int(d.name.split(":")[1]),
        )
        if not domains:
            return f"no intel-rapl:N package domain under {root}"
        try:
            return cls(domains)
        except OSError as exc:  # typically PermissionError: only root may read energy_uj
            return f"cannot read {exc.filename or root}: {exc.strerror or exc}"
        except ValueError as exc:
            return f"unreadable counter under {root}: {exc}"

    @staticmethod
    def _raw(domain: Path) -> int:
        return int((domain / "energy_uj").read_text())

    def read_j(self) -> float:
        """Package energy in joules since :meth:`open`."""
        for k, domain in enumerate(self.domains):
            raw = self._raw(domain)
            delta = raw - self.last[k]
            if delta < 0:  # the counter wrapped around at max_energy_range_uj
                delta += self.ranges[k] + 1
            self.total_uj += delta
            self.last[k] = raw
        return self.total_uj / 1e6


class ProcessTree:
    """CPU seconds and resident memory of a process and its descendants."""

    def __init__(self, pid: int | None = None) -> None:
        self.root = psutil.Process(pid or os.getpid())
        self.procs: dict[int, psutil.Process] = {self.root.pid: self.root}
        self.cpu_s: dict[int, float] = {}  # last seen, kept for processes that have ended
        self.next_walk = time.monotonic()
        self.walk_every = 0.5

    def read(self) -> tuple[float, float]:
        """(cumulative CPU seconds of every process seen so far, current summed RSS in MiB)."""
        now = time.monotonic()
        if now >= self.next_walk:
            self.next_walk = now + self.walk_every
            self.walk_every = min(2 * self.walk_every, CHILDREN_MAX_S)
            try:
                for child in self.root.children(recursive=True):
                    self.procs.setdefault(child.pid, child)
            except psutil.Error:
                pass
        rss = 0
        for pid, proc in list(self.procs.items()):
            try:
                cpu_s, rss_bytes = _proc_stat(pid) if _PROC else _psutil_stat(proc)
            except (OSError, ValueError, IndexError, psutil.Error):  # it ended
                del self.procs[pid]  # its last CPU time still counts
                continue
            self.cpu_s[pid] = cpu_s
            rss += rss_bytes
        return sum(self.cpu_s.values()), rss / 2**20


_PROC = Path("/proc/self/stat").exists()
_TICK = os.sysconf("SC_CLK_TCK") if _PROC else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if _PROC else 4096


def _proc_stat(pid: int) -> tuple[float, int]:
    """(user + system CPU seconds, RSS bytes) from one read of ``/proc/PID/stat``: a third
    of what psutil's two calls cost, which matters at 10 reads a second."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    # After the command name: state is field 3, utime 14, stime 15, rss (pages) 24.
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[21]) * _PAGE


def _psutil_stat(proc: psutil.Process) -> tuple[float, int]:
    times = proc.cpu_times()
    return times.user + times.system, int(proc.memory_info().rss)


# Others' share that marks a trial as contended (percent of one core, mean over the timed
# windows), when the trial's CPUs were at least SATURATED_PCT busy in all.
CONTENDED_PCT = 50.0
SATURATED_PCT = 90.0


def contended(others_pct: float, own_pct: float, cpus: int) -> bool:
    """Whether other processes shared CPUs the trial could have used: they held at least
    CONTENDED_PCT of a core while the trial's ``cpus`` CPUs were SATURATED_PCT busy in all
    (percent of one core, over one interval).  The tag's rule, and the gate's
    (:mod:`bench.trial.monitors.contention`)."""
    return others_pct >= CONTENDED_PCT and others_pct + own_pct >= SATURATED_PCT * cpus


class CpuBusy:
    """Cumulative busy seconds (user, nice, system, irq, softirq, steal) of some CPUs, from
    ``/proc/stat``'s per-CPU lines: the CPUs this process may run on, by default."""

    def __init__(self, cpus: set[int] | None = None, stat: Path = Path("/proc/stat")) -> None:
        self.cpus = cpus if cpus is not None else set(os.sched_getaffinity(0))
        self.stat = stat

    def read(self) -> float:
        ticks = 0
        for line in self.stat.read_text().splitlines():
            name, _, rest = line.partition(" ")
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in self.cpus:
                fields = [int(x) for x in rest.split()]
                # user nice system idle iowait irq softirq steal (guest is within user)
                ticks += sum(fields[0:3]) + sum(fields[5:8])
        return ticks / _TICK

    @classmethod
    def open(cls) -> CpuBusy | None:
        """The reader for this process's CPUs, or None where there is no /proc/stat."""
        try:
            busy = cls()
            busy.read()
        except (OSError, ValueError, AttributeError):
            return None
        return busy


class CpuMonitor:
    """Samples the process tree and RAPL; see the module docstring."""

    def __init__(
        self,
        interval_s: float,
        origin: float,
        tree: ProcessTree | None = None,
        rapl: Rapl | str | None = None,
        clock: Callable[[], float] = time.perf_counter,
        busy: CpuBusy | None = None,
        judge_contention: bool = True,
    ) -> None:
        self.origin, self.clock = origin, clock
        self.tree = tree or ProcessTree()
        self.rapl = Rapl.open() if rapl is None else rapl
        self.busy = busy if busy is not None else CpuBusy.open()
        self.judge_contention = judge_contention
        self.times: list[float] = []
        self.cpu_s: list[float] = []
        self.busy_s: list[float] = []
        # per timed window: (others' CPU, the trial's CPU), percent of one core
        self.shares: list[tuple[float, float]] = []
        self.rss_mb: list[float] = []
        self.energy_j: list[float] = []
        self.windows: list[Window] = []
        self._sampler = Sampler("bench-telemetry-host", self._read, interval_s)
        self._stopped = False

    def _read(self) -> None:
        before = self.clock()
        cpu, rss = self.tree.read()
        energy = self.rapl.read_j() if isinstance(self.rapl, Rapl) else None
        busy = self.busy.read() if self.busy is not None else None
        now = (before + self.clock()) / 2
        # Append the time last: window() reads len(times) first, then the other lists.
        if busy is not None:
            self.busy_s.append(busy)
        self.cpu_s.append(cpu)
        self.rss_mb.append(rss)
        if energy is not None:
            self.energy_j.append(energy)
        self.times.append(now)

    def start(self) -> None:
        self._sampler.start()
        self._sampler.sample_now()

    def window(self, start: float, end: float, samples: int) -> dict[str, float]:
        self._sampler.sample_now()  # one sample after the window, so its end is bracketed
        self.windows.append(Window(len(self.windows) + 1, start, end))
        n = len(self.times)
        if n == 0:
            return {}
        times = self.times[:n]
        cpu = self.cpu_s[:n]
        seconds = end - start
        out: dict[str, float] = {
            metrics.CPU_UTIL_PCT: 100.0
            * (interpolate(times, cpu, end) - interpolate(times, cpu, start))
            / seconds,
            metrics.HOST_RSS_MB: max(self.rss_mb[i] for i in inside(times, start, end)),
        }
        if self.busy is not None and len(self.busy_s) >= n:
            busy = self.busy_s[:n]
            machine = interpolate(times, busy, end) - interpolate(times, busy, start)
            own = out[metrics.CPU_UTIL_PCT] * seconds / 100.0
            out[metrics.OTHER_CPU_PCT] = max(0.0, 100.0 * (machine - own) / seconds)
            self.shares.append((out[metrics.OTHER_CPU_PCT], out[metrics.CPU_UTIL_PCT]))
        if isinstance(self.rapl, Rapl) and len(self.energy_j) >= n:
            energy = self.energy_j[:n]
            joules = interpolate(times, energy, end) - interpolate(times, energy, start)
            out[metrics.CPU_ENERGY_J] = joules
            out[metrics.CPU_POWER_W] = joules / seconds
        return out

    def stop(self, workdir: Path | None) -> Findings:
        report = Findings()
        if self._stopped:
            return report
        self._stopped = True
        self._sampler.stop()
        report.tags["rapl"] = (
            "available" if isinstance(self.rapl, Rapl) else f"unavailable: {self.rapl}"
        )
        if self._sampler.error:
            report.tags["host_telemetry"] = f"sampling stopped early: {self._sampler.error}"
        if self.shares:
            others = sum(o for o, _ in self.shares) / len(self.shares)
            report.summary[metrics.TRIAL_OTHER_CPU_PCT] = others
            contended = self._contention(others)
            if contended:
                report.tags["contention"] = contended
        if workdir is not None and self.times:
            self._write_csv(workdir / SAMPLES_FILE)
            self._plot(workdir / PLOT_FILE)
            report.files += [SAMPLES_FILE, PLOT_FILE]
        return report

    def _contention(self, others: float) -> str:
        """What the tag ``contention`` says ('' when the windows were not contended)."""
        if not self.judge_contention or self.busy is None:
            return ""
        cpus = len(self.busy.cpus)
        own = sum(own for _, own in self.shares) / len(self.shares)
        if not contended(others, own, cpus):
            return ""
        used = others + own
        return (
            f"other processes used {others / 100:.1f} of the trial's {cpus} CPUs in its timed "
            f"windows, which were {min(100.0, used / cpus):.0f}% busy: its rates were measured "
            "on a shared machine"
        )

    def _write_csv(self, path: Path) -> None:
        rapl = isinstance(self.rapl, Rapl)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                ["time_s", "epoch", "cpu_time_s", "rss_mb"] + (["cpu_energy_j"] if rapl else [])
            )
            for k, t in enumerate(self.times):
                row = [f"{t - self.origin:.4f}", epoch_of(t, self.windows)]
                row += [f"{self.cpu_s[k]:.3f}", f"{self.rss_mb[k]:.1f}"]
                if rapl:
                    row.append(f"{self.energy_j[k]:.3f}")
                writer.writerow(row)

    def _plot(self, path: Path) -> None:
        from bench.trial.monitors.plot import Line, Panel, plot

        t = [x - self.origin for x in self.times]
        util = [(x, 100.0 * y) for x, y in rates(t, self.cpu_s, self._sampler.interval_s / 2)]
        panels = [
            Panel("CPU (% of a core)", [Line("process tree", util)] if util else []),
            Panel(
                "resident memory (MiB)",
                [Line("process tree", list(zip(t, self.rss_mb, strict=True)))],
            ),
        ]
        if isinstance(self.rapl, Rapl):
            power = rates(t, self.energy_j, self._sampler.interval_s / 2)
            panels.append(Panel("CPU package power (W)", [Line("RAPL", power)]))
        plot(path, "Host telemetry", [p for p in panels if p.lines], self.windows, self.origin)


def rates(times: list[float], totals: list[float], min_dt: float) -> list[tuple[float, float]]:
    """The rate of a cumulative counter between samples at least ``min_dt`` apart (the extra
    samples taken at window ends can be very close to a regular one)."""
    out: list[tuple[float, float]] = []
    anchor = 0
    for k in range(1, len(times)):
        dt = times[k] - times[anchor]
        if dt >= min_dt:
            out.append((times[k], (totals[k] - totals[anchor]) / dt))
            anchor = k
    return out
