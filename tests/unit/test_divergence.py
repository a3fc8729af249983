"""Diverged training is a result of its own (``diverged``), not ``ok``: a non-finite mean loss
in any epoch ends the trial so, the sweep goes on and its summary says so, a rerun does not
reuse the run, and the report lists it and compares it nowhere."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench import tracking
from bench.core.config import BenchConfig, ModelConfig, OptimizerConfig
from bench.core.result import DIVERGED, TrialResult
from bench.launchers.base import Launcher
from bench.report import build, render
from bench.sweep import session as session_mod
from bench.trial import frameworks
from bench.trial.loop import EpochCallback, run_trial
from tests.report_data import record, runset
from tests.unit.test_timing_loop import ScriptedSession


class NaNSession(ScriptedSession):
    """Trains normally until step ``at``, then its loss is NaN (weights gone to infinity)."""

    def __init__(self, steps: int, at: int) -> None:
        super().__init__([0.0] * steps)
        self.at, self.done = at, 0

    def step(self, batch: None) -> None:
        super().step(batch)
        self.done += 1
        if self.done >= self.at:
            self.losses[-1] = math.nan

    def forward_flops_per_sample(self) -> None:
        return None


class ScriptedAdapter:
    def __init__(self, session: ScriptedSession) -> None:
        self.session = session

    def configure(self, cfg: BenchConfig, threads: int) -> None:
        pass

    def environment(self) -> dict[str, str]:
        return {}

    def prepare(self, cfg: BenchConfig, host: Any) -> ScriptedSession:
        return self.session

    def is_oom(self, exc: BaseException, capped: bool = False) -> bool:
        return False


def tiny(**kw: Any) -> BenchConfig:
    return BenchConfig(
        model=ModelConfig(name="lenet5"),
        epochs=3,
        steps_per_epoch=2,
        warmup_steps=1,
        batch_size=4,
        device="cpu",
        **kw,
    )


def test_a_nan_loss_in_any_epoch_ends_the_trial_diverged(monkeypatch: pytest.MonkeyPatch) -> None:
    session = NaNSession(steps=1 + 3 * 2, at=1 + 3 * 2)  # the last epoch's last step
    monkeypatch.setattr(frameworks, "load", lambda name: ScriptedAdapter(session))
    result = run_trial(tiny())
    assert result.status == DIVERGED
    assert [r.loss for r in result.epochs][:2] == [1.0, 1.0]
    assert math.isnan(result.epochs[2].loss or 0.0)
    assert "epoch 3 of 3" in result.error and "optimizer.lr" in result.error


def test_a_trial_stops_at_its_first_diverged_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    session = NaNSession(steps=1 + 3 * 2, at=2)  # the first epoch's first step
    monkeypatch.setattr(frameworks, "load", lambda name: ScriptedAdapter(session))
    result = run_trial(tiny())
    assert result.status == DIVERGED and len(result.epochs) == 1
    assert "epoch 1 of 3" in result.error and "the trial stopped there" in result.error


def test_a_real_torch_trial_at_lr_1e9_diverges() -> None:
    result = run_trial(tiny(optimizer=OptimizerConfig(lr=1e9)))
    assert result.status == DIVERGED, result.error
    assert result.error.startswith("training diverged: the mean loss of epoch 1")


@pytest.mark.parametrize("other", ["stopped", "failed", "diverged"])
def test_a_rank_that_diverged_makes_a_distributed_trial_diverged(
    tmp_path: Path, other: str
) -> None:
    """ddp: rank1's loss went NaN and it exited 1; rank0 was stopped by the coordinator (no
    result), failed when its peer left, or diverged too: the trial is ``diverged``, naming
    the rank, never ``dist_failure`` (the coordinator's assembly, below the process launch)."""
    from types import SimpleNamespace

    from bench.core.config import distributed_config
    from bench.core.result import DIST_FAILURE, ERROR, OK
    from bench.trial.distributed import coordinator, launch
    from bench.trial.runtime.protocol import RESULT, STOPPED, write_json_atomic

    cfg = tiny(workers=2, distributed=distributed_config("ddp"))
    why = "training diverged: the mean loss of epoch 2 of 3 is nan (not finite)"
    results = {1: TrialResult(DIVERGED, "torch", "lenet5", "train", error=why)}
    if other != "stopped":
        status, error = (
            (ERROR, "RuntimeError: Connection reset by peer")
            if other == "failed"
            else (DIVERGED, why)
        )
        results[0] = TrialResult(status, "torch", "lenet5", "train", error=error)
    for i in range(2):
        (tmp_path / f"rank{i}").mkdir()
        if i in results:
            write_json_atomic(tmp_path / f"rank{i}" / RESULT, results[i].to_dict())
        else:
            (tmp_path / f"rank{i}" / STOPPED).touch()
    outcome = launch.Outcome(False, "rank1 exited with status 1", {"rank0": -15, "rank1": 1})
    result = coordinator._assemble(
        cfg, SimpleNamespace(name="ddp"), tmp_path, 2, outcome,
        TrialResult(ERROR, "torch", "lenet5", "train"),
    )  # fmt: skip
    assert result.status == DIVERGED and result.status not in (OK, DIST_FAILURE)
    first = 0 if other == "diverged" else 1  # the first rank that diverged
    assert result.error.splitlines()[0] == f"worker {first} (rank{first}): {why}"


class Diverging(Launcher):
    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        result = TrialResult(DIVERGED, cfg.framework.name, cfg.model.name, cfg.mode)
        result.error = "training diverged: the mean loss of epoch 1 of 2 is nan (not finite)"
        result.summary["trial_samples_per_s"] = 50.0
        return result


@pytest.mark.slow
def test_a_sweep_goes_on_says_so_and_reruns_a_diverged_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tracking.MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")
    cfg = tiny()
    rows = []
    for attempt in range(2):
        sweep_id = store.start_sweep(f"sweep{attempt}", {})
        sweep = session_mod.Sweep(store, sweep_id, 2, launcher=lambda name: Diverging())
        rows = [sweep.run(cfg, f"trial{attempt}", tmp_path / f"t{attempt}", 1)]
        assert sweep.finish(rows) == 1  # a trial that did not end ok: exit 1, as ever
    assert [r.status for r in rows] == [DIVERGED]  # not "skipped": run again
    assert store.find_ok_run(cfg) is None
    out = capsys.readouterr().out
    assert "trial1  diverged" in out  # the summary table
    assert "1 diverged: an epoch's training loss was not finite" in out


def test_the_report_lists_diverged_runs_and_compares_them_nowhere() -> None:
    runs = [record(f, rate=r, repeat=i) for i in range(4) for f, r in (("torch", 125), ("tf", 100))]
    diverged = [
        record("tf", status=DIVERGED, repeat=i, metrics={"trial_samples_per_s": 1000.0})
        for i in range(4)
    ]
    text = render.to_markdown(build(runset(runs + diverged)))
    assert "4 runs diverged" in text
    assert all(r.name in text for r in diverged)
    # The diverged tf runs, ten times faster, would have turned the verdict had they counted.
    assert "torch is faster than tf by 25.0%" in text and "(n=4)" in text


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_inference_whose_output_is_not_finite_is_diverged(framework: str) -> None:
    """Inference has no loss: a model computing NaN (here every weight set to NaN after
    the build) is found by one untimed forward pass after the windows, never ok."""
    import dataclasses

    import numpy as np

    def poisoned(adapter: Any, cfg: BenchConfig, host: Any) -> Any:
        session = adapter.prepare(cfg, host)
        if framework == "torch":
            for p in session.model.parameters():
                p.data.fill_(float("nan"))
        else:
            for w in session.model.weights:
                w.assign(np.full(w.shape, np.nan, dtype=np.float32))
        return session

    cfg = dataclasses.replace(tiny(mode="infer"), epochs=1)
    cfg.framework.name = framework
    cfg.telemetry.enabled = False
    result = run_trial(cfg, prepare=poisoned)
    assert result.status == DIVERGED, result.error[-500:]
    assert "output is not finite" in result.error
    assert run_trial(cfg).status == "ok"  # the same trial, unpoisoned
