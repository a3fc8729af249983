"""Versions as an axis end to end: a sweep over two TensorFlow versions (2.20.0 in an
environment bench makes on first use, 2.21.0 the pinned one) whose runs each ran the version
asked for and whose report compares them; ``bench report --baseline`` over two sweeps of one
configuration; and, by hand only, a timm model in a torch version's environment with its
extra."""

from __future__ import annotations

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
    assert re.search(
        r"faster than|slower than|no significant difference|equivalent within|not comparable", row
    )

    # a run of a non-pinned version reproduces in its environment, with the original's hash
    original = next(r for r in children if r.data.params.get("framework.version") == "2.20.0")
    command = ["-m", "bench.cli.reproduce", original.info.run_id, "--tracking-uri", bench.uri]
    again = subprocess.run(
        [sys.executable, *command],
        capture_output=True, text=True, cwd=bench.root, env=bench.env, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    (copy,) = [r for r in bench.children() if r.data.tags.get("bench.reproduces")]
    for tag in ("bench.config_hash", "bench.lock_sha", "bench.tensorflow_version"):
        assert copy.data.tags[tag] == original.data.tags[tag], tag
    assert "bench.lock_sha" in again.stdout and "same" in again.stdout


def test_a_sweep_is_compared_with_a_baseline_sweep_of_its_configuration(bench) -> None:  # noqa: ANN001
    """The command on real runs: matched by configuration, the section in the report, exit 0
    with no significant regression (2 runs a side can show none).  That a real slowdown is
    caught is measured by scripts/measure/bench_baseline_regression.py (a timed check), and the
    exit status on a regression is tested on constructed runs (tests/unit/test_versions.py)."""
    args = ["-m", "framework=torch", "repeats=2", "force=true", *TINY]
    for _ in range(2):
        done = bench.run(*args)
        assert done.returncode == 0, done.output[-2000:]
    first, second = sorted(bench.parents(), key=lambda r: r.info.start_time)
    found = _report(bench, "--sweep", second.info.run_id, "--baseline", first.info.run_id,
                    "--fail-on-regression", "5", "--out", str(bench.root / "r"))  # fmt: skip
    assert found.returncode == 0, found.stdout + found.stderr
    md = (bench.root / "r" / "report.md").read_text()
    table = md[md.index("## Against the baseline") :]
    row = next(line for line in table.splitlines() if line.startswith("| torch"))
    assert "lenet5" in row and "not in the baseline" not in row, row


@pytest.mark.skipif(
    not os.environ.get("BENCH_TEST_BIG_VERSIONS"),
    reason="makes torch 2.14.0's environment with timm and torchvision (a multi-GB download on "
    "a cold cache): run by hand with BENCH_TEST_BIG_VERSIONS=1, never in CI",
)
def test_a_timm_model_runs_in_a_torch_versions_environment_with_its_extra(bench) -> None:  # noqa: ANN001
    """model=timm at a torch version: the sweep makes (or finds) the version's environment with
    the timm extra, timm and the torchvision paired with that torch, and the trial runs there,
    logging that environment's lock."""
    from bench.envs import environments

    done = bench.run(
        "framework=torch", "framework.version=2.14.0", "model=timm", "model.name=resnet18",
        "image_size=32", "batch_size=4", "epochs=1", "steps_per_epoch=3", "warmup_steps=1",
        timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.output[-3000:]
    (run,) = [r for r in bench.runs() if r.data.tags.get("bench.status")]
    assert run.data.tags["bench.status"] == "ok", run.data.tags
    assert run.data.tags["bench.torch_version"].startswith("2.14.0")
    env = environments.env_for("torch", "2.14.0", "timm")
    assert env.ready and env.root.name == "torch-2.14.0+timm"
    assert run.data.tags["bench.lock_sha"] == env.lock_hash()
    pins = environments.lock_pins(env.lock)
    assert pins["torchvision"].startswith("0.29.") and "timm" in pins
