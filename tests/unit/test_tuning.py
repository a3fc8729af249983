"""tuning=best below the CLI: the search space, the selection rule, the cache, refusals by the
parity check, the result's tuned settings and the report's section (fake probes: no child
process, no framework)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from bench.checks.rules import check
from bench.core.config import (
    BenchConfig,
    FrameworkConfig,
    ModelConfig,
    TuningConfig,
    flatten,
    to_dict,
)
from bench.core.identity import config_hash, identity
from bench.core.result import OK, EpochRecord, TrialResult
from bench.parity import at_best
from bench.trial import parity as sides
from bench.trial import tuning
from bench.trial.frameworks import spaces
from bench.trial.tuning import cache
from bench.trial.tuning.search import Row, SearchFailed, beats, probe_config, search


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def cfg_of(framework: str = "torch", model: str = "lenet5", **kw: object) -> BenchConfig:
    tuning_cfg = TuningConfig(name="best", probe_s=0.1)
    base = BenchConfig(
        framework=FrameworkConfig(name=framework), model=ModelConfig(name=model), tuning=tuning_cfg
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def result_of(rates: list[float], status: str = OK, compile_s: float = 0.0) -> TrialResult:
    r = TrialResult(status=status, framework="torch", model="lenet5", mode="train")
    r.epochs = [EpochRecord(i + 1, 10, 320, 320 / x, x, 1.0, 1.0, 1.0) for i, x in enumerate(rates)]
    r.phases["compile_time_s"] = compile_s
    r.error = "" if status == OK else "RuntimeError: boom"
    return r


class FakeProbe:
    """Probe results by the settings a candidate changes; records every call."""

    def __init__(self, table: dict[str, Any]) -> None:
        """``table``: by label, a probe's rates, a failure, or a tuple of those for the
        label's successive probes (the last one repeats)."""
        self.table, self.calls = table, []  # type: ignore[var-annotated]

    def __call__(self, cfg: BenchConfig, timeout_s: float) -> TrialResult | str:
        changed = {k: getattr(cfg, k) for k, d in spaces.DEFAULTS.items() if getattr(cfg, k) != d}
        name = sides.label("x", changed)
        seen = self.calls.count(name)
        self.calls.append(name)
        found = self.table.get(name, [100.0, 101.0, 102.0])
        if isinstance(found, tuple):
            found = found[min(seen, len(found) - 1)]
        if isinstance(found, str):
            return result_of([], status=found) if found == "oom" else found
        return result_of(found)


# --- the configuration ---------------------------------------------------------------------


def test_the_new_keys_keep_every_hash_at_their_defaults() -> None:
    plain = BenchConfig()
    assert config_hash(plain) == config_hash(dataclasses.replace(plain, tuning=TuningConfig()))
    # tuning's own settings decide how a search runs, not what the trial measures
    best = dataclasses.replace(plain, tuning=TuningConfig(name="best"))
    slower = dataclasses.replace(plain, tuning=TuningConfig(name="best", budget_s=5, refresh=True))
    assert config_hash(best) == config_hash(slower) != config_hash(plain)
    for key, value in (("inter_threads", 1), ("onednn", "off"), ("channels_last", True)):
        assert config_hash(dataclasses.replace(plain, **{key: value})) != config_hash(plain)
    # the report's identity agrees: at their defaults the keys are as absent
    flat = flatten(to_dict(plain))
    assert not {"inter_threads", "onednn", "channels_last", "tuning.name"} & set(identity(flat))
    assert "tuning.name" in identity(flatten(to_dict(best)))
    assert "tuning.budget_s" not in identity(flatten(to_dict(best)))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"tuning": TuningConfig(name="fast")}, "tuning"),
        ({"tuning": TuningConfig(name="best", budget_s=0)}, "tuning.budget_s"),
        ({"tuning": TuningConfig(name="best", keys=["xla"])}, "tuning.keys"),
        ({"onednn": "maybe"}, "onednn"),
        ({"inter_threads": -1}, "inter_threads"),
        ({"framework": FrameworkConfig(name="tf"), "channels_last": True}, "channels_last"),
        ({"framework": FrameworkConfig(name="tf"), "cudnn_benchmark": True}, "cudnn_benchmark"),
    ],
)
def test_bad_tuning_input_names_its_field(changes: dict[str, object], field: str) -> None:
    problems = check(dataclasses.replace(BenchConfig(), **changes))  # type: ignore[arg-type]
    assert any(p.startswith(f"{field}:") for p in problems), problems


def test_best_is_refused_where_settings_cannot_apply() -> None:
    from bench.core.config import LauncherConfig
    from bench.core.strategy_configs import STRATEGY_CONFIGS

    inline = dataclasses.replace(cfg_of(), launcher=LauncherConfig(name="inline"))
    assert any("launcher=inline" in p for p in check(inline))
    from bench.checks.preflight import validate
    from bench.core.config import ConfigError

    ddp = dataclasses.replace(cfg_of(), distributed=STRATEGY_CONFIGS["ddp"](), workers=2)
    with pytest.raises(ConfigError) as refused:
        validate(ddp)
    assert any(p.startswith("tuning:") and "distributed=ddp" in p for p in refused.value.problems)


# --- the space ------------------------------------------------------------------------------


def test_each_framework_has_its_own_space() -> None:
    def keys(fw: str, cuda: bool = False, image: bool = True, cpus: int = 2) -> list[str]:
        return [k.key for k in spaces.space(cfg_of(fw), cpus, cuda, image)]

    assert keys("torch") == ["compile", "channels_last", "onednn", "threads", "inter_threads"]
    assert keys("torch", image=False) == ["compile", "onednn", "threads", "inter_threads"]
    assert keys("torch", cuda=True) == ["compile", "channels_last", "cudnn_benchmark"]
    assert keys("tf") == ["compile", "onednn", "threads", "inter_threads"]
    assert keys("mxnet") == ["onednn", "threads", "inter_threads"]
    assert keys("torch", cpus=1) == ["compile", "channels_last", "onednn"]
    assert keys("jax") == ["threads"]  # always jitted; no oneDNN switch, no inter-op threads
    assert set(spaces.NOT_SEARCHED) == {"torch", "tf", "mxnet", "jax"}


def test_keys_the_user_set_are_fixed_and_tuning_keys_narrows() -> None:
    cfg = cfg_of(compile=True, threads=4)
    assert spaces.fixed(cfg) == {"compile": True, "threads": 4}
    assert "compile" not in [k.key for k in tuning.knobs(cfg)]
    from bench.core.config import usable_cpus

    narrow = cfg_of(tuning=TuningConfig(name="best", keys=["threads"]))
    expected = ["threads"] if usable_cpus() > 1 else []  # threads are searched on 2+ cores
    assert [k.key for k in tuning.knobs(narrow)] == expected


# --- the rule and the search ----------------------------------------------------------------


def test_a_candidate_must_beat_the_incumbent_by_more_than_both_spreads() -> None:
    incumbent = Row({}, [100.0, 104.0, 102.0])
    assert beats(Row({"compile": True}, [105.0, 106.0, 107.0]), incumbent)
    assert not beats(Row({"compile": True}, [103.0, 120.0, 130.0]), incumbent)  # overlaps
    assert not beats(Row({"compile": True}, [], status="error"), incumbent)
    assert beats(Row({"compile": True}, [1.0, 1.0, 1.0]), Row({}, [], status="oom"))


def test_the_search_is_greedy_and_keeps_the_simpler_setting_on_a_tie() -> None:
    cfg = cfg_of()
    probe = FakeProbe(
        {
            "x": [100.0, 101.0, 102.0],
            "x[compile=true]": [150.0, 151.0, 152.0],  # wins
            "x[compile=true,channels_last=true]": [151.0, 152.0, 153.0],  # overlaps: no
            "x[compile=true,onednn=off]": "oom",
        }
    )
    knobs = [k for k in spaces.space(cfg, 2, False, True) if k.key != "threads"]
    pick, rows = search(cfg, knobs, probe, refused={})
    assert pick == {"compile": True}
    assert probe.calls[:4] == [
        "x",
        "x[compile=true]",
        "x",  # the incumbent again, confirming compile's win
        "x[compile=true,channels_last=true]",
    ]
    assert rows[2].note.startswith("the incumbent again") and rows[1].chosen
    assert [r.status for r in rows].count("oom") == 1
    assert "boom" in next(r.error for r in rows if r.status == "oom")


def test_a_win_from_drift_between_probes_is_not_taken() -> None:
    """The machine sped up after the first probe: the candidate looks faster than the
    incumbent's first probe, but not than the incumbent probed again right after it."""
    cfg = cfg_of()
    probe = FakeProbe(
        {
            "x": ([100.0, 101.0, 102.0], [120.0, 121.0, 122.0]),
            "x[compile=true]": [110.0, 111.0, 112.0],
        }
    )
    knobs = spaces.space(cfg, 2, False, True)[:1]  # compile only
    pick, rows = search(cfg, knobs, probe, refused={})
    assert pick == {} and probe.calls == ["x", "x[compile=true]", "x"]
    assert "drift" in rows[1].note and rows[0].chosen and not rows[1].chosen
    # a later candidate must beat every probe of the incumbent, the faster second one too
    assert not beats(Row({}, [119.0, 119.5, 119.9]), Row({}, [100.0, 101.0, 102.0, 120.0]))


def test_refused_settings_are_skipped_with_their_reason() -> None:
    cfg = cfg_of()
    reason = "parity failed on lenet5"
    refused = {cache.refusal_key("torch", "lenet5", "compile", True): reason}
    knobs = spaces.space(cfg, 2, False, True)[:1]  # compile only
    probe = FakeProbe({"x[compile=true]": [500.0, 500.0, 500.0]})
    pick, rows = search(cfg, knobs, probe, refused=refused)
    assert pick == {} and probe.calls == ["x"]
    assert rows[1].status == "refused" and rows[1].note == reason


def test_every_candidate_failing_fails_the_trial_with_the_table() -> None:
    cfg = cfg_of()
    knobs = spaces.space(cfg, 2, False, True)[:1]
    with pytest.raises(SearchFailed) as failed:
        search(cfg, knobs, FakeProbe({"x": "no result", "x[compile=true]": "oom"}), refused={})
    assert len(failed.value.rows) == 2 and "every candidate failed" in str(failed.value)


def test_a_spent_budget_stops_the_search() -> None:
    cfg = cfg_of(tuning=TuningConfig(name="best", budget_s=1e-9))
    pick, rows = search(cfg, spaces.space(cfg, 2, False, True), FakeProbe({}), refused={})
    assert pick == {} and rows[0].status == OK
    assert all(r.status == "skipped" and r.note == "budget" for r in rows[1:])


def test_a_probe_times_its_own_windows_without_extras() -> None:
    cfg = cfg_of(profile=True, epochs=7)
    probe = probe_config(cfg, {"compile": True})
    assert probe.compile and probe.epochs == 3 and probe.min_window_s == 0.1
    assert probe.warmup_steps >= 2 and not probe.profile and not probe.telemetry.enabled
    assert probe.tuning.name == "default"  # a probe never searches


# --- the cache ------------------------------------------------------------------------------


def test_resolve_caches_and_repeats_reuse_the_pick(tmp_path: Path) -> None:
    cfg = cfg_of(tuning=TuningConfig(name="best", probe_s=0.1, keys=["compile"]))
    probe = FakeProbe({"x[compile=true]": [300.0, 301.0, 302.0]})
    first = tuning.resolve(cfg, tmp_path, probe)
    assert first.pick == {"compile": True} and first.cfg.compile and first.source == "search"
    assert first.params()["compile"] == "true"
    assert json.loads((tmp_path / tuning.TABLE_JSON).read_text())["pick"] == {"compile": True}
    assert "chosen" in (tmp_path / tuning.TABLE_TEXT).read_text()
    calls = len(probe.calls)
    # another repeat, another seed, more epochs: the same workload, from the cache
    again = tuning.resolve(dataclasses.replace(cfg, repeat=1, seed=3, epochs=9), None, probe)
    assert again.source.startswith("cache") and again.pick == first.pick
    assert len(probe.calls) == calls
    # refresh searches again on the first repeat only: the others keep the sweep's pick
    refresh = dataclasses.replace(cfg, tuning=dataclasses.replace(cfg.tuning, refresh=True))
    assert tuning.resolve(dataclasses.replace(refresh, repeat=1), None, probe).source != "search"
    assert tuning.resolve(refresh, None, probe).source == "search"
    # another batch is another workload
    assert tuning.resolve(dataclasses.replace(cfg, batch_size=8), None, probe).source == "search"


def test_a_cached_pick_later_refused_by_parity_is_searched_again() -> None:
    cfg = cfg_of(tuning=TuningConfig(name="best", probe_s=0.1, keys=["compile"]))
    probe = FakeProbe({"x[compile=true]": [300.0, 301.0, 302.0]})
    tuning.resolve(cfg, None, probe)
    cache.set_refusals("torch", "lenet5", {("compile", "true"): "parity failed"})
    again = tuning.resolve(cfg, None, probe)
    assert again.source == "search" and again.pick == {}
    cache.set_refusals("torch", "lenet5", {("compile", "true"): ""})  # it passed since
    assert cache.refused() == {}


def test_a_cache_file_is_believed_only_when_it_is_sound() -> None:
    cfg = cfg_of(tuning=TuningConfig(name="best", probe_s=0.1, keys=["compile"]))
    name = cache.key(cfg, cache.host_fingerprint())
    good = {"made": "now", "pick": {"compile": True}, "table": []}
    path = cache.store(name, good)
    assert cache.load(name) is not None and (path.stat().st_mode & 0o777) == 0o600
    for bad in (
        {**good, "pick": {"compile": "yes"}},  # wrong type
        {**good, "pick": {"rm -rf": True}},  # not a setting
        {**good, "pick": {"threads": 10**9}},
        {**good, "table": "x"},
    ):
        cache.store(name, bad)
        assert cache.load(name) is None, bad
    path.write_text(json.dumps({**good, "key": "another"}))
    assert cache.load(name) is None
    cache.store(name, good)
    os.chmod(path, 0o666)  # others could have written it
    assert cache.load(name) is None


def test_a_cached_pick_outside_the_search_space_is_searched_again() -> None:
    """Issue 51: an edited cache file of the user's own was believed with values outside
    any search space (threads=4096) or keys outside tuning.keys."""
    cfg = cfg_of(tuning=TuningConfig(name="best", probe_s=0.1, keys=["compile"]))
    name = cache.key(cfg, cache.host_fingerprint())
    probe = FakeProbe({"x[compile=true]": [300.0, 301.0, 302.0]})
    for pick in ({"threads": 4096}, {"compile": True, "onednn": "off"}):
        cache.store(name, {"made": "now", "pick": pick, "table": []})
        assert cache.load(name) is not None  # sound as a file: the space decides
        assert tuning.resolve(cfg, None, probe).source == "search", pick
    cache.store(name, {"made": "now", "pick": {"compile": True}, "table": []})
    assert tuning.resolve(cfg, None, probe).source.startswith("cache")


def test_an_interrupted_search_leaves_no_cache_entry() -> None:
    cfg = cfg_of(tuning=TuningConfig(name="best", probe_s=0.1, keys=["compile"]))

    def interrupted(cfg: BenchConfig, timeout_s: float) -> TrialResult | str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tuning.resolve(cfg, None, interrupted)
    assert not cache.folder().exists() or not list(cache.folder().glob("*.json"))


# --- what the run records -------------------------------------------------------------------


def test_a_results_tuned_settings_are_checked_before_they_become_params() -> None:
    good = TrialResult(status=OK, framework="torch", model="lenet5", mode="train")
    good.tuned = {"compile": "true", "threads": "2"}
    assert TrialResult.from_dict(good.to_dict()).tuned == good.tuned
    for bad in ({"compile; drop": "x"}, {"compile": "a b"}, {"compile": 1}, ["x"]):
        data = {**good.to_dict(), "tuned": bad}
        with pytest.raises(ValueError, match="result.tuned"):
            TrialResult.from_dict(data)

    from bench.tracking.protocol import trial_params

    assert trial_params(good) == {
        "num_parameters": "0",
        "tuned.compile": "true",
        "tuned.threads": "2",
    }


# --- parity at best -------------------------------------------------------------------------


def test_side_labels_carry_typed_settings() -> None:
    label = sides.label("tf", {"compile": True, "onednn": "off", "threads": 1})
    assert label == "tf[compile=true,onednn=off,threads=1]"
    assert sides.split(label) == ("tf", {"compile": True, "onednn": "off", "threads": 1})
    assert sides.in_child(label) and not sides.in_child("tf[compile=true]")
    spec = sides.Spec()
    assert spec.config(label).compile and spec.config(label).onednn == "off"
    with pytest.raises(ValueError, match="not a speed setting"):
        sides.split("tf[xla=true]")


def test_every_setting_a_search_may_pick_is_a_parity_side() -> None:
    found = at_best.tuned_sides(["torch", "tf"], sides.Spec(model="lenet5"))
    assert "torch[compile=true]" in found and "tf[onednn=off]" in found
    assert "torch[channels_last=true]" in found and "tf[channels_last=true]" not in found


def test_a_failed_tuned_side_refuses_its_setting_and_a_pass_clears_it() -> None:
    from bench.parity.check import Deviation, Outcome

    def deviation(name: str, update: float) -> Deviation:
        return Deviation(name, 1e-7, update, 1e-8, 1e-8, None, "")

    floor = deviation("torch", 1e-6)
    outcome = Outcome(
        sides.Spec(),
        [],
        [deviation("tf", 1e-6), deviation("torch[compile=true]", 0.5),
         deviation("tf[compile=true]", 1e-6)],
        1e-2,
        1.0,
        floor,
    )  # fmt: skip
    refusals = at_best.record(outcome, "lenet5")
    assert list(refusals) == ["torch[compile=true]"]
    assert at_best.plain_passed(outcome) and not outcome.passed
    assert cache.refusal_key("torch", "lenet5", "compile", True) in cache.refused()
    assert cache.refusal_key("tf", "lenet5", "compile", True) not in cache.refused()


# --- the report -----------------------------------------------------------------------------


def test_the_report_shows_each_framework_at_default_and_at_best() -> None:
    import random

    from bench.report.document import Table
    from bench.report.sections import Context, at_best
    from bench.report.trials import to_trial
    from tests.report_data import record

    rng = random.Random(0)
    best = {"tuning.name": "best", "tuned.threads": "2", "tuned.inter_threads": "0"}
    runs = []
    for repeat in range(4):
        for fw, default_rate, best_rate, picked in (
            ("torch", 100.0, 110.0, {"tuned.compile": "false"}),
            ("tf", 50.0, 100.0, {"tuned.compile": "true"}),
        ):
            noise = rng.gauss(1.0, 0.005)
            runs.append(record(fw, rate=default_rate * noise, repeat=repeat))
            params = {**best, **picked}
            runs.append(record(fw, rate=best_rate * noise, repeat=repeat, params=params))
    section = at_best(Context([to_trial(r) for r in runs]))
    assert section is not None
    own, pair = [b for b in section.blocks if isinstance(b, Table)]
    rows = {r[0].text: [c.text for c in r] for r in own.rows}
    assert rows["tf"][2] == "compile=true, threads=2, inter_threads=0"
    assert rows["tf"][5].startswith("2.0") and rows["torch"][5].startswith("1.1")
    verdicts = [c.text for c in pair.rows[0]]
    # at defaults tf takes 2x torch's time; at best 1.1x
    assert verdicts[2].startswith("tf slower than torch: time ratio 2.0")
    assert verdicts[4].startswith("tf slower than torch: time ratio 1.1")
    plain = at_best(Context([to_trial(r) for r in runs if "tuning.name" not in r.params]))
    assert plain is None  # no tuning=best runs: no section


def test_a_search_gets_its_budget_on_top_of_the_trials_timeout() -> None:
    from bench.cli import _job_minutes
    from bench.core.config import TUNING_GRACE_S, trial_timeout_s
    from bench.launchers.base import timed_out

    plain = BenchConfig(timeout_s=300)
    best = dataclasses.replace(plain, tuning=TuningConfig(name="best", budget_s=200))
    assert trial_timeout_s(plain) == 300
    assert trial_timeout_s(best) == 500 + TUNING_GRACE_S
    assert "tuning.budget_s 200" in timed_out(best) and timed_out(plain).endswith("(timeout_s)")
    assert _job_minutes(300) == 6  # Slurm's backstop: a minute beyond the trial's own limit
    assert _job_minutes(300, "best", 200) == math.ceil((500 + TUNING_GRACE_S) / 60) + 1


def test_the_report_compares_frameworks_at_best_and_lists_the_section() -> None:
    from bench.report import build
    from tests.report_data import record, runset

    runs = []
    for repeat in range(4):
        for fw, rate, picked in (("torch", 100.0, "false"), ("tf", 80.0, "true")):
            params = {"tuning.name": "best", "tuned.compile": picked}
            runs.append(record(fw, rate=rate * (1 + 0.002 * repeat), repeat=repeat, params=params))
            runs.append(record(fw, rate=rate / 2 * (1 + 0.002 * repeat), repeat=repeat))
    report = build(runset(runs))
    titles = [s.title for s in report.sections]
    assert "At each framework's best" in titles
    # the framework comparison pairs torch's best with tf's best despite their picks
    from bench.report.document import Table

    timing = next(s for s in report.sections if s.title.startswith("Relative training time"))
    (table,) = [b for b in timing.blocks if isinstance(b, Table)]
    labels = [row[0].text for row in table.rows]
    assert labels == ["resnet50 · batch 32 · 32 px · cpu",
                      "resnet50 · batch 32 · 32 px · cpu · tuning.name=best"]  # fmt: skip
    assert all("(n=4)" in row[2].text for row in table.rows)
    # Each comparison once (issue 50): the at-best table shows the framework comparison's
    # verdicts, which the Verdicts list holds under the relative time only.
    from bench.report import verdicts

    compared = [what for what, _, _ in verdicts(runset(runs))]
    assert sorted(compared) == ["training time, tf vs torch"] * 2 + [
        "tuning, tf best vs default", "tuning, torch best vs default"]  # fmt: skip


def test_a_trial_that_searches_first_says_so_when_it_starts() -> None:
    """A cold search can take minutes before the first epoch: the sweep's line for the trial
    says so (the candidates' figures go to the trial's log as the search runs)."""
    import io

    from bench.sweep.session import Progress, _before_epochs

    cfg = cfg_of(tuning=TuningConfig(name="best", budget_s=300))
    out = io.StringIO()
    Progress(3, 8, "framework=tf tuning=best", 3, stream=out, note=_before_epochs(cfg))
    assert out.getvalue() == (
        "[3/8] framework=tf tuning=best ... (tuning=best: searching the settings first, up to "
        "300 s, unless a search is cached)\n"
    )
    assert _before_epochs(cfg_of(tuning=TuningConfig())) == ""
