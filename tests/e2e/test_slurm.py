"""Sweeps through a real Slurm cluster (scripts/slurm_cluster.sh: two nodes on this host) and
submitit."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", autouse=True)
def slurm_cluster() -> None:
    if not shutil.which("sinfo"):
        if os.environ.get("CI") == "true":
            pytest.fail("Slurm is not installed: scripts/system_deps.sh should have set it up")
        pytest.skip("Slurm is not installed here: run scripts/slurm_cluster.sh")
    up = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    if up.returncode != 0 or not up.stdout.strip():
        subprocess.run(["bash", "scripts/slurm_cluster.sh"], check=True, timeout=600)


def test_two_trial_sweep_lands_in_mlflow_with_job_ids(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m", "hydra/launcher=submitit_slurm", "framework=torch,tf", "model=lenet5", *TINY
    )
    assert result.returncode == 0, result.output
    assert "submitted to Slurm" in result.stderr
    children = bench.children()
    assert {c.data.tags["bench.framework"] for c in children} == {"torch", "tf"}
    job_ids = {c.data.tags["bench.slurm_job_id"] for c in children}
    assert len(job_ids) == 2 and all(j.isdigit() for j in job_ids)
    for child in children:
        assert child.data.tags["bench.status"] == "ok"
        assert child.data.tags["bench.slurm_partition"]
        assert child.data.tags["bench.slurm_nodelist"]
    (parent,) = bench.parents()
    assert parent.info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert "2 trials: 2 ok" in result.stdout

    again = bench.run(
        "-m", "hydra/launcher=submitit_slurm", "framework=torch,tf", "model=lenet5", *TINY
    )
    assert again.returncode == 0, again.output
    assert len(bench.children()) == 2, "resubmitting must skip the finished trials"


def test_a_job_past_its_time_limit_is_recorded_as_timeout(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m",
        "hydra/launcher=submitit_slurm",
        "hydra.launcher.timeout_min=1",
        "framework=torch",
        "model=lenet5",
        "batch_size=2",
        "epochs=1",
        "steps_per_epoch=10000000",
        "warmup_steps=1",
        "timeout_s=3600",
        timeout=400,
    )
    assert result.returncode == 1, result.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "timeout", child.data.tags.get("bench.error")
    assert "time limit" in child.data.tags["bench.error"]
    assert child.info.status == "FAILED"
    assert bench.parents()[0].info.status == "FAILED"


def start_long_trial(bench) -> tuple[subprocess.Popen[str], str]:  # noqa: ANN001
    sweep = bench.popen(
        "-m",
        "hydra/launcher=submitit_slurm",
        "framework=torch",
        "model=lenet5",
        "batch_size=2",
        "epochs=1",
        "steps_per_epoch=10000000",
        "warmup_steps=1",
    )
    deadline = time.time() + 180
    job = ""
    while time.time() < deadline and not job:  # wait until its trial is running
        time.sleep(2)
        job = _slurm_job_tag(bench.db)
    assert job, "the job never started its trial"
    return sweep, job


def _slurm_job_tag(db: Path) -> str:
    """The trial's Slurm job id once its run has it, read from the sqlite file directly: an
    MLflow client would take part in creating the store while the sweep is creating it."""
    if not db.exists():
        return ""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            row = conn.execute(
                "SELECT value FROM tags WHERE key = 'bench.slurm_job_id' LIMIT 1"
            ).fetchone()
    except sqlite3.Error:  # not created yet
        return ""
    return str(row[0]) if row else ""


def test_a_cancelled_job_is_recorded_as_killed(bench) -> None:  # noqa: ANN001
    sweep, job = start_long_trial(bench)
    subprocess.run(["scancel", job], check=True)
    out, err = sweep.communicate(timeout=240)
    assert sweep.returncode == 1, out + err
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "killed", child.data.tags.get("bench.error")
    assert child.info.status == "KILLED"
    assert bench.parents()[0].info.status == "FAILED"


def test_a_job_that_dies_silently_is_closed_from_slurm_accounting(bench) -> None:  # noqa: ANN001
    """The job's own process is SIGKILLed (as on a node failure): nothing in the job can
    record anything, so the submitting host closes the trial's run from Slurm's state."""
    sweep, job = start_long_trial(bench)
    victims = [
        p
        for p in psutil.process_iter(["cmdline", "environ"])
        if "submitit" in " ".join(p.info["cmdline"] or [])
        and (p.info["environ"] or {}).get("SLURM_JOB_ID") == job
    ]
    assert victims, "the job's python process was not found"
    for proc in victims:
        proc.kill()
    out, err = sweep.communicate(timeout=240)
    assert sweep.returncode == 1, out + err
    (child,) = bench.children()
    assert child.info.status != "RUNNING"
    assert child.data.tags["bench.status"] == "error", child.data.tags.get("bench.error")
    assert f"job {job}" in child.data.tags["bench.error"]
    assert "FAILED" in child.data.tags["bench.error"]
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if "bench.trial.worker" in " ".join(p.info["cmdline"] or [])
        and str(bench.root) in " ".join(p.info["cmdline"] or [])
    ]


def test_a_two_worker_ddp_trial_runs_as_one_slurm_job(bench) -> None:  # noqa: ANN001
    from tests.e2e.test_distributed import assert_global_and_per_worker

    result = bench.run(
        "-m", "hydra/launcher=submitit_slurm", "+slurm=local", "distributed=ddp", "workers=2",
        "model=lenet5", *TINY,
    )  # fmt: skip
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    assert_global_and_per_worker(bench, child)
    job = child.data.tags["bench.slurm_job_id"]
    assert _sacct(job, "State", "NNodes") == [["COMPLETED", "1"]]


MULTI = ["-m", "hydra/launcher=submitit_slurm", "+slurm=local", "hydra.launcher.partition=multi"]


# A job's record in Slurm's accounting trails the job: the sweep has its result while the
# job is still COMPLETING (its epilog, slurmdbd's write), longer on a loaded machine.
_PASSING = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "")


def _sacct(job: str, *fields: str, steps: bool = False, settle_s: float = 60) -> list[list[str]]:
    """sacct's rows for ``job`` once its allocation's state is a final one (at most
    ``settle_s`` seconds later)."""
    argv = ["sacct", "-n", "-P", "-j", job, "-o", ",".join(fields)]
    deadline = time.monotonic() + settle_s
    while True:
        state = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-j", job, "-o", "State"], capture_output=True, text=True
        ).stdout.strip()
        if state.split(" ")[0] not in _PASSING or time.monotonic() > deadline:
            break
        time.sleep(1)
    out = subprocess.run([*argv] if steps else [*argv, "-X"], capture_output=True, text=True)
    return [line.split("|") for line in out.stdout.split()]


def _spans_two_nodes(bench, run) -> None:  # noqa: ANN001
    """The trial's job had 2 nodes, and its ranks ran in one step across both."""
    from tests.e2e.test_distributed import assert_global_and_per_worker

    assert_global_and_per_worker(bench, run)
    assert len(run.data.tags["bench.slurm_nodelist"].split(",")) == 2
    job = run.data.tags["bench.slurm_job_id"]
    steps = {
        name: (state, nodes)
        for name, state, nodes in _sacct(job, "JobName", "State", "NNodes", steps=True)
    }
    assert steps["bench-nodes"] == ("COMPLETED", "2"), steps


def test_each_job_is_sized_by_its_trial_and_ddp_spans_two_nodes(bench) -> None:  # noqa: ANN001
    too_many = bench.run(*MULTI, "distributed=ddp", "nodes=2,3", "model=lenet5", *TINY)
    assert too_many.returncode == 2, too_many.output
    assert "nodes: 3 nodes asked for; Slurm partition multi has 2" in too_many.stderr
    assert bench.runs() == [], "nothing may be submitted"

    result = bench.run(*MULTI, "distributed=ddp", "workers=1", "nodes=1,2", "model=lenet5", *TINY)
    assert result.returncode == 0, result.output
    runs = {c.data.params["nodes"]: c for c in bench.children()}
    assert set(runs) == {"1", "2"}
    for nodes, run in runs.items():
        assert run.data.tags["bench.status"] == "ok", run.data.tags.get("bench.error")
        job = run.data.tags["bench.slurm_job_id"]
        assert _sacct(job, "State", "NNodes") == [["COMPLETED", nodes]]
    _spans_two_nodes(bench, runs["2"])
    # Each node's processes leave their logs with the trial's artifacts.
    files = {f.path for f in bench.client().list_artifacts(runs["2"].info.run_id, "nodes")}
    assert {"nodes/agent0.log", "nodes/agent1.log"} <= files, files


@pytest.mark.parametrize(
    "strategy", [["distributed=multiworker"], ["distributed=ps_async", "ps=1"]], ids=lambda s: s[0]
)
def test_tf_strategies_span_two_nodes(bench, strategy: list[str]) -> None:  # noqa: ANN001
    result = bench.run(
        *MULTI, "framework=tf", *strategy, "workers=1", "nodes=2", "model=lenet5", *TINY
    )
    assert result.returncode == 0, result.output
    (run,) = bench.children()
    _spans_two_nodes(bench, run)


def test_jax_distributed_spans_two_nodes(bench) -> None:  # noqa: ANN001
    """One rank on each node, joined by jax.distributed at the first node's published
    address: the coordination service and gloo's collectives cross the nodes."""
    result = bench.run(
        *MULTI, "framework=jax", "distributed=jax_distributed", "workers=1", "nodes=2",
        "model=lenet5", *TINY,
    )  # fmt: skip
    assert result.returncode == 0, result.output
    (run,) = bench.children()
    _spans_two_nodes(bench, run)
    client, run_id = bench.client(), run.info.run_id
    first = json.loads(Path(client.download_artifacts(run_id, "nodes/node0.json")).read_text())
    second = json.loads(Path(client.download_artifacts(run_id, "nodes/node1.json")).read_text())
    assert len(first["ports"]) == 1 and second["ports"] == []  # the service's, on the first
    rank1 = Path(client.download_artifacts(run_id, "nodes/node1/rank1.log")).read_text()
    assert "Rank 1 is connected to 1 peer ranks" in rank1  # gloo, from the second node


@pytest.mark.horovod
@pytest.mark.usefixtures("horovod_ready")
def test_horovod_spans_two_nodes_without_ssh(bench) -> None:  # noqa: ANN001
    result = bench.run(
        *MULTI, "framework=torch", "distributed=horovod", "workers=1", "nodes=2", "model=lenet5",
        *TINY,
    )  # fmt: skip
    assert result.returncode == 0, result.output
    (run,) = bench.children()
    _spans_two_nodes(bench, run)


def test_several_nodes_outside_slurm_are_refused_before_any_trial(bench) -> None:  # noqa: ANN001
    from tests.conftest import REPO

    env_free = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env_free["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        bench.args("distributed=ddp", "nodes=2", "model=lenet5", *TINY),
        cwd=bench.root, capture_output=True, text=True, timeout=120, env=env_free,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "nodes: 2 nodes need a Slurm allocation; run the sweep with " in proc.stderr
    assert bench.runs() == [], "no trial may start"


def test_a_rank_killed_on_the_second_node_fails_the_trial_and_leaves_nothing(
    bench,  # noqa: ANN001
) -> None:
    from tests.e2e.test_distributed import dist_processes, wait_for_rank

    sweep = bench.popen(
        *MULTI, "distributed=ddp", "workers=1", "nodes=2", "model=lenet5", "batch_size=4",
        "epochs=1", "steps_per_epoch=100000", "warmup_steps=1", "timeout_s=240",
    )  # fmt: skip
    try:
        victim = wait_for_rank(bench.root, 180, RANK="1", SLURM_NODEID="1")
        assert victim is not None, "rank 1 never started on the second node"
        time.sleep(8)  # well into its steps
        victim.kill()
        out, err = sweep.communicate(timeout=150)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 1, out + err
    (run,) = bench.children()
    assert run.data.tags["bench.status"] == "dist_failure"
    assert "worker 1 (rank1): ended without a result" in run.data.tags["bench.error"]
    time.sleep(2)
    assert not dist_processes(bench.root)
    job = run.data.tags["bench.slurm_job_id"]
    left = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout
    assert not left.strip(), left


def test_a_job_sbatch_refuses_is_recorded_as_an_error(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m", "hydra/launcher=submitit_slurm", "hydra.launcher.partition=no_such_partition",
        "model=lenet5", *TINY,
    )  # fmt: skip
    assert result.returncode == 1, result.output
    assert "Slurm refused the nodes=1 job(s)" in result.stderr
    (run,) = bench.children()
    assert run.data.tags["bench.status"] == "error"
    assert run.data.tags["bench.error"].startswith("Slurm did not accept the job: ")
    assert "1 trial: 1 error" in result.stdout


def test_a_job_slurm_would_never_start_is_cancelled_and_recorded_as_an_error(bench) -> None:  # noqa: ANN001
    """A job that depends on one that failed stays pending (DependencyNeverSatisfied) for
    good: the sweep cancels it after unsatisfiable_after_s instead of waiting forever."""
    failed = subprocess.run(
        ["sbatch", "--parsable", "--output=/dev/null", "--wrap", "false"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deadline = time.monotonic() + 60
    while _sacct(failed, "State") != [["FAILED"]] and time.monotonic() < deadline:
        time.sleep(1)
    result = bench.run(
        "-m", "hydra/launcher=submitit_slurm", "hydra.launcher.unsatisfiable_after_s=5",
        f"++hydra.launcher.additional_parameters.dependency=afterok:{failed}",
        "model=lenet5", *TINY, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.output
    assert "reason DependencyNeverSatisfied); cancelled" in result.stderr
    (run,) = bench.children()
    assert run.data.tags["bench.status"] == "error"
    error = run.data.tags["bench.error"]
    assert "Slurm would never start the job (pending, reason DependencyNeverSatisfied)" in error
    job = run.data.tags["bench.slurm_job_id"]
    assert _sacct(job, "State")[0][0].startswith("CANCELLED")
    assert "1 trial: 1 error" in result.stdout
