"""One framework's side of a parity check: its own trial session (the model, loss and
optimizer a trial of that framework builds), given the reference's initial weights and
batches, stepped N times; the loss of every step and the weights after the last.

In-process for the host's frameworks; ``python -m bench.parity.side REQUEST RESULT ...``
(pairs of .npz files, run in turn) with the framework's own interpreter for one that lives
in its own environment (MXNet).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.config import (
    BenchConfig,
    DataConfig,
    FrameworkConfig,
    ModelConfig,
    OptimizerConfig,
    TelemetryConfig,
)
from bench.data import HostBatches
from bench.frameworks.parity_hook import batch_arrays, load_tensors, read_batches, save_tensors
from bench.frameworks.weights import Tensor, disable_dropout, export, load


@dataclass
class Spec:
    """What every side runs: the same model, batch, optimizer and number of steps."""

    model: str = "lenet5"
    batch_size: int = 32
    image_size: int = 32
    num_classes: int = 10
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    steps: int = 20
    seed: int = 0
    threads: int = 0

    def config(self, framework: str) -> BenchConfig:
        return BenchConfig(
            framework=FrameworkConfig(name=framework),
            model=ModelConfig(name=self.model),
            data=DataConfig(num_batches=self.steps, evaluate=False, workers=0),
            optimizer=OptimizerConfig(
                name=self.optimizer,
                lr=self.lr,
                momentum=self.momentum,
                weight_decay=self.weight_decay,
            ),
            telemetry=TelemetryConfig(enabled=False),
            device="cpu",
            precision="fp32",
            batch_size=self.batch_size,
            image_size=self.image_size,
            num_classes=self.num_classes,
            seed=self.seed,
        )


@dataclass
class Side:
    framework: str
    losses: list[float]
    weights: list[Tensor]
    dropout_layers: int = 0


def run(framework: str, spec: Spec, init: list[Tensor], batches: HostBatches) -> Side:
    """Train ``framework``'s session from ``init`` on ``batches``, one per step."""
    from bench import frameworks

    threads = spec.threads or os.cpu_count() or 1
    cfg = spec.config(framework)
    frameworks.before_import(cfg, threads)
    adapter = frameworks.load(framework)
    adapter.configure(cfg, threads)
    session = adapter.prepare(cfg, batches)
    load(framework, session, init)
    dropped = disable_dropout(framework, session)
    losses: list[float] = []
    for _ in range(spec.steps):
        session.step(session.next_batch())
        loss = session.take_mean_loss()
        losses.append(float("nan") if loss is None else float(loss))
    session.sync()
    return Side(framework, losses, export(framework, session), dropped)


# -- the child process: request and result as .npz files (parity_hook's format) --------------


def write_request(
    path: str, framework: str, spec: Spec, init: list[Tensor], b: HostBatches
) -> None:
    spec_json = np.array(json.dumps({"framework": framework, **asdict(spec)}))
    save_tensors(Path(path), init, spec=spec_json, **batch_arrays(b))


def write_result(path: str, side: Side) -> None:
    losses = np.asarray(side.losses, dtype=np.float64)
    save_tensors(Path(path), side.weights, losses=losses, dropout=np.array(side.dropout_layers))


def read_result(path: str, framework: str) -> Side:
    tensors, extra = load_tensors(Path(path))
    losses = [float(v) for v in extra["losses"]]
    return Side(framework, losses, tensors, int(extra["dropout"]))


def main(argv: list[str]) -> int:
    """``REQUEST RESULT [REQUEST RESULT ...]``: each request run in turn, in this process."""
    if not argv or len(argv) % 2:
        print("usage: python -m bench.parity.side REQUEST RESULT [REQUEST RESULT ...]",
              file=sys.stderr)  # fmt: skip
        return 2
    for request, result in zip(argv[::2], argv[1::2], strict=True):
        init, extra = load_tensors(Path(request))
        spec_fields = json.loads(str(extra["spec"]))
        framework = spec_fields.pop("framework")
        batches = read_batches(extra)
        write_result(result, run(framework, Spec(**spec_fields), init, batches))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
