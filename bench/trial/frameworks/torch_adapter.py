"""PyTorch: an ``nn.Module`` trained with the idiomatic eager loop.

Input: synthetic batches live on the device and are cycled; labelled data goes through a
``DataLoader`` with ``data.workers`` worker processes, converting and normalizing each
sample (or indexing a pre-converted tensor when ``data.cache=true``).  Mixed precision uses
``torch.autocast`` (with a ``GradScaler`` for fp16); ``compile=true`` wraps the model in
``torch.compile``, which compiles on the first warm-up step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from bench.core.config import BenchConfig
from bench.trial import models
from bench.trial.data import (
    IGNORE_INDEX,
    ArrayBatches,
    LabelledData,
    SequenceBatches,
    folder,
    score,
)
from bench.trial.data.folder import ImageFiles

# (inputs, targets): targets are a label tensor, or a tuple of tensors for sequence models.
Batch = tuple[torch.Tensor, Any]
_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _device(requested: str) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("device: 'cuda' was requested but PyTorch sees no CUDA device")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class _Images(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """uint8 HWC images converted to normalized float CHW tensors one sample at a time."""

    def __init__(self, x: np.ndarray, y: np.ndarray, data: LabelledData) -> None:
        self.x, self.y = x, y
        self.mean = torch.tensor(data.mean).view(3, 1, 1)
        self.std = torch.tensor(data.std).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = torch.from_numpy(self.x[i]).permute(2, 0, 1).float().div_(255.0)
        return (image - self.mean) / self.std, int(self.y[i])


class _Cached(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """All samples converted once, up front; items are views into one tensor."""

    def __init__(self, source: _Images) -> None:
        x = torch.from_numpy(source.x).permute(0, 3, 1, 2).float().div_(255.0)
        self.x = ((x - source.mean) / source.std).contiguous()
        self.y = torch.from_numpy(source.y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.x[i], int(self.y[i])


class _Files(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """data=folder in DataLoader workers: an item is (index, dy, dx, flip) from the epoch's
    plan (bench.trial.data.folder.plan); PIL decodes, ``interpolate`` resizes, then the crop,
    the flip and the normalization, in torch."""

    def __init__(self, paths: list[str], y: np.ndarray, files: ImageFiles) -> None:
        self.paths, self.y, self.files = paths, y, files
        self.mean = torch.tensor(files.mean).view(3, 1, 1)
        self.std = torch.tensor(files.std).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, item: tuple[int, int, int, bool]) -> tuple[torch.Tensor, int]:
        from PIL import Image

        i, dy, dx, flip = item
        with Image.open(self.paths[i]) as image:
            rgb = np.asarray(image.convert("RGB"))
        x = torch.from_numpy(rgb.copy()).permute(2, 0, 1).float().div_(255.0)
        size = self.files.size
        if self.files.resize and tuple(x.shape[1:]) != (size, size):
            x = torch.nn.functional.interpolate(
                x[None], size=(size, size), mode="bilinear", align_corners=False, antialias=False
            )[0]
        pad = folder.PAD
        x = torch.nn.functional.pad(x, (pad, pad, pad, pad))[:, dy : dy + size, dx : dx + size]
        if flip:
            x = x.flip(2)
        return (x - self.mean) / self.std, int(self.y[i])


class _Plan(torch.utils.data.Sampler[tuple[int, int, int, bool]]):
    """Each pass over the training files in the order, with the crops and flips, of
    bench.trial.data.folder.plan for the seed and the pass (the held-out split: in order, centred,
    unflipped)."""

    def __init__(self, n: int, seed: int, train: bool) -> None:
        self.n, self.seed, self.train, self.epoch = n, seed, train, 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[tuple[int, int, int, bool]]:
        if not self.train:
            p = folder.PAD
            return iter([(i, p, p, False) for i in range(self.n)])
        order, dy, dx, flip = folder.plan(self.seed, self.epoch, self.n)
        self.epoch += 1
        return zip(order.tolist(), dy.tolist(), dx.tolist(), flip.tolist(), strict=True)


def _files_loader(
    paths: list[str], y: np.ndarray, files: ImageFiles, cfg: BenchConfig, train: bool, pin: bool
) -> torch.utils.data.DataLoader[Any]:
    return torch.utils.data.DataLoader(
        _Files(paths, y, files),
        batch_size=cfg.batch_size,
        sampler=_Plan(len(paths), cfg.seed, train),
        drop_last=train,
        num_workers=cfg.data.workers,
        persistent_workers=cfg.data.workers > 0,
        pin_memory=pin,
    )


def _loader(
    dataset: torch.utils.data.Dataset[Any], cfg: BenchConfig, train: bool, pin: bool
) -> torch.utils.data.DataLoader[Any]:
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        shuffle=train,
        drop_last=train,
        num_workers=cfg.data.workers,
        persistent_workers=cfg.data.workers > 0,
        pin_memory=pin,
        generator=torch.Generator().manual_seed(cfg.seed),
    )


def _forever(loader: torch.utils.data.DataLoader[Any]) -> Iterator[Batch]:
    while True:
        yield from loader


def _token_loss(logits: torch.Tensor, targets: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Mean cross-entropy over the positions that have a target (causal_lm, masked_lm)."""
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1).float(), targets[0].flatten(), ignore_index=IGNORE_INDEX
    )


def _ctc_loss(logits: torch.Tensor, targets: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """CTC (blank 0): each sequence's loss over its label length, averaged over the batch."""
    labels, label_lengths, frames = targets
    log_probs = logits.float().log_softmax(-1).transpose(0, 1)  # (frames, batch, classes)
    return torch.nn.functional.ctc_loss(log_probs, labels, frames, label_lengths, blank=0)


_SEQUENCE_LOSSES = {"causal_lm": _token_loss, "masked_lm": _token_loss, "ctc": _ctc_loss}


class TorchSession:
    def __init__(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> None:
        self.dev = _device(cfg.device)
        self.device = str(self.dev)
        task = models.task(cfg.model)
        if task == "image":
            model = models.build_image("torch", cfg.model, cfg.num_classes, cfg.image_size)
        else:
            model = models.build_sequence("torch", cfg.model)
        self.model = model.to(self.dev)
        # channels_last: the weights and the image batches in NHWC memory order (the
        # arithmetic is the same; which kernels run, and how fast, may not be).
        self._layout = torch.channels_last if cfg.channels_last and task == "image" else None
        if self._layout is not None:
            self.model = self.model.to(memory_format=self._layout)
        self.num_parameters = sum(p.numel() for p in self.model.parameters())
        self._image_size = cfg.image_size if task == "image" else None
        # model=hf, and a causal LM of model=py: FLOPs counted on one sample of seq_len tokens
        self._tokens_per_sample = cfg.model.seq_len if models.own_causal_lm(cfg.model) else 0
        # mode=generate with model=py: the builder's model's own cache (docs/your-model.md)
        self._own_cache = cfg.model.source == "py" and task == "causal_lm"
        self._cache_length = cfg.prompt_len + cfg.new_tokens
        self.forward = torch.compile(self.model) if cfg.compile else self.model
        self.training = cfg.mode == "train"
        self.amp_dtype = _DTYPES.get(cfg.precision)
        self.scaler = torch.amp.GradScaler("cuda") if cfg.precision == "fp16" else None
        self.loss_fn: Callable[[torch.Tensor, Any], torch.Tensor] = (
            torch.nn.CrossEntropyLoss() if task == "image" else _SEQUENCE_LOSSES[task]
        )
        self._loss_sum = torch.zeros((), device=self.dev)
        self._loss_steps = 0
        self._test: torch.utils.data.DataLoader[Any] | None = None
        self._test_y = np.zeros(0, np.int64)
        self.steps_per_pass = 0
        self._batches: Iterator[Batch]
        if isinstance(data, LabelledData):
            pin = self.dev.type == "cuda"
            train = _Images(data.train_x, data.train_y, data)
            dataset = _Cached(train) if cfg.data.cache else train
            self._batches = _forever(_loader(dataset, cfg, True, pin))
            self.steps_per_pass = data.steps_per_pass(cfg.batch_size)
            if cfg.data.evaluate:
                test = _Images(data.test_x, data.test_y, data)
                self._test = _loader(_Cached(test) if cfg.data.cache else test, cfg, False, pin)
                self._test_y = data.test_y
        elif isinstance(data, ImageFiles):
            pin = self.dev.type == "cuda"
            files = _files_loader(data.train_paths, data.train_y, data, cfg, True, pin)
            self._batches = _forever(files)
            self.steps_per_pass = data.steps_per_pass(cfg.batch_size)
            if cfg.data.evaluate:
                self._test = _files_loader(data.test_paths, data.test_y, data, cfg, False, pin)
                self._test_y = data.test_y
        elif isinstance(data, SequenceBatches):
            sequence_batches = [
                (
                    torch.from_numpy(x).to(self.dev),
                    tuple(torch.from_numpy(t).to(self.dev) for t in targets),
                )
                for x, targets in zip(data.inputs, data.targets, strict=True)
            ]
            self._batches = itertools.cycle(sequence_batches)
        else:
            device_batches = [
                (self._laid_out(torch.from_numpy(x).to(self.dev)), torch.from_numpy(y).to(self.dev))
                for x, y in zip(data.images, data.labels, strict=True)
            ]
            self._batches = itertools.cycle(device_batches)
        if self.training:
            self.model.train()
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

    def _autocast(self) -> torch.autocast:
        return torch.autocast(
            self.dev.type, dtype=self.amp_dtype or torch.float32, enabled=bool(self.amp_dtype)
        )

    def _laid_out(self, x: torch.Tensor) -> torch.Tensor:
        if self._layout is None or x.dim() != 4:
            return x
        return x.contiguous(memory_format=self._layout)

    def next_batch(self) -> Batch:
        x, y = next(self._batches)
        if x.device != self.dev:
            x, y = x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)
            x = self._laid_out(x)
        return x, y

    def step(self, batch: Batch) -> None:
        x, y = batch
        if not self.training:
            with torch.inference_mode(), self._autocast():
                self.forward(x)
            return
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            loss = self.loss_fn(self.forward(x), y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self._loss_sum += loss.detach()
        self._loss_steps += 1

    # mode=generate (model=hf): the Hugging Face model's own cached forward, greedily; a
    # causal LM of model=py: its init_cache and cached_forward (bench.trial.models.custom).
    def start_generation(self, prompts: np.ndarray | None = None) -> None:
        if prompts is None:
            self._prompt, _ = self.next_batch()
        else:  # mode=serve's batch of prompts
            self._prompt = torch.from_numpy(np.ascontiguousarray(prompts)).to(self.dev)
        self._cache: Any = None
        self._tokens: list[torch.Tensor] = []
        if self._own_cache:
            with torch.inference_mode():
                self._cache = self.model.init_cache(len(self._prompt), self._cache_length)

    def _choose(self, out: Any) -> None:
        self._cache = out.past_key_values
        self._tokens.append(out.logits[:, -1].argmax(dim=-1, keepdim=True))

    def _own_step(self, tokens: torch.Tensor) -> None:
        """Your LM's cached forward of ``tokens`` at the next free position, greedily."""
        index = int(self._prompt.shape[1]) + len(self._tokens) - 1 if self._tokens else 0
        with torch.inference_mode(), self._autocast():
            logits, self._cache = self.model.cached_forward(tokens, self._cache, index)
            self._tokens.append(logits[:, -1].argmax(dim=-1, keepdim=True))

    def prefill(self) -> None:
        if self._own_cache:
            self._own_step(self._prompt)
            return
        from bench.trial.models.hf_lm import takes_logits_to_keep

        lm = self.model.lm
        kept = {"logits_to_keep": 1} if takes_logits_to_keep(lm) else {}
        with torch.inference_mode(), self._autocast():
            self._choose(lm(input_ids=self._prompt, use_cache=True, **kept))

    def decode(self) -> None:
        if self._own_cache:
            self._own_step(self._tokens[-1])
            return
        with torch.inference_mode(), self._autocast():
            out = self.model.lm(
                input_ids=self._tokens[-1], past_key_values=self._cache, use_cache=True
            )
            self._choose(out)

    def generated(self) -> np.ndarray:
        return torch.cat(self._tokens, dim=1).cpu().numpy()

    def sync(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    def output_finite(self) -> bool:
        x, _ = self.next_batch()
        with torch.inference_mode(), self._autocast():
            out = self.forward(x)
        outs = out if isinstance(out, tuple | list) else (out,)
        return all(bool(torch.isfinite(o.float()).all()) for o in outs if torch.is_tensor(o))

    def predict(self, x: np.ndarray) -> np.ndarray:
        with torch.inference_mode(), self._autocast():
            out = self.forward(self._laid_out(torch.from_numpy(x).to(self.dev)))
        out = out[0] if isinstance(out, tuple | list) else out
        return out.float().cpu().numpy()

    def mark(self) -> torch.cuda.Event | None:
        if self.dev.type != "cuda":
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def between_s(self, first: torch.cuda.Event, second: torch.cuda.Event) -> float:
        return float(first.elapsed_time(second)) / 1e3

    def peak_flops_per_s(self, precision: str) -> float | None:
        if self.dev.type != "cuda":
            return None
        return matmul_peak(self.dev, precision)

    def take_mean_loss(self) -> float | None:
        if not self._loss_steps:
            return None
        mean = float(self._loss_sum.item()) / self._loss_steps
        self._loss_sum.zero_()
        self._loss_steps = 0
        return mean

    def evaluate(self) -> tuple[float, float] | None:
        if self._test is None:
            return None
        return score(self.test_logits(), self._test_y)

    def test_logits(self) -> np.ndarray:
        if self._test is None:
            raise RuntimeError("test_logits: this session has no held-out split")
        was_training = self.model.training
        self.model.eval()
        out = []
        with torch.inference_mode(), self._autocast():
            for x, _ in self._test:
                out.append(self.forward(x.to(self.dev)).float().cpu().numpy())
        self.model.train(was_training)
        return np.concatenate(out)

    def peak_device_memory_mb(self) -> float | None:
        if self.dev.type != "cuda":
            return None
        return torch.cuda.max_memory_allocated(self.dev) / 2**20

    def forward_flops_per_sample(self) -> float | None:
        """One eval-mode forward of a zero image through the eager model (image models)."""
        from bench.trial.models import flops

        if self._tokens_per_sample:  # model=hf: one sample of model.seq_len tokens
            return self.forward_flops_of(self._tokens_per_sample)
        if self._image_size is None:
            return None  # bench's own sequence models: not counted yet

        return float(flops.torch_flops_per_sample(self.model, self._image_size))

    def forward_flops_of(self, tokens: int) -> float | None:
        """A causal LM's (model=hf, model=py) forward of one sample of ``tokens`` tokens."""
        from bench.trial.models import flops

        if not self._tokens_per_sample:
            return None
        example = torch.zeros((1, tokens), dtype=torch.int64, device=self.dev)
        return float(flops.torch_forward_flops(self.model, example))


# The compute type of a precision's matrix products: fp32 with TF32 off, tf32 with it on.
_PEAK_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                "bf16": torch.bfloat16}  # fmt: skip
PEAK_SIZE = 8192  # n of the n x n x n product: large enough to reach the tensor cores' rate


def matmul_peak(dev: torch.device, precision: str, n: int = PEAK_SIZE, reps: int = 10) -> float:
    """FLOP/s of an ``n`` x ``n`` x ``n`` matrix product on ``dev`` at ``precision``'s
    compute type (TF32 as the precision sets it), the best of three timed batches of
    ``reps`` products after a warm-up, timed by CUDA events; 0.0 where the device has no
    memory left for the three matrices."""
    dtype = _PEAK_DTYPES.get(precision, torch.float32)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        torch.cuda.empty_cache()
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        out = torch.empty(n, n, device=dev, dtype=dtype)
        torch.matmul(a, b, out=out)
        best = float("inf")
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                torch.matmul(a, b, out=out)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        del a, b, out
        torch.cuda.empty_cache()
        return 2.0 * n**3 * reps / best
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return 0.0
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


class Adapter:
    name = "torch"

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        # fp32 means float32: cuDNN's convolutions use TensorFloat-32 by default on GPUs
        # that have it (matrix products do not), so both are pinned, off unless asked for.
        tf32 = cfg.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(cfg.inter_threads or threads)
        except RuntimeError:  # already set once in this process (inline launcher)
            pass
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
        if cfg.onednn != "auto":  # oneDNN (MKL-DNN) CPU kernels, torch's default on x86
            torch.backends.mkldnn.set_flags(cfg.onednn == "on")
        torch.manual_seed(cfg.seed)

    def environment(self) -> dict[str, str]:
        env: dict[str, Any] = {
            "torch_version": torch.__version__,
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "onednn": torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available(),
            # Whether float32 matrix products and convolutions may use TensorFloat-32.
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
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

    def prepare(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> TorchSession:
        if cfg.precision == "bf16" and _device(cfg.device).type == "cuda":
            if not torch.cuda.is_bf16_supported():
                raise RuntimeError("precision: this GPU cannot compute in bf16; use fp16 or fp32")
        return TorchSession(cfg, data)

    def is_oom(self, exc: BaseException, capped: bool = False) -> bool:
        if isinstance(exc, torch.cuda.OutOfMemoryError | MemoryError):
            return True
        text = str(exc).lower()  # CPU allocator failures are plain RuntimeErrors
        if not isinstance(exc, RuntimeError):
            return False
        # oneDNN cannot create a primitive when it cannot allocate its scratch space.
        return (
            "out of memory" in text
            or "can't allocate memory" in text
            or (capped and "could not create a primitive" in text)
        )
