"""One framework's side of a parity check: its own trial session (the model, loss and
optimizer a trial of that framework builds), given the reference's initial weights and
batches, stepped N times; the loss of every step and the weights after the last.

In-process for the host's frameworks; ``python -m bench.trial.parity REQUEST RESULT ...``
(pairs of .npz files, run in turn) with the framework's own interpreter for one that lives
in its own environment (MXNet).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.config import (
    BenchConfig,
    DataConfig,
    FrameworkConfig,
    ModelConfig,
    OptimizerConfig,
    TelemetryConfig,
)
from bench.core.frameworks import FRAMEWORKS
from bench.core.zoo import NATIVE_SOURCES
from bench.trial.data import ArrayBatches
from bench.trial.frameworks.parity_hook import (
    batch_arrays,
    load_tensors,
    read_batches,
    save_tensors,
)
from bench.trial.frameworks.spaces import DEFAULTS
from bench.trial.frameworks.weights import Tensor, disable_dropout, export, load

# Settings a framework fixes when it is imported: a side with one of them runs in a child
# process of its own, even for a framework of the host's environment.
AT_IMPORT = ("onednn", "threads", "inter_threads")


# A side's label may also name the model's source (``jax[source=flax]``: the zoo's Flax
# model in the jax trial, instead of the Keras one), where the framework has that source.
SOURCE = "source"


def split(label: str) -> tuple[str, dict[str, Any]]:
    """A side's label, ``tf`` or ``tf[compile=true,onednn=off]``: the framework and the
    speed settings it runs with (bench.trial.frameworks.spaces), typed as their defaults; or
    ``jax[source=flax]``: the model's source (bench.core.zoo.NATIVE_SOURCES)."""
    name, _, rest = label.partition("[")
    settings: dict[str, Any] = {}
    for item in filter(None, rest.rstrip("]").split(",")):
        key, _, value = item.partition("=")
        if key == SOURCE:
            if NATIVE_SOURCES.get(value, ("",))[0] != name:
                raise ValueError(
                    f"parity side {label!r}: source: {name} has no source {value!r} (sources: "
                    f"{', '.join(s for s, (f, _) in NATIVE_SOURCES.items() if f == name)})"
                )
            settings[key] = value
            continue
        if key not in DEFAULTS:
            raise ValueError(f"parity side {label!r}: {key!r} is not a speed setting")
        default = DEFAULTS[key]
        if isinstance(default, bool):
            settings[key] = value.lower() == "true"
        elif isinstance(default, int):
            settings[key] = int(value)
        else:
            settings[key] = value
    return name, settings


def label(framework: str, settings: dict[str, Any]) -> str:
    """The label :func:`split` reads."""
    if not settings:
        return framework
    shown = ",".join(f"{k}={str(v).lower()}" for k, v in settings.items())
    return f"{framework}[{shown}]"


def in_child(side_label: str) -> bool:
    """Whether the side must run in a process of its own: a setting fixed at import, or a
    framework that cannot share this process (jax picks Keras' backend before Keras loads)."""
    framework, settings = split(side_label)
    spec = FRAMEWORKS.get(framework)
    return (spec is not None and not spec.inline) or any(k in AT_IMPORT for k in settings)


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

    def config(self, side_label: str) -> BenchConfig:
        framework, settings = split(side_label)
        source = settings.pop(SOURCE, "bench")
        return dataclasses.replace(self._config(framework, source), **settings)

    def _config(self, framework: str, source: str = "bench") -> BenchConfig:
        return BenchConfig(
            framework=FrameworkConfig(name=framework),
            model=ModelConfig(name=self.model, source=source),
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


def run(side_label: str, spec: Spec, init: list[Tensor], batches: ArrayBatches) -> Side:
    """Train the session of the side ``side_label`` (a framework, with any speed settings:
    :func:`split`) from ``init`` on ``batches``, one per step."""
    from bench.trial import frameworks

    framework = split(side_label)[0]
    threads = spec.threads or os.cpu_count() or 1
    cfg = spec.config(side_label)
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
    return Side(side_label, losses, export(framework, session), dropped)


# -- the child process: request and result as .npz files (parity_hook's format) --------------


def write_request(
    path: str, framework: str, spec: Spec, init: list[Tensor], b: ArrayBatches
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
        print("usage: python -m bench.trial.parity REQUEST RESULT [REQUEST RESULT ...]",
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
