"""The metric catalogue (:mod:`bench.core.metrics`): a window's figure and a trial's cannot
share a name, docs/measuring.md's table is the declarations', and no module of bench spells
a catalogued metric's name itself."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from bench.core import metrics, paths

REPO = paths.PACKAGE.parent


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declarations made by a test vanish after it."""
    monkeypatch.setattr(metrics, "_CATALOGUE", dict(metrics._CATALOGUE))
    monkeypatch.setattr(metrics, "_ALL", list(metrics._ALL))


def test_the_trial_figure_of_a_window_metric_is_its_trial_name(scratch: None) -> None:
    rate = metrics.window("widgets_per_s", "widgets/s", "widgets / epoch_time_s", metrics.RATE)
    whole = rate.trial("all widgets / trial_time_s")
    assert (whole.name, whole.scope, whole.unit) == (
        "trial_widgets_per_s",
        metrics.TRIAL,
        "widgets/s",
    )
    assert metrics.lookup("trial_widgets_per_s") is whole
    assert metrics.TRIAL_SAMPLES_PER_S.name == "trial_" + metrics.SAMPLES_PER_S.name
    with pytest.raises(ValueError, match="only a window metric"):
        whole.trial()


@pytest.mark.parametrize(
    ("declare", "refusal"),
    [
        (lambda: metrics.trial("samples_per_s", "samples/s", "x"), "already declared"),
        (lambda: metrics.window("trial_time_s", "s", "x"), "cannot start with trial_"),
        (lambda: metrics.window("loss", "", "x"), "already declared"),
        (lambda: metrics.SAMPLES_PER_S.trial(), "already declared"),
        (lambda: metrics.trial("x_s", "s", "x", aggregate="mode"), "aggregate"),
        (lambda: metrics.trial("x_s", "s", "x", modes=("fly",)), "modes"),
    ],
)
def test_a_name_is_declared_once(scratch: None, declare, refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        declare()


def test_only_the_pinned_legacy_names_are_both_a_windows_and_a_trials() -> None:
    scopes: dict[str, set[str]] = {}
    for m in metrics.catalogue():
        scopes.setdefault(m.name, set()).add(m.scope)
    shared = {name for name, found in scopes.items() if len(found) > 1}
    assert shared == metrics.LEGACY_SHARED == {
        "data_time_s", "time_comm_ms", "ps_push_ms", "ps_pull_ms"
    }  # fmt: skip
    assert all(getattr(metrics.lookup(name), "scope", None) == metrics.TRIAL for name in shared)


def test_every_declaration_is_complete() -> None:
    for m in metrics.catalogue():
        assert m.name.isidentifier() and m.name == m.name.lower(), m
        assert m.meaning and "|" not in m.meaning + m.when, m
        assert m == m.name and pickle.loads(pickle.dumps(m)) == m.name, m
        assert json.dumps({m: 1.0}) == f'{{"{m.name}": 1.0}}'


def test_families_match_the_names_they_make() -> None:
    assert metrics.OP_MS.of("convolution_backward") == "op_convolution_backward_ms"
    assert metrics.family_of("op_convolution_backward_ms") is metrics.OP_MS
    assert metrics.known("worker1_trial_samples_per_s")
    assert not metrics.known("op_ms") and metrics.lookup("op_ms") is None


def test_the_docs_table_is_the_catalogues() -> None:
    text = (REPO / "docs" / "measuring.md").read_text()
    assert metrics.docs_table(text) == metrics.markdown(), (
        "docs/measuring.md's metric table differs from bench/core/metrics.py's declarations: "
        'paste the output of python -c "from bench.core import metrics; '
        'print(metrics.markdown())" between its two markers'
    )


# String constants equal to a metric's name that are not that metric, each said why.
NOT_METRICS = {
    ("trial/profiling/categories.py", "loss"): "an operator category: the loss function's kernels",
    ("parity/check.py", "loss"): "a column of the parity check's deviations table",
    ("trial/monitors/gpu.py", "power_w"): "a field of an NVML reading (monitors.nvml.Reading)",
    ("tracking/system_metrics.py", "power_w"): "a field of an NVML reading, as its CSV column",
    ("trial/monitors/cpu.py", "cpu_energy_j"): "the host sample file's RAPL counter column",
    ("tracking/system_metrics.py", "cpu_energy_j"): "the host sample file's RAPL counter column",
}


def literal_names(root: Path) -> list[tuple[str, int, str]]:
    """(module, line, name) of every string constant under ``root`` equal to a catalogued
    metric's name, outside the catalogue and NOT_METRICS."""
    names, found = metrics.names(), []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module == "core/metrics.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), module)):
            if isinstance(node, ast.Constant) and node.value in names:
                if (module, node.value) not in NOT_METRICS:
                    found.append((module, node.lineno, node.value))
    return found


def test_no_module_spells_a_metric_name() -> None:
    found = literal_names(paths.PACKAGE)
    assert not found, (
        "metric names spelled as strings outside bench/core/metrics.py (use its constant, "
        "metrics.X, which is the name): "
        + ", ".join(f"{module}:{line} {name!r}" for module, line, name in found)
    )
    # each exception is still needed
    every = {
        (p.relative_to(paths.PACKAGE).as_posix(), node.value)
        for p in paths.PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert set(NOT_METRICS) <= every, set(NOT_METRICS) - every


def test_the_scan_finds_a_spelled_name(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "metrics.py").write_text('X = "trial_samples_per_s"\n')
    source = '"""The trial_samples_per_s."""\nrate = s["trial_samples_per_s"]\n'
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "b.py").write_text('key = f"trial_{name}"\n')
    assert literal_names(tmp_path) == [("a.py", 2, "trial_samples_per_s")]
