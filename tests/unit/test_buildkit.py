"""Which Docker CLI bench builds with (bench.images.buildkit): stand-in ``docker`` commands on PATH
that answer as a CLI with the buildx plugin, a CLI of 23+ without it (which cannot build
with BuildKit) and Debian's 20.10 (BuildKit built in) would."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from bench.images import buildkit


def fake_docker(folder: Path, version: str, buildx: bool) -> Path:
    folder.mkdir(parents=True)
    script = folder / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = buildx ]; then {"echo github.com/docker/buildx v0.19.3; exit 0" if buildx else "echo unknown command: docker buildx >&2; exit 1"}; fi\n'  # noqa: E501
        f'if [ "$1" = --version ]; then echo "Docker version {version}, build x"; exit 0; fi\n'
        f'echo "$@" > {folder}/called; echo "#1 DONE"; exit 0\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.fixture(autouse=True)
def fresh() -> None:
    buildkit._found.clear()


def test_a_newer_cli_without_buildx_does_not_hide_debians(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = fake_docker(tmp_path / "local", "28.2.2", buildx=False)
    old = fake_docker(tmp_path / "usr", "20.10.24+dfsg1", buildx=False)
    monkeypatch.setenv("PATH", f"{new}:{old}")
    b = buildkit.builder()
    assert b.argv == (str(old / "docker"), "build")
    assert dict(b.env) == {"DOCKER_BUILDKIT": "1"}
    lines = buildkit.build(tmp_path, "x.Dockerfile", "bench/x:cpu-1", {"A": "1"},
                           {"bench.image": "x"}, ca_bundle="/etc/ca.pem")  # fmt: skip
    assert lines == ["#1 DONE"]
    called = (old / "called").read_text().split()
    assert called[:2] == ["build", "--progress=plain"]
    assert ["--build-arg", "A=1"] == called[called.index("--build-arg") :][:2]
    assert "id=ca,src=/etc/ca.pem" in called and called[-1] == str(tmp_path)


def test_buildx_is_preferred_and_loads_into_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path / "ce", "29.0.1", buildx=True)))
    assert buildkit.builder().argv[1:] == ("buildx", "build", "--load")


def test_no_cli_that_can_use_buildkit_is_named_with_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_docker(tmp_path / "local", "28.2.2", buildx=False)))
    with pytest.raises(buildkit.BuildKitError) as found:
        buildkit.builder()
    why = str(found.value)
    assert "client 28.x, no buildx plugin" in why and "docker-buildx" in why
    buildkit._found.clear()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(buildkit.BuildKitError, match="no docker command on PATH"):
        buildkit.builder()


def test_a_failed_build_carries_the_tail_of_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = fake_docker(tmp_path / "usr", "20.10.24", buildx=False)
    script = folder / "docker"
    script.write_text(
        script.read_text().replace('echo "#1 DONE"; exit 0', 'echo "#5 ERROR: pip failed"; exit 1')
    )  # noqa: E501
    monkeypatch.setenv("PATH", str(folder))
    with pytest.raises(buildkit.BuildKitError, match=r"(?s)exited 1:\n#5 ERROR: pip failed"):
        buildkit.build(tmp_path, "x.Dockerfile", "t", {}, {})
