"""data=folder: the folder's checks before any trial, corrupt files skipped and counted, and
each framework's own pipeline handing the model the same tensors for the same seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.core.config import BenchConfig, DataConfig
from bench.trial.data import folder

SIZE = 16


def make_folder(root: Path, classes: int = 3, per_class: int = 6, corrupt: int = 0) -> Path:
    """PNG and JPEG images of two sizes, each class a colour with noise."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            h, w = (20, 24) if i % 2 else (36, 40)
            pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            pixels[..., c % 3] = 255
            suffix = ".png" if i % 3 else ".jpg"
            Image.fromarray(pixels).save(root / f"class{c}" / f"{i}{suffix}")
    for i in range(corrupt):
        (root / "class0" / f"broken{i}.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    return root


def cfg_of(root: Path, **data: object) -> BenchConfig:
    settings = {"name": "folder", "root": str(root), "resize": True, "workers": 0, **data}
    return BenchConfig(
        data=DataConfig(**settings),  # type: ignore[arg-type]
        num_classes=3,
        image_size=SIZE,
        batch_size=4,
        seed=7,
    )


def test_a_good_folder_passes(tmp_path: Path) -> None:
    assert folder.check(cfg_of(make_folder(tmp_path))) == []


@pytest.mark.parametrize(
    ("build", "change", "key"),
    [
        (lambda p: make_folder(p, classes=1), {}, "data.root"),
        (lambda p: (p / "a").mkdir() or (p / "b").mkdir() or p, {}, "data.root: no JPEG"),
        (make_folder, {"resize": False}, "data.resize"),
        (lambda p: make_folder(p, per_class=1), {}, "data.root"),
        (lambda p: p / "missing", {}, "data.root"),
    ],
)
def test_bad_folders_name_their_key(tmp_path: Path, build, change, key) -> None:  # noqa: ANN001
    problems = folder.check(cfg_of(build(tmp_path), **change))
    assert problems and problems[0].startswith(key), problems


def test_num_classes_must_match_the_folders(tmp_path: Path) -> None:
    cfg = cfg_of(make_folder(tmp_path))
    cfg.num_classes = 10
    assert folder.check(cfg)[0].startswith("num_classes: ")


def test_corrupt_files_are_counted_and_skipped_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = folder.load(cfg_of(make_folder(tmp_path, corrupt=2)))
    assert files.skipped == 2
    assert len(files.train_paths) + len(files.test_paths) == 18
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 of 20 images" in err[0]


# Float rounding only: the decoders agree (TF's JPEG decoder with the accurate IDCT, as
# PIL's; with TF's default fast one, JPEG pixels differed by up to 3 levels of 255).
TOLERANCE = 1e-4


def test_the_pipelines_hand_the_model_the_same_tensors(tmp_path: Path) -> None:
    """The first training batch and the held-out batches of torch's DataLoader, tf.data and
    bench's loader (jax), from the same seed: the same images, crops, flips and order."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from bench.trial.frameworks import tf_adapter, torch_adapter

    cfg = cfg_of(make_folder(tmp_path))
    files = folder.load(cfg)
    for train in (True, False):
        paths, y = (files.train_paths, files.train_y) if train else (files.test_paths, files.test_y)
        tx, ty = next(iter(torch_adapter._files_loader(paths, y, files, cfg, train, False)))
        fx, fy = next(iter(tf_adapter._files_pipeline(paths, y, files, cfg, train)))
        nx, ny = next(folder.batches(files, cfg.seed, cfg.batch_size, train, 0))
        torch_nhwc = tx.permute(0, 2, 3, 1).numpy()
        assert ty.numpy().tolist() == fy.numpy().tolist() == ny.tolist()
        assert np.abs(torch_nhwc - fx.numpy()).max() <= TOLERANCE
        assert np.abs(torch_nhwc - nx).max() <= TOLERANCE
    # a second pass has another order and other crops (the plan moves with the epoch)
    order0, dy0, _, _ = folder.plan(cfg.seed, 0, 12)
    order1, dy1, _, _ = folder.plan(cfg.seed, 1, 12)
    assert order0.tolist() != order1.tolist() or dy0.tolist() != dy1.tolist()
