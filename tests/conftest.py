"""Shared helpers: run the real CLI in a temporary directory against a real MLflow store."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
# pytest caches each test module as it rewrites its asserts (a .pyc in the module's
# __pycache__, which git ignores) unless bytecode writing is off, as PYTHONDONTWRITEBYTECODE
# turns it off on machines like CI's: then every worker of every run rewrites all ~280 test
# modules again, about 5 s of CPU a worker.  On for this process only (children keep the
# variable); bench's own sources are compiled by scripts/setup.sh.
sys.dont_write_bytecode = False


# JAX's persistent compilation cache, for this suite's processes and the trials they start
# (an environment variable, so children inherit it): the suite compiles the same XLA programs
# many times over (lenet5's and ResNet-18's steps in the parity checks, the trials and the
# units), seconds to a minute each on 2 cores, and a cached program is the same program.
# bench itself keeps no such cache: a trial's compilation is part of what it measures.
def _jax_cache() -> str:
    from bench.core.paths import cache_dir

    return str(cache_dir() / "jax-tests")


os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _jax_cache())
# The store the suite's sweeps used last is noted in a file of the suite's own (bench's cache
# keeps the user's: `bench ui` and `bench reproduce` read it), one for each test process.
if "BENCH_LAST_STORE" not in os.environ:
    _NOTE = Path(tempfile.gettempdir()) / f"bench-tests-last-store-{os.getpid()}"
    os.environ["BENCH_LAST_STORE"] = str(_NOTE)
    atexit.register(_NOTE.unlink, missing_ok=True)

# The suite's trials are timed beside its other pytest worker, so on CI's 2 cores nearly every
# one is "contended": contention=wait (bench's default) would make each of ~300 trials wait up
# to bench.trial.monitors.contention.MAX_WAIT_S for a load that lasts as long as the suite.
# Here, in this one place (an environment variable, so the sweeps' and trials' processes
# inherit it), the default is tag; the wait path is tested with replayed readings
# (tests/unit/test_contention_gate.py) and one e2e trial that asks for contention=wait.
os.environ.setdefault("BENCH_CONTENTION", "tag")

# The config tables run bench's CLI in this process hundreds of times: Hydra's composition
# steps are remembered by what they depend on, the conf files' stamps included (issue 54;
# tests/hydra_memo.py says what and why it changes no case's outcome).
from tests import hydra_memo  # noqa: E402

hydra_memo.install()

# Small enough for 2 CPU cores; every e2e trial uses these unless a test overrides them.
TINY = ["batch_size=4", "epochs=2", "steps_per_epoch=2", "warmup_steps=1"]


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    db: Path

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Bench:
    """Runs ``python -m bench`` with its store and Hydra outputs under one temporary dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "mlflow.db"
        self.uri = f"sqlite:///{self.db}"

    def args(self, *overrides: str) -> list[str]:
        extra = (
            []
            if any(o.startswith("tracking.uri=") for o in overrides)
            else [f"tracking.uri={self.uri}"]
        )
        if not any(o.startswith("hydra.") for o in overrides):
            extra += [f"hydra.run.dir={self.root}/outputs", f"hydra.sweep.dir={self.root}/multirun"]
        return [sys.executable, "-m", "bench", *overrides, *extra]

    @property
    def env(self) -> dict[str, str]:
        """The environment of bench under test: its per-user state (the spool) in root."""
        return dict(os.environ, PYTHONPATH=str(REPO), BENCH_STATE_DIR=str(self.state))

    @property
    def state(self) -> Path:
        return self.root / "state"

    def spooled(self) -> list[Path]:
        return sorted((self.state / "spool").glob("*/*.json"))

    def run(self, *overrides: str, timeout: float = 600) -> CliRun:
        proc = subprocess.run(
            self.args(*overrides),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )
        return CliRun(proc.returncode, proc.stdout, proc.stderr, self.db)

    def popen(self, *overrides: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.args(*overrides),
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            preexec_fn=_interruptible,
        )

    def runs(self, experiment: str = "bench") -> list[Any]:
        """All runs of ``experiment``, parents and children."""
        client = self.client()
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            return []
        return list(client.search_runs([exp.experiment_id], max_results=1000))

    def client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def children(self, experiment: str = "bench") -> list[Any]:
        return [r for r in self.runs(experiment) if "mlflow.parentRunId" in r.data.tags]

    def parents(self, experiment: str = "bench") -> list[Any]:
        return [r for r in self.runs(experiment) if r.data.tags.get("bench.sweep") == "true"]


def _interruptible() -> None:
    """The CLI under test gets Ctrl-C's default disposition, as it does at a terminal: a suite
    started in the background (``cmd &`` in a script) inherits SIGINT ignored, and Python then
    never raises KeyboardInterrupt, so the Ctrl-C tests would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return Bench(tmp_path)


# Tests that share one outside resource run one after another in one pytest-xdist worker
# (``--dist loadgroup``); every other test may run beside any of them.  Each e2e test
# scopes what it checks (processes, containers, runs) to its own folder, so two at once
# do not see each other's trials.
SHARED = {
    "test_docker.py": "docker",  # builds bench's images, then runs containers of them
    "test_slurm.py": "slurm",  # the one-node cluster: two sweeps would queue on it
    "test_version_sweeps.py": "versions",  # builds framework versions' environments
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first and the many short ones after them, so that the two workers
    end together (the short ones fill the gaps): the e2e tier, then the slow units, then the
    fast tier, each in its own order.  Horovod's tests run last: scripts/test.sh builds
    Horovod in the background while the rest of the suite runs (the build is ~13 minutes of
    compiling on a cold cache)."""
    rank = {"e2e": 0, "slow": 1, "fast": 2}
    items.sort(
        key=lambda item: (
            item.get_closest_marker("horovod") is not None,
            rank[_tier(item.keywords)],
        )
    )
    for item in items:
        group = SHARED.get(item.path.name)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Stops the run when ``--dist loadgroup`` would not keep the groups together: a
    pytest-xdist that cannot mark them (xdist 3.8 under pytest 9.2, pytest-xdist#1386)
    sends the Docker and Slurm tests to both workers at once without a word."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [
        nodeid
        for nodeid in ids
        if Path(nodeid.split("::")[0]).name in SHARED and "@" not in nodeid.rsplit("]", 1)[-1]
    ]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup: pytest-xdist did not group {len(lost)} tests (e.g. {lost[0]});"
            " install the pinned pytest and pytest-xdist: bash scripts/setup.sh"
        )


@pytest.fixture(scope="session")
def horovod_ready() -> None:
    """Waits for the background Horovod build that scripts/test.sh started (its folder is in
    BENCH_HOROVOD_BUILD), then requires Horovod to be importable.  Run outside test.sh, the
    Horovod tests are skipped when `bench setup horovod` has not been run."""
    import importlib
    import time

    build = os.environ.get("BENCH_HOROVOD_BUILD")
    if build:
        rc_file, deadline = Path(build) / "rc", time.monotonic() + 45 * 60
        with waiting_for("horovod build"):
            while not rc_file.exists():
                if time.monotonic() > deadline:
                    pytest.fail("the background Horovod build did not finish in 45 minutes")
                time.sleep(5)
        if rc_file.read_text().strip() != "0":
            log = (Path(build) / "log").read_text()[-4000:]
            pytest.fail(f"bench setup horovod failed:\n{log}")
    importlib.invalidate_caches()
    if importlib.util.find_spec("horovod") is None:
        if build and os.environ.get("BENCH_HOROVOD", "1") != "0":
            pytest.fail("Horovod was built but cannot be imported from this environment")
        pytest.skip("Horovod is not installed (.venv/bin/bench setup horovod)")


# The time of each tier, for scripts/test_times.py (CI's guard against the e2e tier's drift):
# every test's set-up, call and tear-down, summed in the process that reports (pytest-xdist's
# controller, or the only one), written where BENCH_TEST_TIMES says at the session's end.
# Time a fixture spends waiting for a build that runs beside the suite (the Docker images,
# Horovod: seconds on a machine that has them cached, minutes on a new one) is reported
# apart (``waits``), not as the tier's: it measures the machine's caches, not the tests.
_TIMES: dict[str, Any] = {"tiers": {}, "tests": {}}


@contextlib.contextmanager
def waiting_for(what: str) -> Iterator[None]:
    """Records how long the block waited for ``what`` (a build beside the suite), in the
    file of this process's waits beside BENCH_TEST_TIMES' (every xdist worker has its own)."""
    import json
    import time

    started = time.monotonic()
    try:
        yield
    finally:
        target = os.environ.get("BENCH_TEST_TIMES")
        if target:
            line = json.dumps({"what": what, "s": round(time.monotonic() - started, 2)})
            with open(f"{target}.waits.{os.getpid()}", "a") as out:
                out.write(line + "\n")


def _waits(target: str) -> dict[str, float]:
    import json

    waits: dict[str, float] = {}
    for path in Path(target).parent.glob(Path(target).name + ".waits.*"):
        for line in path.read_text().splitlines():
            wait = json.loads(line)
            waits[wait["what"]] = round(waits.get(wait["what"], 0.0) + float(wait["s"]), 2)
    return waits


def _tier(keywords: Any) -> str:
    if "e2e" in keywords:
        return "e2e"
    return "slow" if "slow" in keywords else "fast"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get("BENCH_TEST_TIMES"):
        return
    test = _TIMES["tests"].setdefault(report.nodeid, [_tier(report.keywords), 0.0])
    test[1] += report.duration
    if "horovod" in report.keywords:
        test.append("horovod")


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("BENCH_TEST_TIMES")
    if not target or hasattr(session.config, "workerinput"):
        return
    import json

    tiers: dict[str, dict[str, float]] = {}
    for tier, seconds, *marks in _TIMES["tests"].values():
        for name in {tier, *marks}:
            figures = tiers.setdefault(name, {"count": 0, "seconds": 0.0})
            figures["count"] += 1
            figures["seconds"] = round(figures["seconds"] + seconds, 2)
    slowest = sorted(_TIMES["tests"].items(), key=lambda item: -item[1][1])[:40]
    existing = json.loads(Path(target).read_text()) if Path(target).is_file() else {}
    Path(target).write_text(
        json.dumps(
            {
                **existing,
                "tiers": tiers,
                "waits": _waits(target),
                "slowest": [[nodeid, round(test[1], 1)] for nodeid, test in slowest],
            },
            indent=1,
        )
    )
