"""Test modules' basenames are unique across tests/: the test folders are no packages, so
pytest imports each test module under its basename (rootdir-based collection), and refuses
the second module of a name ("import file mismatch") in CI, where the whole tree is
collected, though a run of one folder passes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def collected_modules(root: Path) -> list[Path]:
    """The files under ``root`` that pytest collects as test modules (its default
    ``python_files``: ``test_*.py`` and ``*_test.py``)."""
    return sorted(
        p for p in root.rglob("*.py")
        if "__pycache__" not in p.parts and (p.name.startswith("test_") or p.stem.endswith("_test"))
    )  # fmt: skip


def shared_basenames(paths: Iterable[Path], root: Path) -> dict[str, list[str]]:
    """Each basename that more than one of ``paths`` has, with those paths (from ``root``)."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        by_name.setdefault(path.name, []).append(path.relative_to(root).as_posix())
    return {name: found for name, found in sorted(by_name.items()) if len(found) > 1}


def test_no_two_test_modules_share_a_basename() -> None:
    modules = collected_modules(TESTS)
    assert len(modules) > 50 and any(p.parent.name == "e2e" for p in modules)  # it finds them
    shared = shared_basenames(modules, TESTS)
    assert not shared, (
        f"test modules share a basename (pytest collects each under its basename and refuses "
        f"the second; rename one): {shared}"
    )


def test_a_shared_basename_is_found_in_any_two_folders(tmp_path: Path) -> None:
    for rel in ("unit/test_a.py", "e2e/test_a.py", "config/test_b.py", "unit/b_test.py",
                "e2e/b_test.py", "unit/helpers.py", "e2e/helpers.py"):  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert shared_basenames(collected_modules(tmp_path), tmp_path) == {
        "b_test.py": ["e2e/b_test.py", "unit/b_test.py"],
        "test_a.py": ["e2e/test_a.py", "unit/test_a.py"],
    }
