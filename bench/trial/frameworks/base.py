"""The protocol every framework adapter implements.

An adapter turns a validated config and host-side data into a :class:`Session`: a model,
an optimizer and an input source (device-resident batches or the framework's own input
pipeline), ready to step.  The timing loop in
:mod:`bench.trial.loop` drives the session and is the same for every framework.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from bench.core.config import BenchConfig
from bench.trial.data import ArrayBatches, LabelledData, SequenceBatches
from bench.trial.data.folder import ImageFiles


class Session(Protocol):
    num_parameters: int
    device: str  # what actually ran, e.g. "cpu" or "cuda:0"
    # Steps in one pass over a labelled training set (0 for synthetic data).
    steps_per_pass: int

    def next_batch(self) -> Any:
        """The next input batch, on the device: waiting for it is the trial's data time."""

    def step(self, batch: Any) -> None:
        """One training step (forward, backward, update) or one inference batch."""

    def sync(self) -> None:
        """Block until all queued device work is done (a no-op on CPU)."""

    def take_mean_loss(self) -> float | None:
        """Mean training loss over the steps since the last call; None in inference."""

    def evaluate(self) -> tuple[float, float] | None:
        """(accuracy, mean loss) on the held-out test split; None without one."""

    def peak_device_memory_mb(self) -> float | None:
        """Peak device memory allocated by the framework, or None on CPU."""

    def forward_flops_per_sample(self) -> float | None:
        """Forward-pass FLOPs of one sample, counted by this framework on its own model
        (:mod:`bench.trial.models.flops`); None where not counted.  Never call it in a timed
        window."""


@runtime_checkable
class EpochProbe(Protocol):
    """A session that measures more after each timed window (an optional extension)."""

    def after_window(self) -> dict[str, float]:
        """Per-epoch figures measured right after the epoch's timed window, outside it (e.g. a
        data-parallel strategy's communication time from a few split steps); {} if none."""


@runtime_checkable
class DeviceEvents(Protocol):
    """A session whose device records events in its stream of work (an optional extension):
    step times then come from the device, with no host synchronization between steps."""

    def mark(self) -> Any:
        """Record an event after the work queued so far; return it (None: no device events
        here, e.g. on the CPU)."""

    def between_s(self, first: Any, second: Any) -> float:
        """Seconds of device time between two recorded events, once both have completed."""


@runtime_checkable
class TestLogits(Protocol):
    """A session that hands over its model's logits on the held-out split (an optional
    extension): goal=accuracy scores them with :func:`bench.trial.data.score`, one arithmetic for
    every framework."""

    def test_logits(self) -> np.ndarray:
        """The eval-mode logits (N, classes) float32 of the test split, in its order."""


@runtime_checkable
class OutputCheck(Protocol):
    """A session that can tell whether its model's output is finite (an optional extension):
    inference has no loss, so a model that computes NaN or infinities is found this way."""

    def output_finite(self) -> bool:
        """One more forward pass on the next batch, outside any timed window: whether every
        value it outputs is finite."""


@runtime_checkable
class Predict(Protocol):
    """A session that serves (an optional extension; mode=serve, :mod:`bench.trial.serve`):
    its model's inference on any number of host samples."""

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The model's outputs (eval mode, the session's precision) for host samples ``x``
        in bench's layout (images (N, 3, H, W) float32, tokens (N, L) int64), on the host:
        the device has finished when it returns."""

    def sync(self) -> None:
        """Block until all queued device work is done (a no-op on CPU)."""


@runtime_checkable
class PeakProbe(Protocol):
    """A session that can measure its device's peak arithmetic rate (an optional extension)."""

    def peak_flops_per_s(self, precision: str) -> float | None:
        """FLOP/s of a large matrix product at ``precision``'s compute type on this session's
        device, measured now (outside any timed window); None where not measured."""


@runtime_checkable
class Generation(Protocol):
    """A session of a causal LM that generates with its KV cache (an optional extension;
    mode=generate, :mod:`bench.trial.generate` times it).  Greedy: each new token is the
    argmax of the last position's logits, end-of-sequence ignored; the tokens stay on the
    device (no host synchronization inside a step)."""

    def start_generation(self, prompts: np.ndarray | None = None) -> None:
        """Forget the cache and take the next prompt batch (outside any timed window), or
        ``prompts``: host token ids (N, prompt_len) int64, any N (mode=serve's batches)."""

    def prefill(self) -> None:
        """The prompt batch through the model, filling the cache, and the first new token
        chosen from its last position."""

    def decode(self) -> None:
        """One cached forward of the last chosen token, and the next token chosen."""

    def generated(self) -> Any:
        """The tokens chosen since the prefill, (batch, n), on the host."""

    def sync(self) -> None:
        """Block until all queued device work is done (a no-op on CPU)."""


@runtime_checkable
class TokenFlops(Protocol):
    """A causal LM's session that counts its forward at any length (an optional extension:
    mode=generate's achieved FLOP/s, :func:`bench.trial.generate.flops_per_prompt`)."""

    def forward_flops_of(self, tokens: int) -> float | None:
        """Forward FLOPs of one sample of ``tokens`` tokens, counted the zoo's way
        (contractions, attention over every position pair); None where not counted."""


@runtime_checkable
class WindowBarrier(Protocol):
    """A session of one rank among several that step together (an optional extension)."""

    def barrier(self) -> None:
        """Return once every rank has called it: each timed window starts after one, so
        that no rank's window holds its peers' time between epochs (logging, telemetry)."""


class Framework(Protocol):
    name: str

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        """Set threads, seeds, device visibility and log levels before any model exists."""

    def environment(self) -> dict[str, str]:
        """Framework, CUDA and cuDNN versions and the GPU name, where present."""

    def prepare(
        self, cfg: BenchConfig, data: ArrayBatches | LabelledData | SequenceBatches | ImageFiles
    ) -> Session:
        """Build the model, optimizer and device-resident batches."""

    def is_oom(self, exc: BaseException, capped: bool = False) -> bool:
        """Whether ``exc`` is this framework's out-of-memory error; ``capped``: the trial
        runs under a memory cap, where a failed allocation deep in a kernel library (which
        reports it in its own words) is out of memory too."""
