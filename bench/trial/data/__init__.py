"""The data every framework reads, identical bytes for every framework, in the CPU's
memory.

Two kinds:

* :class:`ArrayBatches` (``data=synthetic``): a few random batches made before any timing
  and put on the device once; the frameworks cycle through them, so no input pipeline
  is measured.
* :class:`LabelledData` (``data=digits|cifar10|cifar100``): real images as uint8
  channels-last arrays with a held-out test split.  Each framework feeds them through its
  own native pipeline (torch ``DataLoader`` with workers, ``tf.data``), converting and
  normalizing per sample, optionally from an in-memory cache of the converted samples.

* :class:`SequenceBatches` (``data=synthetic`` with a sequence model: lstm, transformer,
  bert_base, deepspeech2): random token sequences or spectrograms with their targets, made
  and kept like :class:`ArrayBatches`.  Labelled image data sets do not fit these models.

Archives are checked by :func:`check` (called from config validation, before any trial
starts) and read by :func:`load` in the trial.  Both check an archive against its published
MD5 sum before anything in it is unpickled (unpickling runs whatever the pickle says: an
archive is not trusted, docs/security.md); ``BENCH_EXTRA_DATA_MD5`` (comma-separated sums)
names further archives to accept, such as the tests' small ones.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

if TYPE_CHECKING:
    from bench.core.config import BenchConfig
    from bench.trial.data.folder import ImageFiles


class DataError(ValueError):
    """A data set that is missing, corrupt or does not fit; the message names the field."""


@dataclass
class ArrayBatches:
    images: list[np.ndarray]  # each (batch, 3, size, size) float32
    labels: list[np.ndarray]  # each (batch,) int64

    def __len__(self) -> int:
        return len(self.images)


# Target of a position that takes no loss (PyTorch's default ignore_index).
IGNORE_INDEX = -100
# Share of positions masked for a masked-language model (BERT's 15%; at least one per row).
MASK_FRACTION = 0.15


@dataclass
class SequenceBatches:
    """Synthetic batches for a sequence model; the same arrays go to both frameworks.

    ``inputs``: tokens (batch, seq_len) int64, or spectrograms (batch, frames, freq_bins)
    float32 for ``ctc``.  ``targets``, one tuple per batch, by task:
    ``causal_lm``: (next tokens (batch, seq_len) int64,);
    ``masked_lm``: (original tokens at the masked positions, IGNORE_INDEX elsewhere,);
    ``ctc``: (labels (batch, max_label_len) int64 padded with the blank 0,
    label lengths (batch,) int64, output frames (batch,) int64).
    """

    task: str
    inputs: list[np.ndarray]
    targets: list[tuple[np.ndarray, ...]]

    def __len__(self) -> int:
        return len(self.inputs)


@dataclass
class LabelledData:
    name: str
    train_x: np.ndarray  # (N, H, W, 3) uint8
    train_y: np.ndarray  # (N,) int64
    test_x: np.ndarray
    test_y: np.ndarray
    num_classes: int
    mean: tuple[float, float, float]  # per channel, on the 0..1 scale
    std: tuple[float, float, float]

    def steps_per_pass(self, batch_size: int) -> int:
        return len(self.train_x) // batch_size


@dataclass(frozen=True)
class CifarSpec:
    archive: str
    folder: str
    train_members: tuple[str, ...]
    test_member: str
    label_key: bytes
    num_classes: int
    md5: str  # the archive's published sum (www.cs.toronto.edu/~kriz/cifar.html)


CIFAR = {
    "cifar10": CifarSpec(
        "cifar-10-python.tar.gz",
        "cifar-10-batches-py",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        "test_batch",
        b"labels",
        10,
        "c58f30108f718f92721af3b95e74349a",
    ),
    "cifar100": CifarSpec(
        "cifar-100-python.tar.gz",
        "cifar-100-python",
        ("train",),
        "test",
        b"fine_labels",
        100,
        "eb9058c3a382ffc7106e4002c42a8d85",
    ),
}
# Further MD5 sums to accept, comma-separated (archives of one's own, the tests' small ones).
ENV_EXTRA_MD5 = "BENCH_EXTRA_DATA_MD5"
CLASSES = {"digits": 10, "cifar10": 10, "cifar100": 100}


def synthetic(cfg: BenchConfig) -> ArrayBatches:
    """``cfg.data.num_batches`` distinct batches of standard-normal images and random labels."""
    rng = np.random.default_rng(cfg.seed)
    shape = (cfg.batch_size, 3, cfg.image_size, cfg.image_size)
    images, labels = [], []
    for _ in range(cfg.data.num_batches):
        images.append(rng.standard_normal(shape, dtype=np.float32))
        labels.append(rng.integers(0, cfg.num_classes, size=cfg.batch_size, dtype=np.int64))
    return ArrayBatches(images, labels)


def task_of(cfg: BenchConfig) -> str:
    """The task of the configured model ("image" for an unknown one)."""
    from bench.core.zoo import task_of as model_task

    return model_task(cfg.model.name, cfg.model.source, cfg.model.task) or "image"


def _token_batch(
    rng: np.random.Generator, task: str, batch: int, length: int, vocab: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    if task == "causal_lm":
        tokens = rng.integers(0, vocab, size=(batch, length + 1), dtype=np.int64)
        return np.ascontiguousarray(tokens[:, :-1]), (np.ascontiguousarray(tokens[:, 1:]),)
    mask_id = vocab - 1  # the other ids are ordinary tokens
    tokens = rng.integers(0, mask_id, size=(batch, length), dtype=np.int64)
    masked = rng.random((batch, length)) < MASK_FRACTION
    masked[np.arange(batch), rng.integers(0, length, size=batch)] = True
    inputs = np.where(masked, mask_id, tokens)
    return inputs, (np.where(masked, tokens, IGNORE_INDEX),)


def _speech_batch(
    rng: np.random.Generator, batch: int, frames: int, bins: int, vocab: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    from bench.trial.models.deepspeech2 import max_label_length, output_frames

    longest = max_label_length(frames)
    lengths = rng.integers(max(1, longest // 2), longest + 1, size=batch, dtype=np.int64)
    labels = rng.integers(1, vocab, size=(batch, longest), dtype=np.int64)  # 0 is the blank
    labels[np.arange(longest)[None, :] >= lengths[:, None]] = 0
    out_frames = np.full(batch, output_frames(frames), dtype=np.int64)
    spectrograms = rng.standard_normal((batch, frames, bins), dtype=np.float32)
    return spectrograms, (labels, lengths, out_frames)


def synthetic_sequences(cfg: BenchConfig) -> SequenceBatches:
    """``cfg.data.num_batches`` distinct random batches for the configured sequence model."""
    rng = np.random.default_rng(cfg.seed)
    task, m = task_of(cfg), cfg.model
    out = SequenceBatches(task, [], [])
    # mode=generate, and a causal LM's mode=serve: the prompts (their next tokens unused)
    served_lm = cfg.mode == "serve" and task == "causal_lm" and m.source in ("hf", "py")
    prompts = cfg.mode == "generate" or served_lm
    length = cfg.prompt_len if prompts else m.seq_len
    for _ in range(cfg.data.num_batches):
        if task == "ctc":
            x, y = _speech_batch(rng, cfg.batch_size, m.seq_len, m.freq_bins, m.vocab_size)
        else:
            x, y = _token_batch(rng, task, cfg.batch_size, length, m.vocab_size)
        out.inputs.append(x)
        out.targets.append(y)
    return out


def score(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(top-1 accuracy, mean cross-entropy) of ``logits`` (N, classes) against ``labels``
    (N,), in float64: the one arithmetic every framework's held-out evaluation goes through
    (the sessions hand over their logits in the test split's order).  A tie in the largest
    logit counts the first class, as every framework's argmax does."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    if z.ndim != 2 or len(z) != len(y) or not len(y):
        raise ValueError(f"score: logits {z.shape} do not match labels {y.shape}")
    shifted = z - z.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(len(y)), y].mean()
    return float((z.argmax(axis=1) == y).mean()), float(loss)


def resize(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of (N, H, W, C) uint8 images to (N, size, size, C), in numpy."""
    n, h, w, c = images.shape
    if (h, w) == (size, size):
        return images

    def axis(old: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.clip((np.arange(size) + 0.5) * old / size - 0.5, 0, old - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, old - 1)
        return lo, hi, (pos - lo).astype(np.float32)

    y0, y1, wy = axis(h)
    x0, x1, wx = axis(w)
    img = images.astype(np.float32)
    top = img[:, y0] * (1 - wy)[None, :, None, None] + img[:, y1] * wy[None, :, None, None]
    out = top[:, :, x0] * (1 - wx)[None, None, :, None] + top[:, :, x1] * wx[None, None, :, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _stats(train_x: np.ndarray) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    scaled = train_x.reshape(-1, 3).astype(np.float64) / 255.0
    mean = scaled.mean(axis=0)
    std = scaled.std(axis=0) + 1e-6
    return (float(mean[0]), float(mean[1]), float(mean[2])), (
        float(std[0]),
        float(std[1]),
        float(std[2]),
    )


def digits(cfg: BenchConfig) -> LabelledData:
    """scikit-learn's bundled 8x8 handwritten digits, as 3-channel images of the model's size,
    with a stratified 20% test split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    gray = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)  # values are 0..16
    rgb = np.repeat(gray[..., None], 3, axis=3)
    x = resize(rgb, cfg.image_size)
    y = bunch.target.astype(np.int64)
    train_x, test_x, train_y, test_y = train_test_split(
        x, y, test_size=0.2, random_state=cfg.seed, stratify=y
    )
    mean, std = _stats(train_x)
    return LabelledData("digits", train_x, train_y, test_x, test_y, 10, mean, std)


def _archive_path(root: str, spec: CifarSpec) -> Path:
    return Path(os.path.expanduser(root)) / spec.archive


def md5_of(f: BinaryIO) -> str:
    """The MD5 sum of an open file, read from where it is to its end."""
    digest = hashlib.md5()
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def sum_problem(digest: str, path: Path, spec: CifarSpec) -> str:
    """'' if ``digest`` is the archive's published sum (or one ``BENCH_EXTRA_DATA_MD5``
    names), else the refusal, naming ``data.root`` and the sum expected."""
    extra = {s.strip().lower() for s in os.environ.get(ENV_EXTRA_MD5, "").split(",")}
    if digest == spec.md5 or digest in extra - {""}:
        return ""
    return (
        f"data.root: {path} has MD5 {digest}, expected {spec.md5} (the published sum of "
        f"{spec.archive}); it is not unpickled: fetch it again with bench data download "
        f"{'cifar10' if spec.num_classes == 10 else 'cifar100'} --root "
        f"{shlex.quote(str(path.parent))}"
    )


@functools.lru_cache(maxsize=8)
def _archive_md5(path: Path, mtime: float, size: int) -> str:
    with open(path, "rb") as f:
        return md5_of(f)


@functools.lru_cache(maxsize=8)
def _check_archive(path: Path, mtime: float, spec: CifarSpec) -> str:
    """'' if ``path`` is a readable archive with every expected member, else why not."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            names = set(tar.getnames())
    except (OSError, tarfile.TarError, EOFError) as exc:
        return f"{path} is not a readable .tar.gz archive ({exc})"
    wanted = [f"{spec.folder}/{m}" for m in (*spec.train_members, spec.test_member)]
    missing = [m for m in wanted if m not in names]
    if missing:
        return f"{path} lacks {', '.join(missing)}: not the python version of {spec.archive}"
    return ""


def _archive_problem(path: Path, spec: CifarSpec) -> str:
    """'' if ``path`` is a readable archive with every member and a known sum, else why
    not (nothing in it unpickled)."""
    st = path.stat()
    why = _check_archive(path, st.st_mtime, spec)
    if why:
        return f"data.root: {why}"
    return sum_problem(_archive_md5(path, st.st_mtime, st.st_size), path, spec)


def cifar_present(num_classes: int, root: str) -> str:
    """The CIFAR set of ``num_classes`` classes if its archive is under ``root`` and readable,
    else '' (a study preset's smaller scales then train on synthetic batches of its shape)."""
    name = {10: "cifar10", 100: "cifar100"}.get(num_classes, "")
    if not name:
        return ""
    path = _archive_path(root, CIFAR[name])
    return name if path.is_file() and not _archive_problem(path, CIFAR[name]) else ""


def check(cfg: BenchConfig) -> list[str]:
    """Problems with the configured data set's files, found without loading them (the host
    stage of bench's checks; the set against the model and the class count are
    :mod:`bench.checks.config`'s)."""
    name = cfg.data.name
    problems = []
    if name == "folder":
        from bench.trial.data import folder

        problems += folder.check(cfg)
    if name in CIFAR:
        spec = CIFAR[name]
        path = _archive_path(cfg.data.root, spec)
        if not path.is_file():
            problems.append(
                f"data.root: {spec.archive} not found in {str(path.parent)!r}; "
                "download it with: bench data download "
                f"{shlex.quote(name)} --root {shlex.quote(cfg.data.root)}"
            )
        else:
            why = _archive_problem(path, spec)
            if why:
                problems.append(why)
    return problems


def _unpickle(tar: tarfile.TarFile, member: str) -> dict[bytes, object]:
    handle = tar.extractfile(member)
    if handle is None:
        raise DataError(f"data.root: {member} is not a file in the archive")
    with handle:
        data: dict[bytes, object] = pickle.load(handle, encoding="bytes")
    return data


def cifar(cfg: BenchConfig) -> LabelledData:
    spec = CIFAR[cfg.data.name]
    path = _archive_path(cfg.data.root, spec)

    def read(tar: tarfile.TarFile, members: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        xs, ys = [], []
        for member in members:
            batch = _unpickle(tar, f"{spec.folder}/{member}")
            try:
                raw = np.asarray(batch[b"data"], dtype=np.uint8)
                labels = np.asarray(batch[spec.label_key], dtype=np.int64)
            except KeyError as exc:
                raise DataError(f"data.root: {member} in {path} has no {exc} entry") from exc
            if raw.ndim != 2 or raw.shape[1] != 3072 or len(raw) != len(labels):
                raise DataError(f"data.root: {member} in {path} is not 32x32x3 images")
            xs.append(raw.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
            ys.append(labels)
        return np.concatenate(xs), np.concatenate(ys)

    try:
        # A private copy: the bytes checked are the bytes read, even if the file is changed
        # in place after the check (one open file is not enough: a writer shares its inode).
        with open(path, "rb") as f:
            copy = io.BytesIO(f.read())
        why = sum_problem(md5_of(copy), path, spec)
        if why:
            raise DataError(why)
        copy.seek(0)
        with tarfile.open(fileobj=copy, mode="r:gz") as tar:
            train_x, train_y = read(tar, spec.train_members)
            test_x, test_y = read(tar, (spec.test_member,))
    except (OSError, tarfile.TarError, EOFError, pickle.UnpicklingError) as exc:
        raise DataError(f"data.root: cannot read {path}: {exc}") from exc
    train_x, test_x = resize(train_x, cfg.image_size), resize(test_x, cfg.image_size)
    mean, std = _stats(train_x)
    return LabelledData(
        cfg.data.name, train_x, train_y, test_x, test_y, spec.num_classes, mean, std
    )


def load(cfg: BenchConfig) -> ArrayBatches | LabelledData | SequenceBatches | ImageFiles:
    if cfg.data.name == "synthetic" and task_of(cfg) != "image":
        return synthetic_sequences(cfg)
    if cfg.data.name == "synthetic":
        return synthetic(cfg)
    if cfg.data.name == "digits":
        return digits(cfg)
    if cfg.data.name in CIFAR:
        return cifar(cfg)
    if cfg.data.name == "folder":  # the files stay on disk: each framework's pipeline reads them
        from bench.trial.data import folder

        return folder.load(cfg)
    raise DataError(f"data: unknown data set {cfg.data.name!r}")
