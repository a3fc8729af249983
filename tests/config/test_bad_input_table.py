"""Every config key, with each kind of bad value that applies to its type, through the CLI's
own entry point in this process (no trial starts, so no subprocess): each is refused with
exit status 2, a message naming the field, and no MLflow store created."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import cli
from bench.core.config import BenchConfig, flatten, to_dict

FIELDS = flatten(to_dict(BenchConfig()))
# String fields whose value is one of a list (a group's option, or a choice bench checks).
CHOICES = {
    "framework": "framework",
    "model": "model",
    "data": "data",
    "launcher": "launcher",
    "mode": "mode",
    "device": "device",
    "precision": "precision",
    "optimizer.name": "optimizer.name",
    "model.source": "model.source",
    "distributed": "distributed",
    "launcher.docker.variant": "launcher.docker.variant",
    "tracking.uri": "tracking.uri",
    "onednn": "onednn",
    "tuning": "tuning",
    "serve.scenario": "serve.scenario",
    "serve.mode": "serve.mode",
    "goal": "goal",
    "goal.metric": "goal.metric",
    "contention": "contention",
}
# Numbers with a lower bound: every one of them, whatever the rest of the config.
BOUNDED = [k for k, v in FIELDS.items() if isinstance(v, int | float) and not isinstance(v, bool)]


def cases() -> list[tuple[list[str], str]]:
    out: list[tuple[list[str], str]] = []
    for key, value in FIELDS.items():
        if isinstance(value, bool):
            out.append(([f"{key}=maybe"], key))
        elif isinstance(value, int | float):
            out.append(([f"{key}=abc"], key))  # wrong type
    for key in BOUNDED:
        low = -2 if key == "steps_per_epoch" else -1  # -1 is steps_per_epoch's auto
        out.append(([f"{key}={low}"], key))  # out of range
    for key, field in CHOICES.items():
        value = "ftp://x" if key == "tracking.uri" else "nope"
        out.append(([f"{key}={value}"], field))
    out += [
        (["batchsize=4"], "batchsize"),  # no such key
        (["+batchsize=4"], "batchsize"),  # no such key, added past Hydra's check
        (["+optimizer.nesterov=true"], "optimizer.nesterov"),
        # Unknown keys and group options in bench's words, the nearest named (issue 50).
        (["modle=lenet5"], "did you mean model=lenet5?"),
        (["+modle=lenet5"], "did you mean model=lenet5?"),
        (["framework=pytorch"], "did you mean framework=torch?"),
        (["plan", "framework=torch,pytorch"], "did you mean framework=torch?"),
        (["model.sorce=bench"], "did you mean model.source"),
        (["batch_size=${oc.env:BENCH_NO_SUCH_VARIABLE}"], "batch_size"),  # cannot resolve
        (["-m", "batch_size=4,${oc.env:BENCH_NO_SUCH_VARIABLE}"], "batch_size"),
        (["-m", "model=lenet5,notamodel", "hydra.sweeper.max_batch_size=1"], "notamodel"),
        # Repeats, in the words tests/e2e/test_report.py once ran `python -m bench` for each.
        (["-m", "repeats=2,3"], "repeats: give one number"),
        (["repeats=3"], "repeats: 3 runs of a configuration are a sweep; add -m"),
        (["-m", "repeats=2", "repeat=1"], "repeat: set by the sweeper"),
        (["tracking.experiment= "], "tracking.experiment"),
        (["repeats=auto"], "repeats: auto runs of a configuration are a sweep; add -m"),
        (["-m", "repeats=auto", "max_repeats=1"], "max_repeats"),
        (["equivalence_margin=0.5"], "equivalence_margin"),
        # The contention gate (docs/measuring.md, "A shared machine"): the allowed values named.
        (
            ["contention=sometimes"],
            "contention: 'sometimes' is not allowed; choose one of wait, tag, off",
        ),
        # tuning=best (docs/tuning.md)
        (["tuning=best", "tuning.keys=[xla]"], "tuning.keys"),
        (["tuning=best", "tuning.keys=[serve.max_batch]"], "tuning.keys: serve.max_batch"),
        (["tuning=best", "distributed=ddp", "workers=2"], "tuning"),
        (["tuning=best", "launcher=inline"], "tuning"),
        # goal=accuracy: time to accuracy (docs/accuracy.md)
        (["goal=accuracy", "data=digits", "goal.target=1.5"], "goal.target"),
        (["goal=accuracy", "data=digits", "goal.target=0"], "goal.target"),
        (["goal=accuracy", "data=digits", "goal.eval_every=2"], "goal.eval_every"),
        (["goal=accuracy", "data=digits", "mode=infer"], "goal: goal=accuracy trains"),
        (["goal=accuracy", "data=digits", "mode=generate"], "goal: goal=accuracy trains"),
        (["goal=accuracy"], "goal: goal=accuracy needs a labelled data set"),
        (["goal=accuracy", "data=digits", "data.evaluate=false"], "data.evaluate"),
        # data=folder (docs/your-data.md); the folder's own checks: tests/unit/test_folder_data.py
        (["data=folder", "data.root=/nonexistent"], "data.root"),
        (["data=folder", "framework=mxnet"], "data: framework=mxnet reads no image folder"),
        (["framework=tf", "channels_last=true"], "channels_last"),
        (["framework=mxnet", "cudnn_benchmark=true"], "cudnn_benchmark"),
        # mode=serve (docs/serving.md)
        (["mode=serve", "serve.target_qps=0"], "serve.target_qps"),
        (["mode=serve", "serve.latency_bound_ms=0"], "serve.latency_bound_ms"),
        (["mode=serve", "serve.max_batch=0"], "serve.max_batch"),
        (["mode=serve", "serve.latency_percentile=1"], "serve.latency_percentile"),
        (["mode=serve", "serve.scenario=offline", "serve.mode=find_peak"], "serve.mode: find_peak"),
        (["mode=serve", "distributed=ddp", "workers=2"], "distributed: mode=serve"),
        (["mode=serve", "serve.tpot_bound_ms=5"], "serve.tpot_bound_ms: a time-per-output-token"),
        (["mode=serve", "model=hf", "model.name=llama", "compile=true"], "compile: not wired"),
        (
            ["mode=serve", "serve.mode=find_peak", "serve.min_queries=100"],
            "serve.min_queries: find_peak looks for a load LoadGen calls VALID",
        ),
        (
            ["mode=serve", "model=hf", "model.name=llama", "tuning=best"],
            "tuning: best searches serving by one figure",
        ),
        (["mode=serve", "serve.mode=find_peak", "serve.runs=3"], "serve.runs: several LoadGen"),
        (["mode=serve", "serve.runs=0"], "serve.runs"),
        (["mode=serve", "breakdown=true"], "breakdown: not wired for mode=serve"),
        # Rules across fields.
        (["model=alexnet", "image_size=32"], "image_size"),
        (["precision=fp16", "device=cpu"], "precision"),
        (["compile=true", "warmup_steps=0"], "warmup_steps"),
        (["data=cifar10", "data.root=/nonexistent"], "data.root"),
        (["data=cifar100", "num_classes=10"], "num_classes"),
        (["data=synthetic", "steps_per_epoch=0"], "steps_per_epoch"),
        (["min_window_s=0"], "min_window_s"),
        (["max_steps_per_epoch=2"], "max_steps_per_epoch"),
        (["model=lstm", "data=digits"], "data"),
        (["framework=tf", "distributed=ddp"], "distributed"),
        (["distributed=none", "workers=2"], "workers"),
        (["distributed=ddp", "ps=1"], "ps"),
        (["distributed=ddp", "nodes=2"], "nodes"),
        (["distributed=model_parallel", "framework=tf", "workers=3"], "workers"),
        (["distributed=ddp", "mode=infer"], "mode"),
        (["distributed=ddp", "profile=true"], "profile"),
        (["framework=mxnet", "launcher=inline"], "launcher"),
        (["framework=mxnet", "precision=bf16"], "precision"),
        # jax sets Keras' backend before Keras loads: a process of its own (issue 35).
        (["framework=jax", "launcher=inline"], "launcher: inline"),
        (
            ["framework=jax", "model=transformer", "distributed=jax_distributed", "workers=2"],
            "distributed: framework=jax trains sequence models undistributed or under jax_dp",
        ),
        (["framework=jax", "model=lstm", "model.source=flax"], "model.source: flax has no lstm"),
        (["framework=jax", "distributed=ddp", "workers=2"], "distributed: 'ddp'"),
        (["framework=torch", "distributed=jax_dp", "workers=2"], "distributed: 'jax_dp'"),
        # model.source=flax: the zoo's Flax NNX models, for framework=jax only (issue 35).
        (["framework=torch", "model=lenet5", "model.source=flax"], "model.source: flax"),
        (["framework=jax", "model=vgg16", "model.source=flax"], "model.source: flax has no"),
        (["framework=jax", "model=lenet5", "model.source=flax", "precision=bf16"], "precision"),
        (["model.source=stock", "model=lenet5"], "model.source"),
        (["launcher=docker", "launcher.docker.gpus=zero"], "launcher.docker.gpus"),
        (["launcher=docker", "launcher.docker.heartbeat_timeout_s=1"], "heartbeat_timeout_s"),
        (["tracking.uri=sqlite:////proc/bench-nope/m.db"], "tracking.uri"),
        (["tracking.uri=/tmp/bench-file-store"], "tracking.uri"),  # MLflow 3's file store
        (["launcher=docker", "launcher.docker.image='x;touch /tmp/pwned'"], "docker.image"),
        (["launcher.docker.base_image='Ubuntu Latest'"], "launcher.docker.base_image"),
        (["tracking.uri=file:///tmp/bench-file-store"], "tracking.uri"),
        # Issue 51: non-finite learning rates; a version that would name a folder elsewhere.
        (["tracking.uri=sqlite://"], "tracking.uri: 'sqlite://' names no database file"),
        (["tracking.uri=sqlite:///"], "tracking.uri: 'sqlite:///' names no database file"),
        (["tracking.uri=http://"], "tracking.uri: 'http://' names no host"),
        (["tracking.uri=sqlite:////dev/null"], "is not a regular file"),
        (["tracking={uri:'http://u:pw@h:9'}"], "MLFLOW_TRACKING_PASSWORD"),
        (["launcher=docker", "launcher.docker.image='bad name!!'"], "launcher.docker.image"),
        (["launcher=docker", "launcher.docker.image=UPPER/Case:tag"], "launcher.docker.image"),
        (["launcher=docker", "launcher.docker.image=../../etc"], "launcher.docker.image"),
        (["optimizer.lr=nan"], "optimizer.lr"),
        (["optimizer.lr=inf"], "optimizer.lr"),
        (["optimizer.lr=1e400"], "optimizer.lr"),
        (["framework.version='../../x'"], "framework.version"),
        (["claims=notalist"], "claims"),
        (["claims=[{kind: rumour}]"], "claims"),
        (["claims=[{kind: comparison, faster: torch}]"], "slower"),
    ]
    from bench.checks.device import host_gpus

    if host_gpus()[0] == 0:  # the device preflight, for real, on a host without a GPU
        out += [
            (["device=cuda"], "device"),
            (["-m", "framework=torch,tf", "device=cuda"], "device"),
        ]
    return out


CASES = cases()


def run_cli(args: list[str], root: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    extra = [
        f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
        f"hydra.run.dir={root / 'outputs'}",
        f"hydra.sweep.dir={root / 'multirun'}",
        # Leave logging alone: Hydra's `disabled` preset reconfigures it, which closes the
        # handler TensorFlow's absl put on the root logger (in this test process: on a
        # stream pytest captures).
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
    ]
    if any(a.startswith("tracking.uri=") for a in args):
        extra = extra[1:]
    monkeypatch.setattr(sys, "argv", ["bench", *args, *extra])
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(SystemExit) as done:
            cli.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        GlobalHydra.instance().clear()
    return int(done.value.code or 0)


def refused(args: list[str], root: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> str:
    """What the CLI said on stderr for ``args``, asserting it exited 2 before any store
    (and so any run) was made."""
    code = run_cli(args, root, monkeypatch)
    err = str(capsys.readouterr().err)
    assert code == 2, err
    assert not (root / "mlflow.db").exists(), "no store (and so no run) may be made"
    return err


@pytest.mark.parametrize(("args", "field"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_refused_naming_its_field(
    args: list[str], field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code = run_cli(args, tmp_path, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2, err
    assert field in err, err
    assert not (tmp_path / "mlflow.db").exists(), "no store (and so no run) may be made"


def test_the_table_covers_every_key() -> None:
    named = {a.split("=")[0].lstrip("+") for args, _ in CASES for a in args}
    missing = [k for k, v in FIELDS.items() if not isinstance(v, str) and k not in named]
    assert not missing, missing
    assert len(CASES) >= 100


HYDRA_WORDS = ("HYDRA_FULL_ERROR", "Config search path", "To append", "Could not override")


@pytest.mark.parametrize(
    "args", [["modle=lenet5"], ["+modle=lenet5"], ["framework=pytorch"], ["-m", "data=cifar"]]
)
def test_unknown_names_get_one_line_in_benchs_words(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    err = refused(args, tmp_path, monkeypatch, capsys)
    lines = [line for line in err.splitlines() if line.startswith("bench: ")]
    assert len(lines) == 1, err
    assert not any(word in err for word in HYDRA_WORDS), err
