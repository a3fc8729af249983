"""One framework's side of a parity check: its own trial session (the model, loss and
optimizer a trial of that framework builds), given the reference's initial weights and
batches, stepped N times; the loss of every step and the weights after the last.

In-process for the host's frameworks; ``python -m bench.parity.side REQUEST RESULT`` (two
.npz files) with the framework's own interpreter for one that lives in its own environment
(MXNet).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

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
    notes: list[str] = field(default_factory=list)


def run(framework: str, spec: Spec, init: list[Tensor], batches: HostBatches) -> Side:
    """Train ``framework``'s session from ``init`` on ``batches``, one per step."""
    from bench import frameworks

    threads = spec.threads or os.cpu_count() or 1
    frameworks.before_import(framework, threads)
    adapter = frameworks.load(framework)
    cfg = spec.config(framework)
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


# -- the child process: request and result as .npz files -----------------------------------


def write_request(
    path: str, framework: str, spec: Spec, init: list[Tensor], b: HostBatches
) -> None:
    arrays: dict[str, np.ndarray] = {
        "spec": np.array(json.dumps({"framework": framework, **asdict(spec)})),
        "names": np.array(json.dumps([[t.name, t.kind] for t in init])),
    }
    arrays.update({f"w{i:04d}": t.value for i, t in enumerate(init)})
    arrays.update({f"x{i:04d}": x for i, x in enumerate(b.images)})
    arrays.update({f"y{i:04d}": y for i, y in enumerate(b.labels)})
    np.savez(path, **arrays)  # type: ignore[arg-type]


def _tensors(saved: Any, names: list[list[str]]) -> list[Tensor]:
    return [Tensor(n, k, saved[f"w{i:04d}"]) for i, (n, k) in enumerate(names)]


def write_result(path: str, side: Side) -> None:
    arrays: dict[str, np.ndarray] = {
        "losses": np.asarray(side.losses, dtype=np.float64),
        "names": np.array(json.dumps([[t.name, t.kind] for t in side.weights])),
        "dropout": np.array(side.dropout_layers),
    }
    arrays.update({f"w{i:04d}": t.value for i, t in enumerate(side.weights)})
    np.savez(path, **arrays)  # type: ignore[arg-type]


def read_result(path: str, framework: str) -> Side:
    with np.load(path) as saved:
        names = json.loads(str(saved["names"]))
        return Side(
            framework,
            [float(v) for v in saved["losses"]],
            _tensors(saved, names),
            int(saved["dropout"]),
        )


def main(argv: list[str]) -> int:
    request, result = argv
    with np.load(request) as saved:
        spec_fields = json.loads(str(saved["spec"]))
        framework = spec_fields.pop("framework")
        init = _tensors(saved, json.loads(str(saved["names"])))
        count = len([k for k in saved.files if k.startswith("x")])
        batches = HostBatches(
            [saved[f"x{i:04d}"] for i in range(count)], [saved[f"y{i:04d}"] for i in range(count)]
        )
    write_result(result, run(framework, Spec(**spec_fields), init, batches))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
