"""parity=true in a sweep: which checks run (one per group of compared trials), what the
parent run and each trial get; the checks themselves are replaced by scripted outcomes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench.core.config import BenchConfig, FrameworkConfig, ModelConfig, distributed_config
from bench.parity import check, strategy
from bench.sweep import parity


class Notes:
    def __init__(self) -> None:
        self.notes: list[tuple[str, str, str]] = []

    def note_round(self, sweep_id: str, round_: int, reference_s: float) -> None:
        pass

    def note_parity(self, sweep_id: str, group: str, text: str, verdict: str) -> None:
        self.notes.append((group, verdict, text))


def cfg(framework: str, distributed: str = "none", **kw: Any) -> BenchConfig:
    base = BenchConfig(framework=FrameworkConfig(framework), model=ModelConfig("lenet5"))
    return dataclasses.replace(base, parity=True, distributed=distributed_config(distributed), **kw)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []

    def outcome(passed: bool) -> Any:
        class Fake:
            pass

        fake = Fake()
        fake.passed = passed  # type: ignore[attr-defined]
        return fake

    def fake_check(spec: Any, frameworks: list[str], tolerance: float = 0.01) -> Any:
        calls.append(("frameworks", (spec.model, spec.batch_size, tuple(frameworks))))
        return outcome("mxnet" not in frameworks)  # mxnet's side "fails" here

    def fake_strategy(
        spec: Any, fw: str, strategy: str, workers: int, tolerance: float = 0.01
    ) -> Any:
        calls.append(("strategy", (fw, strategy, workers, spec.batch_size)))
        return outcome(True)

    def fake_async(spec: Any, fw: str, strategy: str, workers: int, tolerance: float = 0.25) -> Any:
        calls.append(("async", (fw, strategy, workers, spec.batch_size, spec.momentum)))
        return outcome(True)

    monkeypatch.setattr(check, "check", fake_check)
    monkeypatch.setattr(strategy, "check_strategy", fake_strategy)
    monkeypatch.setattr(strategy, "check_async", fake_async)
    monkeypatch.setattr(check, "format_outcome", lambda o, show_steps=True: "the table")
    return calls


def test_one_check_per_group_of_compared_trials(scripted: list[Any]) -> None:
    cfgs = [cfg("torch"), cfg("tf"), cfg("torch", repeat=1), cfg("tf", batch_size=64),
            cfg("torch", batch_size=64), cfg("torch", distributed="ddp", workers=2),
            cfg("tf", distributed="ps_async", workers=2), cfg("torch", batch_size=8)]  # fmt: skip
    store = Notes()
    verdicts = parity.run_checks(cfgs, store, "sweep")
    assert sorted(scripted) == sorted([
        ("frameworks", ("lenet5", 32, ("torch", "tf"))),
        ("frameworks", ("lenet5", 64, ("torch", "tf"))),
        ("strategy", ("torch", "ddp", 2, 64)),  # the global batch: 2 workers x 32
    ])  # fmt: skip
    by_name = {g.name: v for g, v in verdicts.items()}
    assert by_name["lenet5-sgd-b32-32px"] == "passed"
    assert by_name["lenet5-sgd-b64-32px-ps_async2"] == "not-covered"
    assert "lenet5-sgd-b8-32px" not in by_name  # one framework: nothing to compare
    assert ("", "passed", "") in store.notes
    assert any(n[0] == "lenet5-sgd-b64-32px-ps_async2" and "not covered" in n[2]
               for n in store.notes)  # fmt: skip
    assert parity.overrides(cfgs[1], verdicts) == ["++hydra.job.env_set.BENCH_PARITY=passed"]
    assert parity.overrides(cfgs[7], verdicts) == ["++hydra.job.env_set.BENCH_PARITY=none"]


def test_a_flax_trial_is_a_side_of_its_own(scripted: list[Any]) -> None:
    """model.source=flax (framework=jax): the check compares its Flax model as the side
    jax[source=flax], beside jax's Keras model and the other frameworks."""
    flax = dataclasses.replace(cfg("jax"), model=ModelConfig("lenet5", source="flax"))
    cfgs = [flax, cfg("jax"), cfg("torch"), cfg("jax", batch_size=8), flax]
    verdicts = parity.run_checks(cfgs, Notes(), "sweep")
    assert scripted == [("frameworks", ("lenet5", 32, ("torch", "jax", "jax[source=flax]")))]
    assert parity.side_of(flax) == "jax[source=flax]" and parity.side_of(cfgs[1]) == "jax"
    assert parity.overrides(flax, verdicts) == ["++hydra.job.env_set.BENCH_PARITY=passed"]


def test_a_model_a_side_cannot_build_and_an_lm_beyond_torch_and_tf_are_not_covered() -> None:
    """What the spec says decides coverage: the model's build in each plain side (MXNet's
    zoo is smaller), and for an LM a build of model=hf in each framework (torch, tf)."""
    group = parity.group_of(cfg("mxnet", model=ModelConfig("mobilenet_v2")))
    assert parity._covered(group, ["torch", "mxnet"]) == "mobilenet_v2 has no MXNet build"
    assert parity._covered(group, ["torch", "jax", "jax[source=flax]"]) == ""
    lm = dataclasses.replace(group, lm=(("family", "llama"),))
    assert parity._covered(lm, ["torch", "tf"]) == ""
    assert parity._covered(lm, ["torch", "jax"]) == (
        "the LM logit check compares torch with tf, not torch, jax"
    )


def test_a_stray_parity_variable_never_tags_a_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweeper hands every job a value (none without a verdict), and a job tags only
    one of the check's own verdicts."""
    monkeypatch.setenv("BENCH_PARITY", "passed-by-hand")
    assert parity.trial_tags() == {}
    monkeypatch.setenv("BENCH_PARITY", "none")
    assert parity.trial_tags() == {}
    monkeypatch.setenv("BENCH_PARITY", "failed")
    assert parity.trial_tags() == {"bench.parity": "failed"}
    plain = dataclasses.replace(cfg("torch"), parity=False)
    assert parity.overrides(plain, {}) == ["++hydra.job.env_set.BENCH_PARITY=none"]


def test_a_failed_check_fails_the_sweeps_verdict(scripted: list[Any]) -> None:
    store = Notes()
    verdicts = parity.run_checks([cfg("torch"), cfg("mxnet")], store, "sweep")
    assert list(verdicts.values()) == ["failed"]
    assert ("", "failed", "") in store.notes


def test_without_parity_nothing_runs(scripted: list[Any]) -> None:
    plain = [dataclasses.replace(c, parity=False) for c in (cfg("torch"), cfg("tf"))]
    assert parity.run_checks(plain, Notes(), "sweep") == {} and scripted == []


def test_strategies_get_their_own_kind_of_check(scripted: list[Any]) -> None:
    """model_parallel's stages both take the whole batch; an asynchronous strategy gets the
    looser check, without momentum, and the table says why."""
    cfgs = [cfg("tf", distributed="model_parallel", workers=2),
            cfg("mxnet", distributed="kvstore_device", workers=2),
            cfg("mxnet", distributed="kvstore_async", workers=2, ps=1)]  # fmt: skip
    store = Notes()
    verdicts = parity.run_checks(cfgs, store, "sweep")
    assert sorted(scripted) == sorted([
        ("strategy", ("tf", "model_parallel", 2, 32)),
        ("strategy", ("mxnet", "kvstore_device", 2, 64)),
        ("async", ("mxnet", "kvstore_async", 2, 64, 0.0)),
    ])  # fmt: skip
    assert set(verdicts.values()) == {"passed"}
    (text,) = [n[2] for n in store.notes if n[0].endswith("kvstore_async2")]
    assert "momentum 0" in text


def hf(framework: str, **kw: Any) -> BenchConfig:
    model = ModelConfig("llama", source="hf", seq_len=16, vocab_size=512, layers=2, hidden=64,
                        heads=4, intermediate=128, max_positions=128)  # fmt: skip
    return dataclasses.replace(cfg(framework, **kw), model=model)


def test_an_hf_lm_gets_the_lm_logit_check_once_per_family_and_size(
    scripted: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """model=hf: one logit check per family and size, whatever the batch, optimizer or
    mode; torch against tf only; the trials get its verdict."""
    checked: list[parity.Group] = []

    def fake_lm(group: parity.Group) -> tuple[str, str]:
        checked.append(group)
        return "passed", "llama: passed: ..."

    monkeypatch.setattr(parity, "lm_check", fake_lm)
    cfgs = [hf("torch"), hf("tf"), hf("torch", batch_size=8), hf("tf", mode="generate"),
            hf("torch", mode="generate"), cfg("torch"), cfg("tf")]  # fmt: skip
    bigger = dataclasses.replace(hf("torch").model, layers=4)
    cfgs += [dataclasses.replace(c, model=bigger) for c in (hf("torch"), hf("tf"))]
    only_torch = dataclasses.replace(hf("torch").model, hidden=128)
    cfgs.append(dataclasses.replace(hf("torch"), model=only_torch))
    store = Notes()
    verdicts = parity.run_checks(cfgs, store, "sweep")
    assert scripted == [("frameworks", ("lenet5", 32, ("torch", "tf")))]  # the zoo's, as before
    assert [dict(g.lm)["num_hidden_layers"] for g in checked] == ["2", "4"]
    assert dict(checked[0].lm) == {
        "hidden_size": "64", "intermediate_size": "128", "max_position_embeddings": "128",
        "num_attention_heads": "4", "num_hidden_layers": "2", "num_key_value_heads": "4",
        "vocab_size": "512",
    }  # fmt: skip
    names = [g.name for g in verdicts]
    assert len(names) == 3 and names[0].startswith("hf-llama-logits-")
    assert len(set(names)) == 3
    for c in cfgs[:5]:  # every batch and mode of the family at that size
        assert parity.overrides(c, verdicts) == ["++hydra.job.env_set.BENCH_PARITY=passed"]
    assert parity.overrides(cfgs[-1], verdicts) == ["++hydra.job.env_set.BENCH_PARITY=none"]
    assert ("", "passed", "") in store.notes


def test_the_lm_check_reads_the_childs_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench.parity --lm's output: passed (exit 0), failed (exit 1), refused (a field the
    converter drops: not covered, naming it), or no line at all (failed to run)."""
    import subprocess

    group = parity.group_of(hf("torch"))
    answers = {
        "passed": (0, "llama: passed: max |logit diff| 2e-07, relative 3e-07"),
        "failed": (1, "llama: FAILED: max |logit diff| 1e-04, relative 1e-04"),
        "not-covered": (2, "llama: refused: model.config.n_inner: keras-hub's converter ..."),
    }
    for verdict, (code, line) in answers.items():
        done = subprocess.CompletedProcess([], code, stdout=f"noise\n{line}\n", stderr="")
        monkeypatch.setattr(subprocess, "run", lambda *a, done=done, **k: done)
        got, text = parity.lm_check(group)
        assert got == verdict and text.endswith(line) and "hidden_size=64" in text
    done = subprocess.CompletedProcess([], 1, stdout="", stderr="ImportError: no keras_hub\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: done)
    assert parity.lm_check(group) == (
        "failed",
        f"parity: {group.name}: the LM check failed to run: ImportError: no keras_hub",
    )


@pytest.mark.slow
def test_the_lm_check_runs_transformers_against_keras_hub() -> None:
    """The real check, in a child process of the pinned TF interpreter (a minute on 2 busy
    cores)."""
    verdict, text = parity.lm_check(parity.group_of(hf("torch")))
    assert verdict == "passed", text
    assert "llama: passed" in text and "torch 147,776, tf 147,776" in text
