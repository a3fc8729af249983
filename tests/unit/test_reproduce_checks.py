"""``bench reproduce`` of a crafted run (issue 51): every value it acts on is checked before
anything is written, installed or run; the run's lock is installed only as hashed wheels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cli import reproduce
from bench.core import paths
from bench.core.config import BenchConfig, to_dict
from bench.envs import environments
from bench.tracking import RunRecord

HASH = "--hash=sha256:" + "a" * 64
GOOD_LOCK = f"# made by uv\ntorch==2.5.1 \\\n    {HASH}\n    # via -r x.in\nnumpy==2.1.0 {HASH}\n"


def crafted(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    version: str,
    lock: str,
    tags: dict[str, str] | None = None,
    **config: Any,
) -> dict[str, Any]:
    """A run whose config asks for ``version`` under launcher=process and whose lock.txt
    is ``lock``; what was downloaded and installed is recorded in the returned dict."""
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache" / "envs"))
    cfg = to_dict(BenchConfig())
    cfg["framework"]["version"] = version
    cfg["launcher"]["name"] = "process"
    cfg.update(config)
    run_tags = {"bench.launcher": "process", "bench.lock_sha": "0" * 16, **(tags or {})}
    original = RunRecord("r" * 32, "t", 0, {}, run_tags, {})
    seen: dict[str, Any] = {"downloaded": 0, "ensured": []}

    def download(uri: str, run_id: str, name: str, directory: Path) -> Path:
        seen["downloaded"] += 1
        path = directory / name
        path.write_text(lock)
        return path

    def ensure(*args: Any, **kwargs: Any) -> None:
        seen["ensured"].append(kwargs)

    monkeypatch.setattr(reproduce.tracking, "load_trial", lambda *a: (original, cfg, "e"))
    monkeypatch.setattr(reproduce.tracking, "download_artifact", download)
    monkeypatch.setattr(environments, "ensure", ensure)
    return seen


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_version_with_path_segments_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    seen = crafted(monkeypatch, tmp_path, "../../../escaped", GOOD_LOCK)
    assert reproduce.main(["r" * 32, "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert "framework.version" in capsys.readouterr().err
    assert seen["downloaded"] == 0 and not seen["ensured"]
    assert not files_under(tmp_path), files_under(tmp_path)


def test_a_value_of_the_wrong_type_is_refused_before_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    seen = crafted(monkeypatch, tmp_path, "2.5.1", GOOD_LOCK, batch_size="4; rm -rf /")
    assert reproduce.main(["r" * 32, "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert "batch_size" in capsys.readouterr().err
    assert seen["downloaded"] == 0 and not files_under(tmp_path)


@pytest.mark.parametrize(
    ("tag", "value"),
    [("mlflow.docker.image.id", "bench-torch:latest; id"), ("bench.lock_sha", "../x")],
)
def test_a_crafted_tag_is_refused(
    tag: str, value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    seen = crafted(monkeypatch, tmp_path, "2.5.1", GOOD_LOCK, tags={tag: value})
    assert reproduce.main(["r" * 32, "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert tag in capsys.readouterr().err
    assert seen["downloaded"] == 0 and not files_under(tmp_path)


@pytest.mark.parametrize(
    "lock",
    [
        "evil==1.0\n",  # no hash: an sdist of any content
        f"evil @ https://example.org/evil-1.0.tar.gz {HASH}\n",
        f"--index-url https://example.org/simple\ntorch==2.5.1 {HASH}\n",
        f"-e ./evil\ntorch==2.5.1 {HASH}\n",
        f"./evil.tar.gz {HASH}\n",
        "# nothing\n",
    ],
)
def test_a_lock_that_is_not_hashed_requirements_is_neither_written_nor_installed(
    lock: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    seen = crafted(monkeypatch, tmp_path, "2.5.1", lock)
    monkeypatch.setattr(reproduce, "validate", lambda cfg: None)  # no package index here
    assert reproduce.main(["r" * 32, "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert "lock.txt is refused" in capsys.readouterr().err
    assert not seen["ensured"] and not files_under(tmp_path / "cache")


def test_a_hashed_lock_is_installed_as_wheels_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = crafted(monkeypatch, tmp_path, "2.5.1", GOOD_LOCK)
    monkeypatch.setattr(reproduce, "validate", lambda cfg: None)
    cfg = reproduce.same_config(reproduce.tracking.load_trial("", "")[1], "sqlite://x", "e")
    original = reproduce.tracking.load_trial("", "")[0]
    assert reproduce._same_software(original, cfg, "sqlite:///x") == ""
    assert seen["ensured"] == [{"extra": "", "wheels_only": True}]
    assert environments.env_for("torch", "2.5.1").lock.read_text() == GOOD_LOCK


def test_uv_is_told_to_build_nothing_for_wheels_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    env = environments.env_for("torch", "2.5.1")
    env.root.mkdir(parents=True)
    env.lock.write_text(GOOD_LOCK)
    env.python.parent.mkdir(parents=True)
    env.python.touch()
    calls: list[tuple[str, ...]] = []

    class Done:
        returncode, stderr = 1, "stop here"

    def uv(*args: str) -> Done:
        calls.append(args)
        return Done()

    monkeypatch.setattr(environments, "run_uv", uv)
    with pytest.raises(environments.EnvironmentError_):
        environments.ensure("torch", "2.5.1", say=False, wheels_only=True)
    sync = next(c for c in calls if c[:2] == ("pip", "sync"))
    assert "--no-build" in sync and "--require-hashes" in sync


@pytest.mark.parametrize("version", ["../x", "2.5.1/../../x", "2.5", "1.0rc1"])
def test_env_for_takes_only_releases(version: str) -> None:
    if version in ("2.5", "1.0rc1"):
        assert environments.env_for("torch", version).root.name == f"torch-{version}"
    else:
        with pytest.raises(ValueError):
            environments.env_for("torch", version)


def test_a_cache_group_writable_by_the_users_own_private_group_is_theirs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Debian's and Ubuntu's user private groups with umask 002 make every new folder
    group-writable by a group of the user alone: bench refused its own cache there."""
    import os

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "bench" / "envs"))
    env = environments.env_for("torch", "2.5.1")
    (env.root / "venv" / "bin").mkdir(parents=True)
    for folder in (env.root.parent, env.root, env.root / "venv"):
        os.chmod(folder, 0o775)
    monkeypatch.setattr(paths, "_private_group", lambda gid: gid == os.getgid())
    assert environments.not_own(env) == ""
    monkeypatch.setattr(paths, "_private_group", lambda gid: False)  # a group others are in
    assert "can be written by others (mode 775)" in environments.not_own(env)


@pytest.mark.parametrize(
    "what", ["group-writable cache", "world-writable cache", "other user's env", "linked venv"]
)
def test_an_environment_others_can_write_is_neither_made_nor_run(
    what: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 51: an environment planted in a cache folder another user can write was run
    for framework.version=...; now ensure() refuses, naming the folder, before uv runs."""
    import os

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "bench" / "envs"))
    env = environments.env_for("torch", "2.5.1")
    (env.root / "venv" / "bin").mkdir(parents=True)
    if what == "group-writable cache":  # by a group other users are in
        os.chmod(env.root.parent, 0o775)
        monkeypatch.setattr(paths, "_private_group", lambda gid: False)
    elif what == "world-writable cache":
        os.chmod(env.root.parent, 0o777)
    elif what == "other user's env":
        if os.getuid() != 0:
            pytest.skip("needs root to give a folder away")
        os.chown(env.root, 65534, 65534)
    else:
        os.rmdir(env.root / "venv" / "bin")
        os.rmdir(env.root / "venv")
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", env.root / "venv")
    monkeypatch.setattr(environments, "run_uv", lambda *a: pytest.fail("uv ran"))
    with pytest.raises(environments.EnvironmentError_, match="bench will not use"):
        environments.ensure("torch", "2.5.1", say=False)
