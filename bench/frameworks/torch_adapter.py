"""PyTorch: an ``nn.Module`` trained with the idiomatic eager loop."""

from __future__ import annotations

import itertools
from typing import Any

import torch

from bench import models
from bench.config import BenchConfig
from bench.data import HostBatches


def _device(requested: str) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("device: 'cuda' was requested but PyTorch sees no CUDA device")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class TorchSession:
    def __init__(self, cfg: BenchConfig, data: HostBatches) -> None:
        self.dev = _device(cfg.device)
        self.device = str(self.dev)
        model = models.build("torch", cfg.model.name, cfg.num_classes, cfg.image_size)
        self.model = model.to(self.dev)
        self.num_parameters = sum(p.numel() for p in self.model.parameters())
        batches = [
            (torch.from_numpy(x).to(self.dev), torch.from_numpy(y).to(self.dev))
            for x, y in zip(data.images, data.labels, strict=True)
        ]
        self._batches = itertools.cycle(batches)
        self.training = cfg.mode == "train"
        self._loss_sum = torch.zeros((), device=self.dev)
        self._loss_steps = 0
        if self.training:
            self.model.train()
            self.loss_fn = torch.nn.CrossEntropyLoss()
            opt = cfg.optimizer
            self.optimizer: torch.optim.Optimizer
            if opt.name == "adam":
                self.optimizer = torch.optim.Adam(
                    self.model.parameters(), lr=opt.lr, weight_decay=opt.weight_decay
                )
            else:
                self.optimizer = torch.optim.SGD(
                    self.model.parameters(),
                    lr=opt.lr,
                    momentum=opt.momentum,
                    weight_decay=opt.weight_decay,
                )
        else:
            self.model.eval()

    def step(self) -> None:
        x, y = next(self._batches)
        if self.training:
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self._loss_sum += loss.detach()
            self._loss_steps += 1
        else:
            with torch.inference_mode():
                self.model(x)

    def sync(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    def take_mean_loss(self) -> float | None:
        if not self._loss_steps:
            return None
        mean = float(self._loss_sum.item()) / self._loss_steps
        self._loss_sum.zero_()
        self._loss_steps = 0
        return mean

    def peak_device_memory_mb(self) -> float | None:
        if self.dev.type != "cuda":
            return None
        return torch.cuda.max_memory_allocated(self.dev) / 2**20


class Adapter:
    name = "torch"

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:  # already set once in this process (inline launcher)
            pass
        torch.manual_seed(cfg.seed)

    def environment(self) -> dict[str, str]:
        env: dict[str, Any] = {
            "torch_version": torch.__version__,
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
        }
        if torch.version.cuda:
            env["cuda_version"] = torch.version.cuda
        if torch.backends.cudnn.is_available():
            env["cudnn_version"] = torch.backends.cudnn.version()
        if torch.cuda.is_available():
            env["gpu_name"] = torch.cuda.get_device_name()
            try:
                env["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:  # noqa: BLE001 - not every CUDA build has NCCL
                pass
        return {k: str(v) for k, v in env.items()}

    def prepare(self, cfg: BenchConfig, data: HostBatches) -> TorchSession:
        return TorchSession(cfg, data)

    def is_oom(self, exc: BaseException) -> bool:
        if isinstance(exc, torch.cuda.OutOfMemoryError | MemoryError):
            return True
        text = str(exc).lower()  # CPU allocator failures are plain RuntimeErrors
        return isinstance(exc, RuntimeError) and (
            "out of memory" in text or "can't allocate memory" in text
        )
