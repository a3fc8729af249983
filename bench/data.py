"""Host-side data, made before any timed window and identical for every framework.

Images are generated channels-first (N, C, H, W) as float32; an adapter that works
channels-last transposes the same values.  Labels are int64 class indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.config import BenchConfig


@dataclass
class HostBatches:
    images: list[np.ndarray]  # each (batch, 3, size, size) float32
    labels: list[np.ndarray]  # each (batch,) int64

    def __len__(self) -> int:
        return len(self.images)


def synthetic(cfg: BenchConfig) -> HostBatches:
    """``cfg.data.num_batches`` distinct batches of standard-normal images and random labels."""
    rng = np.random.default_rng(cfg.seed)
    shape = (cfg.batch_size, 3, cfg.image_size, cfg.image_size)
    images, labels = [], []
    for _ in range(cfg.data.num_batches):
        images.append(rng.standard_normal(shape, dtype=np.float32))
        labels.append(rng.integers(0, cfg.num_classes, size=cfg.batch_size, dtype=np.int64))
    return HostBatches(images, labels)


def load(cfg: BenchConfig) -> HostBatches:
    if cfg.data.name == "synthetic":
        return synthetic(cfg)
    raise ValueError(f"data: unknown data set {cfg.data.name!r}")
