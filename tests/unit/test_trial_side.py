"""The trial side is two folders (:data:`bench.core.paths.TRIAL_SIDE`: ``bench/core/`` and
``bench/trial/``): the import contracts in pyproject.toml name the same two and forbid them
everything else of bench, every bench module that a trial's entry points reach is in them (a
container carries nothing else of bench), and the images' content hash covers them and
nothing of the host side."""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from bench import images
from bench.core import paths

REPO = paths.PACKAGE.parent
# What runs in a trial's interpreter (a container's command, a rank, a server task, a node
# agent, a kvstore process): python -m bench.trial.worker and the strategies' processes.
ENTRY_POINTS = (
    "bench.trial.worker",
    "bench.trial.loop",
    "bench.trial.runtime.child",
    "bench.trial.distributed.rank",
    "bench.trial.distributed.tf_server",
    "bench.trial.distributed.kvstore",
    "bench.trial.distributed.horovod",
    "bench.trial.distributed.nodes",
)
MODULE_NAME = re.compile(r"bench(\.[a-z_][a-z0-9_]*)+")


def _trial_contracts() -> list[dict[str, list[str]]]:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [c for c in contracts["contracts"] if c["name"].startswith("The trial side")]


def test_the_import_contracts_list_the_trial_side() -> None:
    contracts = _trial_contracts()
    assert len(contracts) == 2
    for contract in contracts:
        assert sorted(contract["source_modules"]) == sorted(paths.TRIAL_SIDE)
    assert paths.TRIAL_SIDE == ("bench.core", "bench.trial")  # the folders tell the side
    assert all((paths.PACKAGE / name.split(".")[1] / "__init__.py").is_file()
               for name in paths.TRIAL_SIDE)  # fmt: skip


def test_the_trial_side_may_import_nothing_else_of_bench() -> None:
    """Every package and top-level module of bench that is not on the trial side (the host
    side, the entry points) is forbidden to it, a new one included."""
    (host,) = [c for c in _trial_contracts() if c["name"].endswith("of the host side")]
    everything = {
        f"bench.{p.name}" if p.is_dir() else f"bench.{p.stem}"
        for p in paths.PACKAGE.iterdir()
        if (p / "__init__.py").is_file() or (p.suffix == ".py" and p.stem != "__init__")
    }
    assert sorted(host["forbidden_modules"]) == sorted(everything - set(paths.TRIAL_SIDE))


def test_a_parity_side_reaches_only_the_trial_side() -> None:
    """A parity check's side (``python -m bench.trial.parity``) runs in MXNet's environment,
    which has no host dependencies: it imports the trial side only."""
    seen, todo = set(), ["bench.trial.parity"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_reached(name) - seen)
    assert "bench.trial.frameworks.parity_hook" in seen  # it walks
    outside = sorted(n for n in seen if not _inside(n))
    assert outside == [], f"the parity side reaches host modules: {outside}"


def _file(name: str) -> Path | None:
    """The source of module or package ``name`` in bench, or None."""
    where = paths.PACKAGE.parent.joinpath(*name.split("."))
    if (where / "__init__.py").is_file():
        return where / "__init__.py"
    return where.with_suffix(".py") if where.with_suffix(".py").is_file() else None


def _reached(name: str) -> set[str]:
    """The bench modules ``name`` imports (anywhere in it: inside functions and under
    TYPE_CHECKING too) or names in a string (``importlib.import_module``, ``-m``), with the
    packages above them, which Python imports first."""
    path = _file(name)
    assert path is not None, name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            named.add(base)  # `from bench import data`: bench.trial.data, if it is a module
            named.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # A name in a string is run (-m) or imported by name; the lists of the trial
            # side themselves (bench.core.paths) name modules without running them.
            if MODULE_NAME.fullmatch(node.value) and name != "bench.core.paths":
                named.add(node.value)
    found = set()
    for full in named:
        parts = full.split(".")
        if parts[0] != "bench":
            continue
        found.update(
            ".".join(parts[:i]) for i in range(1, len(parts) + 1) if _file(".".join(parts[:i]))
        )
    return found


def _inside(name: str) -> bool:
    return name == "bench" or any(
        name == side or name.startswith(side + ".") for side in paths.TRIAL_SIDE
    )


def test_everything_a_trial_imports_is_on_the_trial_side() -> None:
    """A module a trial reaches that the list lacks would be missing from the images: the
    container's trial would fail to import it."""
    seen: set[str] = set()
    todo = list(ENTRY_POINTS)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_reached(name) - seen)
    assert {
        "bench.trial.loop",
        "bench.trial.frameworks",
        "bench.trial.distributed.ddp",
    } <= seen  # it walks
    outside = sorted(name for name in seen if not _inside(name))
    assert outside == [], f"reached by a trial, missing from bench.core.paths.TRIAL_SIDE: {outside}"


def test_the_image_carries_the_trial_side_only() -> None:
    files = images.context_files(images.BuildSpec("torch", "cpu"))
    sources = {rel for rel in files if rel.startswith("bench/")}
    assert {
        "bench/__init__.py",
        "bench/trial/worker.py",
        "bench/trial/distributed/rank.py",
    } <= sources
    assert "bench/cli/__init__.py" not in sources and not any(
        s.startswith("bench/report/") for s in sources
    )
    assert all(_inside(rel.removesuffix(".py").replace("/", ".")) or rel.endswith("__init__.py")
               for rel in sources)  # fmt: skip
    assert not any("__pycache__" in rel or rel.endswith(".pyc") for rel in sources)
    mlflow = images.context_files(images.BuildSpec("mlflow", "cpu"))
    assert not any(rel.startswith("bench/") for rel in mlflow)  # the server runs no bench


def test_a_host_side_edit_changes_no_image_hash_and_a_trial_side_edit_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "bench"
    shutil.copytree(paths.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    monkeypatch.setattr(paths, "PACKAGE", copy)
    spec = images.BuildSpec("torch", "cpu")

    def digest() -> str:
        return images.content_hash(images.context_files(spec), {"BENCH_UID": "1000"})

    before = digest()
    host_files = ("report/__init__.py", "cli/__init__.py", "sweep/session.py", "images/__init__.py")
    for host_file in host_files:
        with open(copy / host_file, "a") as f:
            f.write("\n# a host-side edit\n")
    assert digest() == before
    with open(copy / "trial" / "loop.py", "a") as f:
        f.write("\n# a trial-side edit\n")
    after = digest()
    assert after != before
    with open(copy / "trial" / "distributed" / "rank.py", "a") as f:
        f.write("\n# a trial-side edit in a package\n")
    assert digest() != after


def test_compose_builds_from_the_same_trial_side() -> None:
    """compose.yaml builds from the repository root, filtered by .dockerignore: its images
    carry the same bench files as bench's own builds (and the tags of `bench images env`)."""
    lines = (REPO / ".dockerignore").read_text().splitlines()
    kept = [line[1:] for line in lines if line.startswith("!bench/")]
    names = {
        "bench"
        if rel == "bench/__init__.py"
        else rel.rstrip("/").removesuffix(".py").replace("/", ".")
        for rel in kept
    }
    assert len(names) == len(kept) and names == {"bench", *paths.TRIAL_SIDE}
    assert "*" in lines and "!docker/" in lines  # all else of the repository stays out
