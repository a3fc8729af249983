"""Trial hooks (bench.trial.runtime.hooks): the parity check's hook is an explicit argument of the
trial, read by the entry points from the trial folder's ``hooks.json``; each process gets
its own slice of the check's batches; a trial with the hook carries the tag
``bench.hooks=parity``, one without does not, and an environment variable changes nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import tracking
from bench.core.config import BenchConfig, DataConfig, ModelConfig, TelemetryConfig
from bench.core.result import ERROR, OK, TrialResult
from bench.core.strategy_configs import DDPConfig, KvstoreDeviceConfig
from bench.launchers import base, inline, process
from bench.trial.data import ArrayBatches
from bench.trial.frameworks import parity_hook
from bench.trial.loop import run_trial
from bench.trial.runtime.hooks import HOOKS, NO_HOOKS, TrialHooks

# -- what slice of the parity batches each process gets ---------------------------------------


def numbered(steps: int, batch: int) -> ArrayBatches:
    """``steps`` global batches whose samples say which step and place they are: sample j
    of step s is filled with 100 * s + j, and its label is j."""
    images = [np.stack([np.full((1, 2, 2), 100 * s + j, np.float32) for j in range(batch)])
              for s in range(steps)]  # fmt: skip
    labels = [np.arange(batch, dtype=np.int64) for _ in range(steps)]
    return ArrayBatches(images, labels)


def saved(tmp_path: Path, b: ArrayBatches) -> Path:
    np.savez(tmp_path / "batches.npz", **parity_hook.batch_arrays(b))  # type: ignore[arg-type]
    return tmp_path


def ids(b: ArrayBatches) -> list[list[int]]:
    """Each batch as the values of its samples (100 * step + place)."""
    return [[int(x[i, 0, 0, 0]) for i in range(len(x))] for x in b.images]


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_each_data_parallel_process_takes_its_consecutive_share_of_every_step(
    index: int, tmp_path: Path
) -> None:
    """4 processes at batch 2 of a global batch of 8: process i takes samples 2i and 2i+1
    of every step, in step order, labels with them."""
    where = saved(tmp_path, numbered(steps=3, batch=8))
    mine = parity_hook.batches(where, BenchConfig(batch_size=2, workers=4), index)
    assert ids(mine) == [[100 * s + 2 * index, 100 * s + 2 * index + 1] for s in range(3)]
    assert [y.tolist() for y in mine.labels] == [[2 * index, 2 * index + 1]] * 3


def test_the_shares_of_all_processes_are_the_whole_batch_once(tmp_path: Path) -> None:
    where = saved(tmp_path, numbered(steps=2, batch=6))
    cfg = BenchConfig(batch_size=3, workers=2)
    shares = [ids(parity_hook.batches(where, cfg, i)) for i in range(2)]
    for step in range(2):
        together = shares[0][step] + shares[1][step]
        assert together == [100 * step + j for j in range(6)]


def test_one_process_at_the_full_batch_takes_every_step_whole(tmp_path: Path) -> None:
    where = saved(tmp_path, numbered(steps=2, batch=4))
    mine = parity_hook.batches(where, BenchConfig(batch_size=4), 0)
    assert ids(mine) == [[0, 1, 2, 3], [100, 101, 102, 103]]


def test_a_process_stepping_several_devices_gets_one_batch_per_device_in_order(
    tmp_path: Path,
) -> None:
    """kvstore_device at 2 devices x batch 2: one process steps 4 samples, cut into one host
    batch per device, device 0 first, step after step."""
    where = saved(tmp_path, numbered(steps=2, batch=4))
    cfg = BenchConfig(batch_size=2, workers=2, distributed=KvstoreDeviceConfig())
    mine = parity_hook.batches(where, cfg, 0)
    assert ids(mine) == [[0, 1], [2, 3], [100, 101], [102, 103]]


def test_a_process_beyond_the_global_batch_is_refused(tmp_path: Path) -> None:
    where = saved(tmp_path, numbered(steps=1, batch=4))
    with pytest.raises(RuntimeError, match="process 2 at 2 samples per step needs 6"):
        parity_hook.batches(where, BenchConfig(batch_size=2, workers=3), 2)


# -- hooks.json -----------------------------------------------------------------------------------


def test_a_folder_without_hooks_json_has_no_hooks(tmp_path: Path) -> None:
    hooks = TrialHooks.read(tmp_path)
    assert hooks == NO_HOOKS and hooks.names == [] and hooks.environment() == {}


def test_hooks_json_round_trips_and_a_relative_folder_is_the_trial_folders(
    tmp_path: Path,
) -> None:
    TrialHooks(parity=Path("parity")).write(tmp_path)
    assert TrialHooks.read(tmp_path) == TrialHooks(parity=tmp_path / "parity")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    TrialHooks.read(tmp_path).write(elsewhere)  # as the coordinator passes them on
    assert TrialHooks.read(elsewhere).parity == tmp_path / "parity"
    NO_HOOKS.write(elsewhere)
    assert not (elsewhere / HOOKS).exists()


@pytest.mark.parametrize(
    "text", ['{"parity": "p", "faster": "x"}', '["parity"]', '{"parity": ""}', "not json"]
)
def test_a_hooks_file_bench_did_not_write_is_refused(text: str, tmp_path: Path) -> None:
    (tmp_path / HOOKS).write_text(text)
    with pytest.raises(ValueError, match="hooks"):
        TrialHooks.read(tmp_path)


# -- a trial with the hook, one without, and a stray environment variable ----------------------


def tiny() -> BenchConfig:
    return BenchConfig(
        model=ModelConfig(name="lenet5"),
        batch_size=4,
        epochs=2,
        steps_per_epoch=1,
        warmup_steps=0,
        data=DataConfig(num_batches=2),
        telemetry=TelemetryConfig(enabled=False),
        device="cpu",
    )


@pytest.fixture(scope="module")
def parity_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the parity check writes: torch's seeded initial weights and 2 global batches."""
    from bench.parity import check
    from bench.trial import parity as side
    from bench.trial.data import synthetic

    where = tmp_path_factory.mktemp("parity")
    spec = side.Spec(model="lenet5", batch_size=4, steps=2)
    parity_hook.save_tensors(where / "init.npz", check.initial_weights(spec))
    cfg = tiny()
    np.savez(where / "batches.npz", **parity_hook.batch_arrays(synthetic(cfg)))  # type: ignore[arg-type]
    return where


def test_a_trial_with_the_parity_hook_uses_it_and_says_so(parity_folder: Path) -> None:
    result = run_trial(tiny(), hooks=TrialHooks(parity=parity_folder))
    assert result.status == OK, result.error
    assert result.environment["hooks"] == "parity"
    assert tracking.environment_tags(result.environment)["bench.hooks"] == "parity"
    _, written = parity_hook.load_tensors(parity_folder / "rank0.npz")
    assert written["losses"].tolist() == [r.loss for r in result.epochs]
    (parity_folder / "rank0.npz").unlink()


def test_a_trial_without_hooks_and_a_stray_variable_run_as_normal(
    parity_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BENCH_PARITY_DIR once switched the hook on from the environment; now it is ignored."""
    monkeypatch.setenv("BENCH_PARITY_DIR", str(parity_folder))
    result = run_trial(tiny())
    assert result.status == OK, result.error
    assert "hooks" not in result.environment
    assert "bench.hooks" not in tracking.environment_tags(result.environment)
    assert not (parity_folder / "rank0.npz").exists()


# -- what the entry points and launchers do with the file --------------------------------------


def test_the_inline_launcher_hands_the_folders_hooks_to_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got: list[TrialHooks] = []

    def execute(cfg: BenchConfig, on_epoch: Any, workdir: Path, hooks: TrialHooks) -> TrialResult:
        got.append(hooks)
        return TrialResult(OK, "torch", "lenet5", "train")

    monkeypatch.setattr(inline, "execute", execute)
    monkeypatch.setenv("BENCH_PARITY_DIR", str(tmp_path))
    inline.Launcher().launch(tiny(), tmp_path, lambda e: None)
    TrialHooks(parity=Path("parity")).write(tmp_path)
    inline.Launcher().launch(tiny(), tmp_path, lambda e: None)
    assert got == [NO_HOOKS, TrialHooks(parity=tmp_path / "parity")]


def test_a_result_the_launcher_makes_itself_names_the_hooks_too(tmp_path: Path) -> None:
    """A trial that could not start (or timed out, or died) still says it had a hook."""

    class Refusing(process.Launcher):
        def start(self, cfg: BenchConfig, workdir: Path, environment: dict[str, str]) -> Any:
            raise base.LaunchError("no start here")

    TrialHooks(parity=Path("parity")).write(tmp_path)
    result = Refusing().launch(tiny(), tmp_path, lambda e: None)
    assert (result.status, result.environment) == (ERROR, {"hooks": "parity"})
    (tmp_path / HOOKS).write_text('{"faster": "x"}')
    result = Refusing().launch(tiny(), tmp_path, lambda e: None)
    assert result.status == ERROR and "unknown hooks ['faster']" in result.error


def test_the_worker_tags_a_distributed_trial_whose_ranks_all_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """execute marks the result itself, not only run_trial: a coordinator's result with no
    rank's environment in it still names the hook, and the ranks' folder has the file."""
    from bench.trial import worker
    from bench.trial.distributed import coordinator

    def run(cfg: BenchConfig, on_epoch: Any, workdir: Path, hooks: TrialHooks) -> TrialResult:
        hooks.write(workdir)
        return TrialResult(ERROR, cfg.framework.name, cfg.model.name, cfg.mode)

    monkeypatch.setattr(coordinator, "run", run)
    cfg = dataclasses.replace(tiny(), distributed=DDPConfig(), workers=2)
    result = worker.execute(cfg, None, tmp_path, TrialHooks(parity=tmp_path / "p"))
    assert result.environment == {"hooks": "parity"}
    assert TrialHooks.read(tmp_path).parity == tmp_path / "p"


def test_a_run_a_check_harness_changed_is_never_reused_nor_reported(tmp_path: Path) -> None:
    """An ok run tagged bench.hooks measured something else than its configuration says:
    a later sweep runs the configuration again, and the report leaves the run out."""
    from bench.report import build
    from bench.tracking.records import RunRecord, RunSet

    store = tracking.MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")
    cfg = tiny()
    sweep = store.start_sweep("sweep", {})
    run = store.start_trial(sweep, cfg, "hooked", {})
    result = TrialResult(OK, cfg.framework.name, cfg.model.name, cfg.mode)
    result.summary["trial_samples_per_s"] = 100.0
    TrialHooks(parity=tmp_path).mark(result)
    run.finish(result, [])
    assert store.client.get_run(run.run_id).data.tags["bench.hooks"] == "parity"  # type: ignore[attr-defined]
    assert store.find_ok_run(cfg) is None
    plain = store.start_trial(sweep, cfg, "plain", {})
    plain.finish(dataclasses.replace(result, environment={}), [])
    assert store.find_ok_run(cfg)["run_id"] == plain.run_id  # type: ignore[attr-defined,index]

    def record(name: str, tags: dict[str, str]) -> RunRecord:
        params = {"framework.name": "torch", "model.name": "lenet5", "mode": "train"}
        return RunRecord(name, name, 0, params, {"bench.status": "ok", **tags}, {})

    report = build(RunSet([record("a", {"bench.hooks": "parity"}), record("b", {})], "u", "e"))
    overview = report.sections[0].blocks
    assert overview[0].startswith("1 runs (1 ok)")  # type: ignore[union-attr]
    assert "1 run of a check harness (tag bench.hooks" in overview[1] and ": a." in overview[1]  # type: ignore[operator]
