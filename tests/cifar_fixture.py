"""Small CIFAR archives in the real python-version format, for tests.  bench reads only
archives of a known MD5 sum, so each one written here has its sum added to the sums this
process (and the processes it starts) accept, ``BENCH_EXTRA_DATA_MD5``."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np

from bench.trial.data import CIFAR, ENV_EXTRA_MD5


def write_cifar_archive(root: Path, name: str, per_member: int = 40, seed: int = 0) -> Path:
    """Write ``root/<archive>`` with ``per_member`` random 32x32x3 images per batch file."""
    spec = CIFAR[name]
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    path = root / spec.archive
    with tarfile.open(path, "w:gz") as tar:
        for member in (*spec.train_members, spec.test_member):
            batch = {
                b"batch_label": member.encode(),
                b"data": rng.integers(0, 256, size=(per_member, 3072), dtype=np.uint8),
                spec.label_key: rng.integers(0, spec.num_classes, size=per_member).tolist(),
            }
            blob = pickle.dumps(batch, protocol=2)
            info = tarfile.TarInfo(f"{spec.folder}/{member}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    accept(path)
    return path


def accept(path: Path) -> None:
    """Have bench accept the archive at ``path`` by its sum, in this process and its children."""
    digest = hashlib.md5(path.read_bytes()).hexdigest()
    os.environ[ENV_EXTRA_MD5] = ",".join(filter(None, [os.environ.get(ENV_EXTRA_MD5), digest]))
