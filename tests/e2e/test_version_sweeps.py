"""Versions as an axis end to end: a sweep over two TensorFlow versions (2.20.0 in an
environment bench makes on first use, 2.21.0 the pinned one) whose runs each ran the version
asked for and whose report compares them; and ``bench report --baseline`` over sweeps of one
configuration, one of them slowed down on purpose by a background CPU load."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

TINY = ["model=lenet5", "epochs=1", "steps_per_epoch=20", "warmup_steps=2", "batch_size=16"]


def _report(bench, *args: str) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    return subprocess.run(
        [sys.executable, "-m", "bench.report", "--uri", bench.uri, "--no-log", *args],
        capture_output=True, text=True, cwd=bench.root, env=bench.env, timeout=600,
    )  # fmt: skip


def test_two_tensorflow_versions_in_one_sweep(bench) -> None:  # noqa: ANN001
    done = bench.run(
        "-m", "framework=tf", "framework.version=2.20.0,2.21.0", "repeats=4", "report=true",
        *TINY, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.output[-3000:]
    children = bench.children()
    assert len(children) == 8
    for run in children:
        asked = run.data.params.get("framework.version", "")  # absent: the pinned version
        ran = run.data.tags["bench.tensorflow_version"]
        assert ran == (asked or "2.21.0"), (asked, ran)
        assert re.fullmatch(r"[0-9a-f]{16}", run.data.tags["bench.lock_sha"])
    shas = {
        r.data.params.get("framework.version", ""): r.data.tags["bench.lock_sha"] for r in children
    }
    assert shas["2.20.0"] != shas[""]  # each version ran from its own lock
    found = re.search(r"Report: file://(\S+)/report\.html", done.stdout)
    assert found, done.stdout[-2000:]
    report = (Path(found.group(1)) / "report.md").read_text()
    section = report[report.index("## Version against version") :]
    assert "tf 2.20.0 against tf 2.21.0 (pinned)" in section
    row = next(line for line in section.splitlines() if line.startswith("| lenet5"))
    assert re.search(r"faster than|slower than|no significant difference|not comparable", row)

    # a run of a non-pinned version reproduces in its environment, with the original's hash
    original = next(r for r in children if r.data.params.get("framework.version") == "2.20.0")
    command = ["-m", "bench.reproduce", original.info.run_id, "--tracking-uri", bench.uri]
    again = subprocess.run(
        [sys.executable, *command],
        capture_output=True, text=True, cwd=bench.root, env=bench.env, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    (copy,) = [r for r in bench.children() if r.data.tags.get("bench.reproduces")]
    for tag in ("bench.config_hash", "bench.lock_sha", "bench.tensorflow_version"):
        assert copy.data.tags[tag] == original.data.tags[tag], tag
    assert "bench.lock_sha" in again.stdout and "same" in again.stdout


def _burn(stop: float) -> None:  # a busy core
    import time

    os.setsid()  # a session (and so a scheduler autogroup) of its own, as a real load has
    while time.time() < stop:
        pass


# Timed windows of at least 1 s (steps_per_epoch=-1), so that runs are stable enough (CV
# below 10%) for the verdict rules to call a change at all.
STEADY = ["model=lenet5", "epochs=1", "steps_per_epoch=-1", "min_window_s=1.0", "batch_size=16"]


def test_a_baseline_finds_a_regression_that_a_cpu_load_causes(bench) -> None:  # noqa: ANN001
    args = ["-m", "framework=torch", "repeats=4", "force=true", "threads=1", *STEADY]
    for _ in range(2):
        assert bench.run(*args).returncode == 0
    import time

    load = [
        multiprocessing.get_context("spawn").Process(target=_burn, args=(time.time() + 600,))
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    for p in load:
        p.start()
    try:
        slowed = bench.run(*args)
    finally:
        for p in load:
            p.kill()
    assert slowed.returncode == 0, slowed.output[-2000:]
    first, second, third = sorted(bench.parents(), key=lambda r: r.info.start_time)
    # Two sweeps of one configuration on an idle machine: no change, or one within what this
    # machine drifts between sweeps (up to about 7% seen here, significant with CVs of 2-4%),
    # so the gate here is 20%; the CPU load below slows the trials far more than that.
    same = _report(bench, "--sweep", second.info.run_id, "--baseline", first.info.run_id,
                   "--fail-on-regression", "20", "--out", str(bench.root / "r1"))  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr
    md = (bench.root / "r1" / "report.md").read_text()
    assert "## Against the baseline" in md
    worse = _report(bench, "--sweep", third.info.run_id, "--baseline", first.info.run_id,
                    "--fail-on-regression", "5", "--out", str(bench.root / "r2"))  # fmt: skip
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "regression of" in worse.stdout
    assert "significant regression(s) above 5%" in worse.stderr
    md = (bench.root / "r2" / "report.md").read_text()
    table = md[md.index("## Against the baseline") :]
    assert "regression of" in table
