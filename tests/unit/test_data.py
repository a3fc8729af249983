from __future__ import annotations

import gzip
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError
from bench.trial import data
from tests.cifar_fixture import write_cifar_archive


def cfg_for(name: str, root: Path, **kw: object) -> BenchConfig:
    cfg = BenchConfig(num_classes=100 if name == "cifar100" else 10, **kw)  # type: ignore[arg-type]
    cfg.data.name, cfg.data.root = name, str(root)
    return cfg


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_reader_reads_the_real_format(tmp_path: Path, name: str) -> None:
    path = write_cifar_archive(tmp_path, name, per_member=20)
    cfg = cfg_for(name, tmp_path)
    validate(cfg)
    loaded = data.load(cfg)
    assert isinstance(loaded, data.LabelledData)
    train_members = len(data.CIFAR[name].train_members)
    assert loaded.train_x.shape == (20 * train_members, 32, 32, 3)
    assert loaded.test_x.shape == (20, 32, 32, 3) and loaded.train_x.dtype == np.uint8
    # Pixel (row 0, col 0) of the first image is the first R, G and B byte of its record.
    with tarfile.open(path) as tar:
        handle = tar.extractfile(f"{data.CIFAR[name].folder}/{data.CIFAR[name].train_members[0]}")
        assert handle is not None
        raw = pickle.load(handle, encoding="bytes")[b"data"][0]
    assert list(loaded.train_x[0, 0, 0]) == [raw[0], raw[1024], raw[2048]]


def test_resized_to_the_model_input(tmp_path: Path) -> None:
    write_cifar_archive(tmp_path, "cifar10", per_member=4)
    loaded = data.load(cfg_for("cifar10", tmp_path, image_size=64))
    assert isinstance(loaded, data.LabelledData)
    assert loaded.train_x.shape[1:] == (64, 64, 3)


def test_missing_archive_names_the_field_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validate(cfg_for("cifar10", tmp_path))
    (problem,) = err.value.problems
    assert problem.startswith("data.root: cifar-10-python.tar.gz not found")
    assert "bench data download cifar10" in problem


def test_the_printed_command_quotes_the_users_path(tmp_path: Path) -> None:
    """A hint is a command to copy and paste: the user's path in it is shell-quoted, so
    that ``$(...)`` in it is a path, not a command."""
    import shlex

    root = tmp_path / "a b $(touch pwned)"
    with pytest.raises(ConfigError) as err:
        validate(cfg_for("cifar10", root))
    (problem,) = err.value.problems
    command = problem.split("download it with: ", 1)[1]
    assert shlex.split(command)[-2:] == ["--root", str(root)]
    assert f"--root {shlex.quote(str(root))}" in command


def test_corrupt_archive_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not a tarball at all")
    with pytest.raises(ConfigError, match=r"data.root: .* is not a readable .tar.gz archive"):
        validate(cfg_for("cifar10", tmp_path))


def test_archive_missing_members_is_refused(tmp_path: Path) -> None:
    with (
        gzip.open(tmp_path / "cifar-100-python.tar.gz", "wb") as gz,
        tarfile.open(fileobj=gz, mode="w"),
    ):
        pass
    with pytest.raises(ConfigError, match="lacks cifar-100-python/train"):
        validate(cfg_for("cifar100", tmp_path))


class _Payload:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (self.marker, "w")


def test_an_archive_of_unknown_sum_is_refused_before_anything_is_unpickled(
    tmp_path: Path,
) -> None:
    """A crafted archive with every member the reader expects, each a pickle whose loading
    would create a marker file: refused by its MD5 sum, by the checks before a sweep and by
    the trial's reader, naming data.root and the sum expected; nothing in it runs."""
    import io

    marker = tmp_path / "ran"
    spec = data.CIFAR["cifar10"]
    root = tmp_path / "data"
    root.mkdir()
    with tarfile.open(root / spec.archive, "w:gz") as tar:
        for member in (*spec.train_members, spec.test_member):
            blob = pickle.dumps(_Payload(marker), protocol=2)
            info = tarfile.TarInfo(f"{spec.folder}/{member}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    cfg = cfg_for("cifar10", root)
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    (problem,) = err.value.problems
    assert problem.startswith("data.root: ") and f"expected {spec.md5}" in problem
    with pytest.raises(data.DataError, match=rf"^data.root: .* expected {spec.md5}"):
        data.load(cfg)
    assert data.cifar_present(10, str(root)) == ""  # a preset trains on synthetic data
    assert not marker.exists()


def test_an_archive_changed_in_place_after_its_check_is_read_as_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51: the reader checked the sum on an open file, then read it again from the
    start; an archive rewritten in place between the two (same inode) had its pickle run.
    Now it reads the private copy it checked."""
    import io

    path = write_cifar_archive(tmp_path, "cifar10", per_member=2)
    marker = tmp_path / "ran"
    spec = data.CIFAR["cifar10"]
    crafted = io.BytesIO()
    with tarfile.open(fileobj=crafted, mode="w:gz") as tar:
        for member in (*spec.train_members, spec.test_member):
            blob = pickle.dumps(_Payload(marker), protocol=2)
            info = tarfile.TarInfo(f"{spec.folder}/{member}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    real = data.md5_of

    def md5_then_swap(f: io.BufferedIOBase) -> str:
        digest = real(f)
        with open(path, "r+b") as same_inode:  # the swap, right after the check
            same_inode.write(crafted.getvalue())
            same_inode.truncate()
        return digest

    monkeypatch.setattr(data, "md5_of", md5_then_swap)
    loaded = data.load(cfg_for("cifar10", tmp_path))
    assert isinstance(loaded, data.LabelledData) and loaded.train_x.shape[0] == 10
    assert not marker.exists()


def test_classes_must_fit_the_data(tmp_path: Path) -> None:
    write_cifar_archive(tmp_path, "cifar100", per_member=2)
    cfg = cfg_for("cifar100", tmp_path)
    cfg.num_classes = 10
    with pytest.raises(ConfigError, match="num_classes: data=cifar100 has 100 classes, got 10"):
        validate(cfg)


def test_digits_split_is_stratified_and_resized() -> None:
    cfg = BenchConfig(image_size=32)
    cfg.data.name = "digits"
    loaded = data.load(cfg)
    assert isinstance(loaded, data.LabelledData)
    assert loaded.train_x.shape[1:] == (32, 32, 3)
    assert len(loaded.test_x) == pytest.approx(0.2 * 1797, abs=2)
    assert set(np.unique(loaded.test_y)) == set(range(10))


def test_resize_keeps_a_constant_image_constant() -> None:
    images = np.full((2, 8, 8, 3), 77, dtype=np.uint8)
    assert (data.resize(images, 20) == 77).all()
