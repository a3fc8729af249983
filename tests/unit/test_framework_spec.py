"""One spec per framework (bench.core.frameworks): facts only, importing nothing, and the
only place outside the adapters (bench/trial/frameworks/) and the model builders
(bench/trial/models/) that spells a framework's name or compares a name with one (read by
AST: ``==``, ``!=``, ``in``, ``not in`` and ``case`` against a name's string or its spec
constant)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from bench.core import frameworks, versions
from bench.core.frameworks import FRAMEWORKS, NAMES

ROOT = Path(__file__).resolve().parents[2]
LITERALS = NAMES  # every framework with a spec, a new one included
# Where a framework's name may be written: its adapter, its model builders, its spec.
OWNERS = ("bench/trial/frameworks/", "bench/trial/models/", "bench/core/frameworks.py")
# What is left, per (module, literal): each a reason to keep it, or work still to do.  A new
# literal anywhere else fails; a module that drops one updates this list.
ALLOWED = {
    # model.torch / model.tf: the keys of model=py's builders (fields users type).
    ("bench/checks/own_models.py", "torch"): 2,
    ("bench/checks/own_models.py", "tf"): 2,
}


def literal_counts() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted((ROOT / "bench").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(OWNERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in LITERALS:
                found[(rel, node.value)] += 1
    return found


def test_no_framework_literal_outside_its_adapter_its_builders_and_its_spec() -> None:
    assert dict(literal_counts()) == ALLOWED, (
        "name a framework by its spec (bench.core.frameworks: FRAMEWORKS[name].<fact>, or "
        "TORCH / TF / MXNET), or move the fact into the spec"
    )


# The constants' names (TORCH, TF, ...): the spec's module-level strings that are a name.
CONSTANTS = frozenset(k for k, v in vars(frameworks).items() if k.isupper() and v in NAMES)
COMPARING = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
# Where a framework's name is still compared outside its owners, per module, each with its
# reason.  A new comparison anywhere else fails; a module that drops one updates this list.
ALLOWED_COMPARISONS: dict[str, int] = {
    # A strategy's own per-framework implementation (its typed config names the two
    # frameworks it has): torch's and TensorFlow's sides of one strategy.
    "bench/trial/distributed/horovod.py": 2,
    "bench/trial/distributed/model_parallel.py": 2,
}


def _names_a_framework(node: ast.AST, aliases: frozenset[str]) -> bool:
    """Whether ``node`` is a framework's name: its string, a spec constant (``TORCH``, or an
    alias it was imported as, or ``frameworks.TORCH``), or a tuple, list or set holding one."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Name):
        return node.id in aliases
    if isinstance(node, ast.Attribute):
        return node.attr in CONSTANTS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_framework(e, aliases) for e in node.elts)
    return False


def comparisons(tree: ast.AST) -> list[str]:
    """Each comparison (``==``, ``!=``, ``in``, ``not in``) or ``case`` of ``tree`` against
    a framework's name, as source."""
    aliases = CONSTANTS | {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "bench.core.frameworks"
        for a in node.names
        if a.name in CONSTANTS
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(o, COMPARING) for o in node.ops):
            if any(_names_a_framework(x, aliases) for x in (node.left, *node.comparators)):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.MatchValue) and _names_a_framework(node.value, aliases):
            found.append(f"case {ast.unparse(node.value)}")
    return found


def comparison_counts() -> dict[str, int]:
    found = {}
    for path in sorted((ROOT / "bench").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(OWNERS):
            n = len(comparisons(ast.parse(path.read_text())))
            if n:
                found[rel] = n
    return found


def test_no_comparison_with_a_framework_outside_its_adapter_its_builders_and_its_spec() -> None:
    assert comparison_counts() == ALLOWED_COMPARISONS, (
        "a branch on a framework's name belongs in its spec: add a fact to FrameworkSpec "
        "(bench.core.frameworks) and read FRAMEWORKS[name].<fact>"
    )


@pytest.mark.parametrize(
    ("source", "count"),
    [
        ("framework == 'torch'", 1),
        ("from bench.core.frameworks import TF as T\nname != T", 1),
        ("from bench.core.frameworks import MXNET\nMXNET in names", 1),
        ("name not in (TORCH, TF)", 1),
        ("cfg.framework.name == frameworks.JAX", 1),
        ("match name:\n    case 'jax':\n        pass", 1),
        ("name in FRAMEWORKS and spec.inline", 0),
        ("x == 'torchvision' or y is TORCH", 0),
    ],
)
def test_the_comparison_reader_sees_each_spelling(source: str, count: int) -> None:
    assert len(comparisons(ast.parse(source))) == count


def test_the_spec_imports_nothing_but_the_standard_library() -> None:
    tree = ast.parse(Path(frameworks.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert imported <= {"__future__", "dataclasses"}


def test_the_tables_other_modules_read_are_the_specs() -> None:
    from bench.checks import device
    from bench.envs import environments, interpreters
    from bench.images import DEFAULT_BASES
    from bench.trial.profiling import _MODULES as PROFILERS

    assert NAMES == ("torch", "tf", "mxnet", "jax") and list(FRAMEWORKS) == list(NAMES)
    assert versions.SUPPORTED == {n: s.supported for n, s in FRAMEWORKS.items()}
    assert versions.MODULES == {
        "torch": "torch",
        "tf": "tensorflow",
        "mxnet": "mxnet",
        "jax": "jax",
    }
    assert interpreters.OWN_ENVIRONMENTS == {"mxnet": "BENCH_MXNET_PYTHON"}
    assert environments.COMPANIONS == {
        "torch": (),
        "tf": ("keras",),
        "mxnet": (),
        "jax": ("keras",),
    }
    assert set(device.FIXES) == set(NAMES) and all(device.FIXES.values())
    assert PROFILERS == {n: f"bench.trial.profiling.{n}_profiler" for n in NAMES}
    assert {f for f, v in DEFAULT_BASES if v == "cuda"} == set(NAMES)
    for name, spec in FRAMEWORKS.items():
        assert spec.adapter == f"bench.trial.frameworks.{name}_adapter"
        assert versions.package(name) == spec.cpu_package
        assert versions.package(name, gpu=True) == spec.gpu_package
    assert [n for n, s in FRAMEWORKS.items() if s.only_release] == ["mxnet"]
    # The library each builds models of by name is the zoo's library of that framework.
    from bench.core.zoo import LIBRARY_FRAMEWORK

    assert all(LIBRARY_FRAMEWORK[s.library] == n for n, s in FRAMEWORKS.items() if s.library)
    assert [n for n, s in FRAMEWORKS.items() if s.hf_module] == ["torch", "tf"]
    assert versions.pinned("mxnet") == versions.locked("mxnet") == "1.9.1"


def test_the_device_probe_and_the_weights_form_are_the_specs() -> None:
    from bench.trial.frameworks import weights
    from bench.trial.runtime import device_probe

    assert list(device_probe.PROBES) == list(NAMES)
    for name, spec in FRAMEWORKS.items():
        assert device_probe.PROBES[name].__name__ == spec.device_probe
        assert weights.form(name) is weights.FORMS[spec.weights]
    # TensorFlow's and JAX's sessions hold a Keras model, JAX's weights in the jitted
    # step's state: two forms.
    assert weights.form("tf") is not weights.form("jax")
    # Only MXNet's parameter-server workers have weights to settle after the last step.
    settled = [n for n in NAMES if weights.form(n).settle is not weights.Form.settle]
    assert settled == ["mxnet"]


def test_the_device_probe_refuses_a_framework_without_a_spec(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.trial.runtime import device_probe

    assert device_probe.main(["caffe"]) == 2
    assert "torch,tf,mxnet,jax" in capsys.readouterr().err


def test_serving_is_the_specs_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which frameworks serve (mode=serve) is read from the spec, not a list of names: a
    framework whose spec says it does not is refused, naming those that do."""
    import dataclasses

    from bench.checks import config as checks
    from bench.core.config import BenchConfig, FrameworkConfig

    cfg = BenchConfig(mode="serve", framework=FrameworkConfig(name="mxnet"))
    assert not any("no serving session" in p for p in checks.rules(cfg).get("serve", []))
    specs = dict(FRAMEWORKS, mxnet=dataclasses.replace(FRAMEWORKS["mxnet"], serves=False))
    monkeypatch.setattr(checks, "SPECS", specs)
    assert checks.rules(cfg)["serve"] == [
        "mode: serve is wired for framework=torch, tf, jax; framework=mxnet has no serving session"
    ]
