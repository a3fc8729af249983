"""Tier 3 with a real Docker engine: ``launcher=docker`` sweeps, failures that leave no
container behind, a killed host, the compose file's tracking server, and reproduction.

The images are built here (once per content hash: a re-run finds them) on the local base
image that scripts/build_base_image.sh makes, since no registry can be reached.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench import images
from tests.conftest import REPO, TINY, Bench, waiting_for
from tests.docker_images import BASE, FRAMEWORKS, build_all, build_base, ca_bundle, wheelhouse

pytestmark = pytest.mark.e2e

DOCKER = [
    "launcher=docker",
    f"launcher.docker.base_image={BASE}",
    f"launcher.docker.ca_bundle={ca_bundle()}",
    f"launcher.docker.wheelhouse={wheelhouse()}",
]


@pytest.fixture(scope="session")
def engine() -> Any:
    client = images.client()
    with waiting_for("docker base image"):
        build_base()
    return client


@pytest.fixture(scope="session")
def built(engine: Any) -> dict[str, images.Image]:
    """bench's CPU images of both frameworks and the tracking server's image, built now
    unless their content-hash tags exist (or waited for: scripts/test.sh builds them ahead)."""
    with waiting_for("docker images"):
        return build_all(engine)


@pytest.fixture(scope="session")
def framework_images(built: dict[str, images.Image]) -> dict[str, images.Image]:
    return {fw: built[fw] for fw in FRAMEWORKS}


def trial_containers(engine: Any, root: Path) -> list[Any]:
    """Containers (running or not) of trials whose working directory is under ``root``."""
    found = engine.containers.list(all=True, filters={"label": "bench.trial.loop"})
    return [c for c in found if c.labels["bench.trial.loop"].startswith(str(root))]


def wait_for_container(engine: Any, root: Path, timeout_s: float = 120) -> Any:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        running = [c for c in trial_containers(engine, root) if c.status == "running"]
        if running:
            return running[0]
        time.sleep(0.3)
    raise AssertionError("no trial container started")


def test_a_container_has_a_dev_shm_of_its_own(engine: Any, tmp_path: Path) -> None:
    """Issue 51: a trial's container shared the host's IPC namespace, so it read and wrote
    the host's /dev/shm.  With bench's own container options (a shell on the base image, a
    second or two), a file the host puts there is not seen, and one the container writes
    there does not reach the host."""
    from bench.core.config import BenchConfig
    from bench.launchers.docker import container_options

    secret = Path("/dev/shm") / f"bench-host-secret-{os.getpid()}"
    secret.write_text("HOST SECRET")
    planted = Path("/dev/shm") / f"bench-from-container-{os.getpid()}"
    cfg = BenchConfig()
    cfg.launcher.name = "docker"
    opts = container_options(cfg, tmp_path, "test/1/0")
    opts.pop("auto_remove")
    opts["command"] = ["sh", "-c", f"ls -a /dev/shm; cat {secret}; touch {planted}; df -m /dev/shm"]
    try:
        out = engine.containers.run(BASE, remove=True, **opts).decode()
    finally:
        secret.unlink()
    assert secret.name not in out and "HOST SECRET" not in out, out
    assert not planted.exists()
    assert " 64 " in out, out  # its own, sized by launcher.docker.shm_size_mb


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, framework_images: dict[str, Any]) -> Any:
    bench = Bench(tmp_path_factory.mktemp("docker-sweep"))
    run = bench.run("-m", f"framework={','.join(FRAMEWORKS)}", *TINY, *DOCKER, timeout=900)
    return bench, run


def test_two_trial_sweep_runs_each_trial_in_its_own_container(sweep: Any, engine: Any) -> None:
    bench, run = sweep
    assert run.returncode == 0, run.output
    children = bench.children()
    assert sorted(c.data.tags["bench.framework"] for c in children) == sorted(FRAMEWORKS)
    client = bench.client()
    containers = set()
    for child in children:
        tags = child.data.tags
        assert tags["bench.status"] == "ok" and child.info.status == "FINISHED"
        assert child.data.params["launcher.name"] == "docker"
        assert tags["bench.image.tag"].startswith(f"bench/{tags['bench.framework']}:cpu-")
        image = engine.images.get(tags["bench.image.tag"])
        assert image.labels["bench.image"] == tags["bench.framework"]
        assert tags["mlflow.docker.image.id"] == tags["bench.image.id"] == image.id
        assert tags["bench.image.digest"] == image.id  # built here: no registry digest
        assert tags["bench.base_image"] == BASE
        assert tags["bench.base_image.digest"] == engine.images.get(BASE).id
        version = "torch_version" if tags["bench.framework"] == "torch" else "tensorflow_version"
        assert tags[f"bench.{version}"]
        containers.add(tags["bench.container.id"])
        history = client.get_metric_history(child.info.run_id, "samples_per_s")
        assert sorted(m.step for m in history) == [1, 2]
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"config.json", "result.json", "worker.log"} <= artifacts
    assert len(containers) == len(FRAMEWORKS), "each trial has its own container"
    assert trial_containers(engine, bench.root) == []


def test_timeout_is_recorded_and_removes_the_container(bench: Bench, engine: Any) -> None:
    started = time.time()
    run = bench.run(
        "framework=torch", "epochs=1000", "steps_per_epoch=1000", "timeout_s=6", *DOCKER
    )
    assert run.returncode == 1, run.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "timeout"
    assert "timed out after 6 s" in child.data.tags["bench.error"]
    assert child.data.tags["mlflow.docker.image.id"].startswith("sha256:")
    assert time.time() - started < 120
    assert trial_containers(engine, bench.root) == []


def test_out_of_memory_kill_is_host_oom(bench: Bench, engine: Any) -> None:
    run = bench.run("framework=torch", "launcher.memory_limit_mb=96", *TINY, *DOCKER)
    assert run.returncode == 1, run.output
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "host_oom", child.data.tags.get("bench.error")
    assert "out-of-memory killer" in child.data.tags["bench.error"]
    assert "launcher.memory_limit_mb=96" in child.data.tags["bench.error"]
    assert trial_containers(engine, bench.root) == []


def test_a_crashing_trial_is_recorded_and_the_sweep_goes_on(
    bench: Bench, engine: Any, framework_images: dict[str, images.Image]
) -> None:
    # The bare base image has no bench: the worker dies at once, without a result.
    crash = f"launcher.docker.image={BASE},{framework_images['torch'].id}"
    run = bench.run("-m", "framework=torch", crash, *TINY, *DOCKER)
    assert run.returncode == 1, run.output
    by_image = {c.data.tags["mlflow.docker.image.id"]: c for c in bench.children()}
    crashed = by_image[engine.images.get(BASE).id]
    assert crashed.data.tags["bench.status"] == "error"
    assert "exited with code 1" in crashed.data.tags["bench.error"]
    assert "No module named 'bench'" in crashed.data.tags["bench.error"]
    assert by_image[framework_images["torch"].id].data.tags["bench.status"] == "ok"
    assert trial_containers(engine, bench.root) == []


def test_ctrl_c_records_killed_and_removes_the_container(bench: Bench, engine: Any) -> None:
    proc = bench.popen("framework=torch", "epochs=1000", "steps_per_epoch=1000", *DOCKER)
    try:
        wait_for_container(engine, bench.root)
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "killed" and child.info.status == "KILLED"
    assert trial_containers(engine, bench.root) == []


def test_a_sigkilled_container_is_an_error_and_a_resume_reruns_only_it(
    bench: Bench, engine: Any, framework_images: dict[str, images.Image]
) -> None:
    """``docker kill`` of a trial's container (SIGKILL from outside, not the OOM killer):
    that trial is an error naming the signal, the sweep goes on, nothing is left running,
    and the same command again reruns that trial and skips the other."""
    # lenet5: the kill lands while the first trial still imports torch; the rerun is quick.
    args = ("-m", "framework=torch", "model=lenet5", "steps_per_epoch=400,2", *TINY[:2],
            TINY[3], *DOCKER)  # fmt: skip
    proc = bench.popen(*args)
    try:
        victim = wait_for_container(engine, bench.root)
        time.sleep(1)
        victim.kill()  # SIGKILL
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 1, out + err
    statuses = {
        c.data.params["steps_per_epoch"]: c.data.tags["bench.status"] for c in bench.children()
    }
    assert statuses == {"400": "error", "2": "ok"}, statuses
    (killed,) = [c for c in bench.children() if c.data.params["steps_per_epoch"] == "400"]
    assert "SIGKILL, exit code 137" in killed.data.tags["bench.error"]
    assert not [r for r in bench.runs() if r.info.status == "RUNNING"]
    assert trial_containers(engine, bench.root) == []

    again = bench.run(*args)
    assert again.returncode == 0, again.output
    assert "2 trials: 1 ok, 1 skipped" in again.stdout, again.stdout


def test_a_killed_host_leaves_no_container(bench: Bench, engine: Any) -> None:
    proc = bench.popen(
        "framework=torch",
        "epochs=1000",
        "steps_per_epoch=1000",
        "launcher.docker.heartbeat_timeout_s=3",
        *DOCKER,
    )
    try:
        container = wait_for_container(engine, bench.root)
        time.sleep(1)
    finally:
        proc.kill()  # SIGKILL: no handler, no cleanup on the host side
        proc.communicate(timeout=30)
    deadline = time.time() + 30
    while trial_containers(engine, bench.root) and time.time() < deadline:
        time.sleep(0.5)
    assert trial_containers(engine, bench.root) == [], f"{container.name} outlived its host"


def test_asking_for_a_gpu_without_the_nvidia_runtime_fails_before_anything(
    bench: Bench, engine: Any
) -> None:
    run = bench.run("framework=torch", "launcher.docker.gpus=all", *TINY, *DOCKER)
    assert run.returncode == 2, run.output
    assert "launcher.docker.gpus: 'all': GPUs were asked for" in run.stderr
    assert "no NVIDIA container runtime" in run.stderr
    assert bench.runs() == []
    assert trial_containers(engine, bench.root) == []


def test_reproduce_reruns_a_logged_trial_in_the_same_image(sweep: Any, engine: Any) -> None:
    bench, first = sweep
    assert first.returncode == 0, first.output
    (original,) = [c for c in bench.children() if c.data.tags["bench.framework"] == "torch"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.cli.reproduce",
            original.info.run_id,
            "--tracking-uri",
            bench.uri,
        ],
        cwd=bench.root,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (again,) = [
        c for c in bench.children() if c.data.tags.get("bench.reproduces") == original.info.run_id
    ]
    assert again.info.run_id != original.info.run_id
    assert again.data.tags["bench.status"] == "ok"
    for tag in ("mlflow.docker.image.id", "bench.base_image.digest", "bench.torch_version"):
        assert again.data.tags[tag] == original.data.tags[tag], tag
    same = ("batch_size", "model.name", "epochs", "steps_per_epoch", "seed", "threads")
    assert {k: again.data.params[k] for k in same} == {k: original.data.params[k] for k in same}
    out = proc.stdout
    assert f"original {original.info.run_id[:8]}" in out
    assert f"reproduction {again.info.run_id[:8]}" in out
    assert "trial_samples_per_s" in out
    assert trial_containers(engine, bench.root) == []


def _compose() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    assert shutil.which("docker-compose"), "no compose tool (scripts/system_deps.sh installs one)"
    return ["docker-compose"]


def test_compose_builds_benchs_images_under_benchs_tags_and_its_mlflow_service_takes_a_run(
    built: dict[str, images.Image],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # `eval "$(bench images env ...)"`, as the compose file's header says
    printed = subprocess.run(
        [sys.executable, "-m", "bench", "images", "env", "--variant", "cpu", "--base-image", BASE,
         "--wheelhouse", wheelhouse()],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    exported = dict(
        shlex.split(line.removeprefix("export "))[0].split("=", 1)
        for line in printed.stdout.splitlines()
    )
    for name, image in built.items():  # the tags bench gave the images it built
        assert exported[f"BENCH_{name.upper()}_IMAGE"] == image.tag
        assert exported[f"BENCH_{name.upper()}_BASE_NAME"] == image.base_image  # its label
    env = dict(os.environ, **exported, BENCH_MLFLOW_PORT=str(port))
    project = ["-p", f"bench-test-{os.getpid()}", "-f", str(REPO / "compose.yaml")]
    compose = [*_compose(), *project]
    config = subprocess.run([*compose, "config"], capture_output=True, text=True, env=env)
    assert config.returncode == 0, config.stderr
    assert f"127.0.0.1:{port}:5000" in config.stdout
    assert "driver: nvidia" in config.stdout and "- gpu" in config.stdout
    for name in ("torch", "tf", "mxnet"):
        assert f"image: {exported[f'BENCH_{name.upper()}_IMAGE']}" in config.stdout
        assert exported[f"BENCH_{name.upper()}_BASE"] in config.stdout
    try:
        up = subprocess.run(
            [*compose, "up", "-d", "--no-build", "mlflow"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert up.returncode == 0, up.stderr
        uri = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=2)
                break
            except OSError:
                assert time.time() < deadline, "the mlflow service never answered"
                time.sleep(1)
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.create_experiment("compose")
        run = client.create_run(exp)
        client.log_metric(run.info.run_id, "samples_per_s", 12.5, step=1)
        client.log_text(run.info.run_id, "hello", "note.txt")
        client.set_terminated(run.info.run_id)
        back = client.get_run(run.info.run_id)
        assert back.data.metrics["samples_per_s"] == 12.5
        assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["note.txt"]
    finally:
        down = subprocess.run([*compose, "down", "-v"], capture_output=True, text=True, env=env)
        assert down.returncode == 0, down.stderr


@pytest.mark.usefixtures("framework_images")
def test_a_slurm_job_runs_its_trial_in_the_frameworks_image(bench: Bench, engine: Any) -> None:
    """Issue 8: a job on a Slurm node runs its trial in the framework's container."""
    import shutil

    if not shutil.which("sbatch"):
        pytest.skip("Slurm is not installed here: run scripts/slurm_cluster.sh")
    run = bench.run(
        "-m", "hydra/launcher=submitit_slurm", "+slurm=local", "framework=torch", *TINY, *DOCKER
    )
    assert run.returncode == 0, run.output
    (child,) = bench.children()
    tags = child.data.tags
    assert tags["bench.status"] == "ok", tags.get("bench.error")
    assert tags["bench.slurm_job_id"].isdigit()
    assert tags["bench.image.tag"].startswith("bench/torch:cpu-") and tags["bench.container.id"]
    assert trial_containers(engine, bench.root) == []


def test_two_tensorflow_versions_each_in_its_own_image(bench: Bench, built: Any) -> None:
    """framework.version under launcher=docker: the pinned version in bench's TF image, 2.20.0
    in an image built from its generated, hashed lock; each run ran the version it asked for
    and logged its image and lock."""
    run = bench.run(
        "-m", "framework=tf", "framework.version=2.20.0,2.21.0", "repeats=2", "model=lenet5",
        *TINY, *DOCKER,
        timeout=1800,
    )  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    children = bench.children()
    assert len(children) == 4
    images_of: dict[str, set[str]] = {}
    for child in children:
        asked = child.data.params.get("framework.version", "")
        assert child.data.tags["bench.tensorflow_version"] == (asked or "2.21.0")
        images_of.setdefault(asked, set()).add(child.data.tags["mlflow.docker.image.id"])
    assert len(images_of["2.20.0"]) == len(images_of[""]) == 1
    assert images_of["2.20.0"] != images_of[""]
    versioned = [c for c in children if c.data.params.get("framework.version")]
    assert all(len(c.data.tags["bench.lock_sha"]) == 16 for c in versioned)


def test_images_lists_benchs_images_and_prunes_only_a_superseded_one(
    engine: Any, built: dict[str, images.Image], tmp_path: Path
) -> None:
    from bench.images import buildkit, inventory

    # The images built for this suite, as the real engine reports them.
    listed = subprocess.run(
        [sys.executable, "-m", "bench", "images", "list"], capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    for image in built.values():
        row = next(r for r in listed.stdout.splitlines() if r.startswith(f"{image.tag} "))
        assert row.split()[1:3] == ["pinned", image.base_image], row
        assert f"  {inventory.amount(image.size_bytes)}  " in row, row
    # Two throw-away images of a kind of their own (a variant no build uses), one built a
    # little later; a stopped container holds the older one, then lets it go.
    kind = f"probe{os.getpid()}"
    tags = [f"bench/torch:{kind}-{n}" for n in range(2)]
    labels = {"bench.image": "torch", "bench.variant": kind, "bench.version": ""}
    container = None
    try:
        for n, tag in enumerate(tags):
            (tmp_path / "probe.Dockerfile").write_text(f"FROM {BASE}\nRUN echo {n} > /probe\n")
            buildkit.build(
                tmp_path, "probe.Dockerfile", tag, {}, {**labels, "bench.base_image": BASE}
            )
        probes = [h for h in inventory.held(engine) if h.variant == kind]
        assert [h.tag for h in probes] == tags[::-1]  # newest first
        assert probes[0].built > probes[1].built
        older = inventory.superseded(probes)
        assert [h.tag for h in older] == tags[:1]
        container = engine.containers.create(tags[0], command="true")
        [(_, why)] = inventory.remove(engine, older)
        assert "conflict" in why, why
        container.remove()
        container = None
        assert inventory.remove(engine, older) == [(older[0], "")]
        assert [h.tag for h in inventory.held(engine) if h.variant == kind] == tags[1:]
    finally:
        if container is not None:
            container.remove(force=True)
        for tag in tags:
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_a_tiny_llama_trains_in_the_torch_and_tf_images(
    bench: Bench, engine: Any, framework_images: dict[str, images.Image]
) -> None:
    """model=hf under launcher=docker: transformers' llama in the torch image, keras-hub's in
    the TF image, at one size (equal parameter counts); the torch image has transformers and
    none of keras-hub, tensorflow-text or TensorFlow."""
    found = engine.containers.run(
        framework_images["torch"].tag,
        ["python", "-c", "import importlib.util as u; print([bool(u.find_spec(m)) for m in "
         "('transformers', 'keras_hub', 'tensorflow_text', 'tensorflow')])"],
        remove=True,
    )  # fmt: skip
    assert found.decode().strip() == "[True, False, False, False]"
    tiny = ["model=hf", "model.name=llama", "model.seq_len=16", "model.vocab_size=128",
            "model.hidden=32", "model.layers=2", "model.heads=2", "model.intermediate=64",
            "model.config.num_key_value_heads=1"]  # fmt: skip
    run = bench.run("-m", f"framework={','.join(FRAMEWORKS)}", *tiny, *TINY, *DOCKER)
    assert run.returncode == 0, run.output
    children = {c.data.tags["bench.framework"]: c for c in bench.children()}
    assert sorted(children) == sorted(FRAMEWORKS)
    for framework, child in children.items():
        tags, params = child.data.tags, child.data.params
        assert tags["bench.status"] == "ok", tags.get("bench.error")
        assert tags["bench.image.tag"].startswith(f"bench/{framework}:cpu-")
        assert (params["launcher.name"], params["model.source"]) == ("docker", "hf")
        assert int(params["num_parameters"]) == 26_784  # transformers' count, both sides
        assert child.data.metrics["final_loss"] > 0
    assert trial_containers(engine, bench.root) == []
