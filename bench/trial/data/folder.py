"""``data=folder data.root=DIR``: your own images, one sub-folder per class (JPEG or PNG),
decoded and augmented by each framework's own input pipeline (docs/your-data.md).

The host side (the trial's process, before any timing) only lists the files: the classes
are the sub-folders in name order, every file is opened whole once (a corrupt one is
counted, skipped and said in one line, never a crash mid-trial), and a stratified 20% of
each class is held out by the seed.  Each framework then reads the files itself: torch in
``DataLoader`` worker processes (PIL decodes, ``torch.nn.functional.interpolate`` resizes),
tf in ``tf.data`` (``tf.io.decode_jpeg`` with the accurate IDCT, as PIL's, or
``decode_png``; ``tf.image.resize``, a parallel map of
``data.workers`` calls and a prefetch), jax in bench's loader (PIL and numpy in
``data.workers`` threads, two batches ahead; JAX has no input pipeline of its own).

Every pipeline does the same arithmetic: decode to RGB, resize to ``image_size`` square
(bilinear, half-pixel centres, no antialiasing) when ``data.resize`` is on, scale to 0..1,
pad by :data:`PAD` zeros and crop ``image_size`` back at an offset, flip left-right, and
normalize by the training set's channel means and deviations.  The offsets, flips and the
order of each epoch come from :func:`plan` (numpy, the seed and the epoch): the same for
every framework, so the pipelines hand the model the same tensors for the same seed
(tests/unit/test_folder_data.py, to 1e-4: float rounding).  The held-out split is
neither cropped nor flipped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from bench.core.config import BenchConfig

EXTENSIONS = (".jpg", ".jpeg", ".png")
PAD = 4  # the random crop's zero padding, in pixels of the resized image
HOLDOUT = 0.2  # the held-out share of every class
STATS_SAMPLE = 256  # training images the channel statistics are measured on


@dataclass
class ImageFiles:
    """A folder of images, listed and split; the pixels stay in the files."""

    name: str
    root: str
    classes: list[str]
    train_paths: list[str]
    train_y: np.ndarray  # (N,) int64
    test_paths: list[str]
    test_y: np.ndarray
    num_classes: int
    size: int  # every image reaches the model size x size
    resize: bool
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    skipped: int  # corrupt files left out

    def steps_per_pass(self, batch_size: int) -> int:
        return len(self.train_paths) // batch_size


def scan(root: str) -> tuple[list[str], list[str], list[int]]:
    """The classes (sub-folders, sorted), and every image file with its class index."""
    base = Path(root).expanduser()
    classes = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
    paths: list[str] = []
    labels: list[int] = []
    for index, name in enumerate(classes):
        for f in sorted((base / name).iterdir()):
            if f.suffix.lower() in EXTENSIONS and f.is_file():
                paths.append(str(f))
                labels.append(index)
    return classes, paths, labels


def _size_of(path: str) -> tuple[int, int] | None:
    """(width, height) from the file's header, None where it cannot be read."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.size
    except Exception:  # noqa: BLE001 - any unreadable file is skipped, counted
        return None


def check(cfg: BenchConfig) -> list[str]:
    """Problems with ``data.root`` as a folder of classes, found from the files' headers."""
    root = Path(cfg.data.root).expanduser()
    if not root.is_dir():
        return [f"data.root: {str(root)!r} is not a folder (data=folder: one sub-folder per class)"]
    classes, paths, labels = scan(str(root))
    if len(classes) < 2:
        return [
            f"data.root: {root} has {len(classes)} class folder(s); data=folder needs 2 or more"
        ]
    if not paths:
        return [f"data.root: no JPEG or PNG images in the class folders of {root}"]
    sizes = {s for s in map(_size_of, paths) if s is not None}
    if not sizes:
        return [f"data.root: none of the {len(paths)} images in {root} can be read"]
    problems = []
    if cfg.num_classes != len(classes):
        problems.append(
            f"num_classes: data.root {root} has {len(classes)} classes, got {cfg.num_classes}"
        )
    square = {(cfg.image_size, cfg.image_size)}
    if not cfg.data.resize and sizes != square:
        shown = ", ".join(f"{w}x{h}" for w, h in sorted(sizes)[:4])
        problems.append(
            f"data.resize: the images in {root} are {shown}, not {cfg.image_size}x"
            f"{cfg.image_size} (image_size); set data.resize=true to resize them"
        )
    counts = np.bincount(np.asarray(labels), minlength=len(classes))
    if int(np.floor(HOLDOUT * len(paths))) < len(classes) or counts.min() < 2:
        problems.append(
            f"data.root: {len(paths)} images in {len(classes)} classes (the smallest has "
            f"{counts.min()}) leave a held-out split of {HOLDOUT:.0%} empty for some class; "
            "add images"
        )
    return problems


def decode(path: str, size: int, resize: bool) -> np.ndarray:
    """One file as (size, size, 3) float32 on 0..1 (PIL decodes; bilinear, half-pixel
    centres): bench's loader (jax) and the host's statistics."""
    from PIL import Image

    with Image.open(path) as image:
        rgb = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    return resize_bilinear(rgb, size) if resize else rgb


def resize_bilinear(image: np.ndarray, size: int) -> np.ndarray:
    """(H, W, C) float to (size, size, C), bilinear with half-pixel centres, no antialias:
    the arithmetic of torch's ``interpolate(align_corners=False)`` and ``tf.image.resize``."""
    h, w = image.shape[:2]
    if (h, w) == (size, size):
        return image

    def axis(old: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.maximum((np.arange(size) + 0.5) * old / size - 0.5, 0)
        lo = np.minimum(np.floor(pos).astype(np.int64), old - 1)
        hi = np.minimum(lo + 1, old - 1)
        return lo, hi, (pos - lo).astype(np.float32)

    y0, y1, wy = axis(h)
    x0, x1, wx = axis(w)
    top = image[y0] * (1 - wy)[:, None, None] + image[y1] * wy[:, None, None]
    return top[:, x0] * (1 - wx)[None, :, None] + top[:, x1] * wx[None, :, None]


def plan(seed: int, epoch: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Epoch ``epoch``'s order of the ``n`` training images and each one's crop offsets
    (dy, dx in 0..2*PAD) and flip: the same numbers for every framework's pipeline."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(n)
    dy, dx = rng.integers(0, 2 * PAD + 1, size=(2, n))
    flip = rng.random(n) < 0.5
    return order, dy[order], dx[order], flip[order]


def augment(image: np.ndarray, dy: int, dx: int, flip: bool) -> np.ndarray:
    """Pad by PAD zeros, crop back at (dy, dx), flip left-right: numpy's version."""
    size = image.shape[0]
    padded = np.pad(image, ((PAD, PAD), (PAD, PAD), (0, 0)))
    out = padded[dy : dy + size, dx : dx + size]
    return out[:, ::-1] if flip else out


def _sample(files: ImageFiles, path: str, dy: int, dx: int, flip: bool) -> np.ndarray:
    image = augment(decode(path, files.size, files.resize), dy, dx, flip)
    mean, std = np.asarray(files.mean, np.float32), np.asarray(files.std, np.float32)
    return ((image - mean) / std).astype(np.float32)


def batches(
    files: ImageFiles, seed: int, batch_size: int, train: bool, workers: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """bench's own loader (jax's): (images NHWC float32, labels) batches of the training
    files, pass after pass in :func:`plan`'s order, or of the held-out files once, in order;
    ``workers`` threads decode (PIL and numpy release the GIL) two batches ahead."""
    from concurrent.futures import ThreadPoolExecutor

    paths, y = (files.train_paths, files.train_y) if train else (files.test_paths, files.test_y)
    n = len(paths)

    def items() -> Iterator[tuple[np.ndarray, ...]]:
        epoch = 0
        while True:
            if train:
                order, dy, dx, flip = plan(seed, epoch, n)
                stop = n - n % batch_size
            else:
                order, dy, dx = np.arange(n), np.full(n, PAD), np.full(n, PAD)
                flip, stop = np.zeros(n, bool), n
            for start in range(0, stop, batch_size):
                part = slice(start, start + batch_size)
                yield order[part], dy[part], dx[part], flip[part]
            if not train:
                return
            epoch += 1

    def one(item: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        index, dy, dx, flip = item
        picks = zip(index.tolist(), dy.tolist(), dx.tolist(), flip.tolist(), strict=True)
        images = [_sample(files, paths[i], a, b, f) for i, a, b, f in picks]
        return np.stack(images), y[index]

    if workers < 1:
        yield from map(one, items())
        return
    with ThreadPoolExecutor(workers) as pool:
        ahead: list[Any] = []
        for item in items():
            ahead.append(pool.submit(one, item))
            if len(ahead) > 2:
                yield ahead.pop(0).result()
        for future in ahead:
            yield future.result()


def load(cfg: BenchConfig) -> ImageFiles:
    """List and split the folder; every file opened whole once (corrupt ones skipped, counted
    in one line); the channel statistics of up to STATS_SAMPLE training images."""
    from PIL import Image
    from sklearn.model_selection import train_test_split

    classes, paths, labels = scan(cfg.data.root)
    good, good_y, bad = [], [], 0
    for path, label in zip(paths, labels, strict=True):
        try:
            with Image.open(path) as image:
                image.load()
        except Exception:  # noqa: BLE001 - a corrupt file is a count, not a crash
            bad += 1
            continue
        good.append(path)
        good_y.append(label)
    if bad:
        print(
            f"bench: data.root: {bad} of {len(paths)} images in {cfg.data.root} could not be "
            "decoded and were skipped",
            file=sys.stderr,
        )
    y = np.asarray(good_y, dtype=np.int64)
    train_p, test_p, train_y, test_y = train_test_split(
        good, y, test_size=HOLDOUT, random_state=cfg.seed, stratify=y
    )
    sample = np.random.default_rng(cfg.seed).permutation(len(train_p))[:STATS_SAMPLE]
    pixels = np.stack([decode(train_p[i], cfg.image_size, cfg.data.resize) for i in sample])
    mean = pixels.reshape(-1, 3).mean(axis=0)
    std = pixels.reshape(-1, 3).std(axis=0) + 1e-6
    return ImageFiles(
        "folder",
        cfg.data.root,
        classes,
        list(train_p),
        np.asarray(train_y, np.int64),
        list(test_p),
        np.asarray(test_y, np.int64),
        len(classes),
        cfg.image_size,
        cfg.data.resize,
        (float(mean[0]), float(mean[1]), float(mean[2])),
        (float(std[0]), float(std[1]), float(std[2])),
        bad,
    )
