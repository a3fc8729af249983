"""launcher=docker without an engine: GPU device requests, container options, validation,
image content hashes and pins, and the heartbeat that stops an orphaned trial."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bench import images
from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError
from bench.core.frameworks import WITH_IMAGE
from bench.envs import environments
from bench.launchers import docker as launcher
from bench.launchers import docker_host as host
from bench.trial.runtime import heartbeat
from bench.trial.runtime.processes import owner_alive, owner_label

REPO = Path(__file__).resolve().parents[2]


def docker_cfg(**docker: str) -> BenchConfig:
    cfg = BenchConfig()
    cfg.launcher.name = "docker"
    for key, value in docker.items():
        setattr(cfg.launcher.docker, key, value)
    return cfg


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ("all", {"Driver": "nvidia", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]]}),
        ("2", {"Driver": "nvidia", "Count": 2, "DeviceIDs": [], "Capabilities": [["gpu"]]}),
        (
            "0,1",
            {"Driver": "nvidia", "Count": 0, "DeviceIDs": ["0", "1"], "Capabilities": [["gpu"]]},
        ),
        (
            "device=3",
            {"Driver": "nvidia", "Count": 0, "DeviceIDs": ["3"], "Capabilities": [["gpu"]]},
        ),
        (
            "GPU-6a3c1f2e-0b9d-4e1a-9d57-2f7c1e5b8a10",
            {
                "Driver": "nvidia",
                "Count": 0,
                "DeviceIDs": ["GPU-6a3c1f2e-0b9d-4e1a-9d57-2f7c1e5b8a10"],
                "Capabilities": [["gpu"]],
            },
        ),
    ],
)
def test_device_request_for_each_gpus_form(gpus: str, expected: dict[str, object]) -> None:
    (request,) = host.device_requests(gpus)
    # The request is the JSON the engine receives (docker run --gpus sends the same).
    assert {k: request[k] for k in expected} == expected


def test_no_gpus_no_device_request() -> None:
    assert host.device_requests("") == []
    assert "device_requests" not in launcher.container_options(
        docker_cfg(), Path("/tmp/t"), "owner"
    )


@pytest.mark.parametrize("bad", ["0", "x", "1,,2", "-1", "all,0", "device="])
def test_bad_gpus_forms_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        host.parse_gpus(bad)
    with pytest.raises(ConfigError, match=r"launcher\.docker\.gpus: "):
        validate(docker_cfg(gpus=bad))


def test_gpus_on_the_cpu_variant_and_cuda_without_gpus_are_refused() -> None:
    with pytest.raises(ConfigError, match="launcher.docker.gpus: GPUs need the cuda image"):
        validate(docker_cfg(gpus="all", variant="cpu"))
    cfg = docker_cfg()
    cfg.device = "cuda"
    with pytest.raises(ConfigError, match="device: cuda in a container needs GPUs"):
        validate(cfg)


def test_build_options_are_checked_with_their_field(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    with pytest.raises(ConfigError) as err:
        validate(docker_cfg(variant="tpu", ca_bundle=str(not_pem), wheelhouse=str(tmp_path / "no")))
    fields = [p.split(":")[0] for p in err.value.problems]
    assert fields == [
        "launcher.docker.variant",
        "launcher.docker.ca_bundle",
        "launcher.docker.wheelhouse",
    ]


def test_the_nvidia_runtime_check() -> None:
    plain = {"Runtimes": {"runc": {}, "io.containerd.runc.v2": {}}, "DefaultRuntime": "runc"}
    problem = host.nvidia_runtime_problem(plain, hook_on_path=False)
    assert "no NVIDIA container runtime" in problem and "io.containerd.runc.v2, runc" in problem
    nvidia = {"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}
    assert host.nvidia_runtime_problem(nvidia, hook_on_path=False) == ""
    assert host.nvidia_runtime_problem(plain, hook_on_path=True) == ""


def test_container_options_isolate_the_trial(tmp_path: Path) -> None:
    cfg = docker_cfg(gpus="all")
    cfg.launcher.memory_limit_mb = 2048
    opts = launcher.container_options(cfg, tmp_path, "host/1/2.00")
    assert opts["network_mode"] == "none"
    assert opts["ipc_mode"] == "private" and opts["shm_size"] == "64m"  # not the host's
    assert opts["auto_remove"] is True and opts["init"] is True
    assert not opts["user"].startswith("0:")
    assert all("docker.sock" not in src for src in opts["volumes"])
    assert opts["volumes"] == {str(tmp_path): {"bind": "/trial", "mode": "rw"}}
    assert {(u["Name"], u["Soft"], u["Hard"]) for u in opts["ulimits"]} == {
        (u["Name"], u["Soft"], u["Hard"]) for u in host.ulimits()
    }
    assert opts["mem_limit"] == opts["memswap_limit"] == "2048m"
    assert opts["labels"] == {"bench.trial.loop": str(tmp_path), "bench.owner": "host/1/2.00"}
    assert opts["device_requests"][0]["Count"] == -1
    assert opts["environment"]["BENCH_HEARTBEAT"] == "/trial/.heartbeat"


def test_a_search_is_kept_across_the_containers_of_one_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tuning=best: each container's bench cache is a host folder per framework, version
    and variant, so the repeats of a configuration reuse its search; other trials get none."""
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    cfg = docker_cfg()
    cfg.tuning.name = "best"
    opts = launcher.container_options(cfg, tmp_path / "t1", "host/1/2.00")
    again = launcher.container_options(cfg, tmp_path / "t2", "host/1/2.00")
    (folder,) = (src for src, v in opts["volumes"].items() if v["bind"] == launcher.CACHE_MOUNT)
    assert folder in again["volumes"] and opts["environment"]["BENCH_CACHE"] == "/bench-cache"
    assert Path(folder).parent == tmp_path / "cache" / "containers"
    assert Path(folder).stat().st_mode & 0o077 == 0 and Path(folder).stat().st_uid == int(
        opts["user"].split(":")[0]
    )
    cfg.framework.name = "tf"
    other = launcher.container_options(cfg, tmp_path / "t3", "host/1/2.00")
    assert folder not in other["volumes"]  # another image: another folder
    cfg.tuning.name = "default"
    plain = launcher.container_options(cfg, tmp_path / "t4", "host/1/2.00")
    assert "BENCH_CACHE" not in plain["environment"] and len(plain["volumes"]) == 1


def test_recommended_limits_are_granted_as_far_as_the_engine_can() -> None:
    assert host.RECOMMENDED_ULIMITS == {"memlock": -1, "stack": 64 * 2**20}
    assert host.granted(-1, hard=8 * 2**20, can_raise=True) == -1
    assert host.granted(-1, hard=-1, can_raise=False) == -1
    assert host.granted(-1, hard=8 * 2**20, can_raise=False) == 8 * 2**20
    assert host.granted(64 * 2**20, hard=8 * 2**20, can_raise=False) == 8 * 2**20
    assert host.granted(64 * 2**20, hard=-1, can_raise=False) == 64 * 2**20


def test_owner_labels_tell_live_from_gone_processes() -> None:
    assert owner_alive(owner_label())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    label = owner_label(gone.pid)
    gone.wait()
    assert not owner_alive(label)


def test_content_hash_follows_the_inputs(tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    source.write_text("x = 1\n")
    args = {"BASE_IMAGE": "sha256:" + "1" * 64, "VARIANT": "cpu"}
    first = images.content_hash({"bench/a.py": source}, args)
    assert images.content_hash({"bench/a.py": source}, dict(args)) == first
    assert images.content_hash({"bench/a.py": source}, {**args, "VARIANT": "cuda"}) != first
    labelled = images.content_hash({"bench/a.py": source}, args, {"bench.version": ""})
    assert labelled != first
    assert images.content_hash({"bench/a.py": source}, args, {"bench.version": "2.13"}) != labelled
    assert images.content_hash({"bench/b.py": source}, args) != first
    time.sleep(0.01)
    source.write_text("x = 2\n")
    assert images.content_hash({"bench/a.py": source}, args) != first


def test_context_takes_the_framework_wheels_only(tmp_path: Path) -> None:
    for name in (
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "leftpad-1.0-py3-none-any.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    cpu = images.context_files(images.BuildSpec("torch", "cpu", wheelhouse=str(tmp_path)))
    wheels = sorted(k for k in cpu if k.startswith("docker/wheelhouse/"))
    assert wheels == ["docker/wheelhouse/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert "bench/trial/worker.py" in cpu and "docker/torch.Dockerfile" in cpu
    assert not any("__pycache__" in k for k in cpu)
    cuda = images.context_files(images.BuildSpec("torch", "cuda", wheelhouse=str(tmp_path)))
    assert not any(k.startswith("docker/wheelhouse/") for k in cuda)
    tf = images.context_files(images.BuildSpec("tf", "cpu", wheelhouse=str(tmp_path)))
    assert not any(k.startswith("docker/wheelhouse/") for k in tf)


def _pins(path: Path) -> dict[str, str]:
    return {name: v.split("+")[0] for name, v in environments.lock_pins(path).items()}


@pytest.mark.parametrize("name", ["torch", "tf", "mlflow"])
def test_image_pins_match_the_host_lock(name: str) -> None:
    lock = _pins(REPO / "requirements.lock")
    pins = _pins(REPO / "docker" / f"constraints-{name}.txt")
    framework = {"torch": "torch", "tf": "tensorflow", "mlflow": "mlflow"}[name]
    assert pins[framework] == lock[framework]
    differ = {k: (v, lock[k]) for k, v in pins.items() if k in lock and lock[k] != v}
    assert differ == {}


def test_default_bases_agree_across_dockerfiles_compose_and_bench() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    for name in WITH_IMAGE:
        dockerfile = (REPO / "docker" / f"{name}.Dockerfile").read_text()
        arg = re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, re.M)
        assert arg is not None
        assert arg.group(1) == images.DEFAULT_BASES[(name, "cuda")]
        args = compose[name]["build"]["args"]
        default = images.DEFAULT_BASES[(name, "cuda")]
        assert args["BASE_IMAGE"] == f"${{BENCH_{name.upper()}_BASE:-{default}}}"
        # the build arguments of bench's own builds (bench.images.plan), and its tag
        assert set(args) == {"BASE_IMAGE", "VARIANT", "BENCH_UID"}
        assert compose[name]["image"] == f"${{BENCH_{name.upper()}_IMAGE:-bench/{name}:compose}}"
        # the labels that give bench's own builds their kind (bench images list|prune)
        labels = compose[name]["build"]["labels"]
        assert labels == {
            "bench.image": name,
            "bench.variant": "${BENCH_VARIANT:-cuda}",
            "bench.version": "",
            "bench.base_image": f"${{BENCH_{name.upper()}_BASE_NAME:-{default}}}",
        }
        own = images.Plan(images.BuildSpec(name, "cuda"), f"bench/{name}:cuda-0", {}, {}, "")
        assert set(labels) < set(own.labels) and own.labels["bench.version"] == ""


def test_a_worker_without_heartbeat_stops_itself(tmp_path: Path) -> None:
    beat = tmp_path / "beat"
    beat.touch()
    env = dict(os.environ, BENCH_HEARTBEAT=str(beat), BENCH_HEARTBEAT_TIMEOUT_S="2")
    code = (
        "from bench.trial.runtime import heartbeat; heartbeat.watch_from_env(); "
        "import time; time.sleep(30)"
    )
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=20)
    assert proc.returncode == heartbeat.EXIT_NO_HEARTBEAT
    assert time.monotonic() - started < 10
    assert b"no heartbeat from the host" in proc.stderr


@pytest.mark.slow
def test_a_kept_heartbeat_keeps_the_worker(tmp_path: Path) -> None:
    beat = heartbeat.Beat(tmp_path / "beat")
    env = dict(os.environ, BENCH_HEARTBEAT=str(beat.path), BENCH_HEARTBEAT_TIMEOUT_S="2")
    code = (
        "from bench.trial.runtime import heartbeat; heartbeat.watch_from_env(); "
        "import time; time.sleep(5)"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=20)
    finally:
        beat.stop()
    assert proc.returncode == 0
    assert not beat.path.exists()


def test_reproduce_pins_the_logged_config_to_its_image() -> None:
    from bench.cli.reproduce import pinned_config
    from bench.core.config import to_dict

    logged = docker_cfg(base_image="bench-base:bookworm", ca_bundle="/x.pem", wheelhouse="/w")
    logged.batch_size, logged.seed = 7, 3
    cfg = pinned_config(to_dict(logged), "sha256:" + "a" * 64, "sqlite:///r.db", "exp")
    assert (cfg.batch_size, cfg.seed, cfg.framework.name) == (7, 3, "torch")
    d = cfg.launcher.docker
    assert (d.image, d.base_image, d.ca_bundle, d.wheelhouse) == ("sha256:" + "a" * 64, "", "", "")
    assert cfg.force and (cfg.tracking.uri, cfg.tracking.experiment) == ("sqlite:///r.db", "exp")


def test_reproduce_prints_both_results_side_by_side() -> None:
    from bench.cli.reproduce import side_by_side
    from bench.tracking import RunRecord

    tags = {"bench.status": "ok", "mlflow.docker.image.id": "sha256:" + "b" * 64}
    original = RunRecord("1" * 32, "t", 0, {}, tags, {"trial_samples_per_s": 100.0})
    again = RunRecord("2" * 32, "t", 0, {}, tags, {"trial_samples_per_s": 90.0, "final_loss": 2})
    lines = side_by_side(original, again).splitlines()
    assert lines[0].split() == ["original", "11111111", "reproduction", "22222222", "change"]
    assert "bbbbbbbbbbbb" in lines[2] and lines[2].endswith("same")
    (rate,) = [line for line in lines if line.startswith("trial_samples_per_s")]
    assert rate.split() == ["trial_samples_per_s", "100", "90", "-10.0%"]
    (loss,) = [line for line in lines if line.startswith("final_loss")]
    assert loss.split() == ["final_loss", "-", "2"]


def test_a_base_image_that_cannot_be_had_is_refused_before_any_trial() -> None:
    """Issue 29, finding 12: a missing base was found only when the first trial's build
    started (recorded error); now the checks before the sweep name it, once per base."""
    import docker

    from bench.launchers import docker_host

    class Images:
        asked: list[str] = []

        def get(self, ref: str) -> object:
            self.asked.append(ref)
            if ref != "here:1":
                raise docker.errors.ImageNotFound("no such image")
            return object()

        def get_registry_data(self, ref: str) -> object:
            raise docker.errors.APIError("registry unreachable")

    class Client:
        images = Images()

    docker_host._bases.clear()
    assert docker_host.base_problem(Client(), "here:1") == ""
    said = docker_host.base_problem(Client(), "nowhere:1")
    assert said.startswith("launcher.docker.base_image: 'nowhere:1' is not in the local engine")
    assert "build_base_image.sh" in said
    docker_host.base_problem(Client(), "nowhere:1")
    assert Images.asked == ["here:1", "nowhere:1"]  # asked once per base
    docker_host._bases.clear()


@pytest.mark.parametrize("base", ["bad name!!", "UPPER/Case:tag", "../../etc"])
def test_bench_images_build_refuses_a_bad_base_image_in_one_line(
    base: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51: the Docker SDK's traceback, before; the engine is never asked now."""
    from bench.cli import images as images_cli

    monkeypatch.setattr(images_cli, "ensure", lambda spec: pytest.fail("the engine was asked"))
    assert images_cli.main(["build", "torch", "--base-image", base]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bench images: --base-image:") and "not an image reference" in line
