"""Every ``BENCH_*`` environment variable the code names is in the table of
docs/environment.md, and every variable the table names is still used.

The code is bench's and the Hydra plugins' Python, the scripts (Python and shell) and
``compose.yaml``.  A name counts where code uses it as a variable's name: a Python string
that is exactly the name (``os.environ.get("BENCH_X")``, ``ENV_X = "BENCH_X"``) or a keyword
argument (``dict(os.environ, BENCH_X=...)``), a shell line outside its comment, a
``${BENCH_X...}`` in compose.yaml.  Prose in docstrings and comments does not count, so a
variable only mentioned is no reason for a row."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "docs" / "environment.md"
NAME = re.compile(r"BENCH_[A-Z0-9_]+")
SHELL_COMMENT = re.compile(r"(^|\s)#.*$")
COMPOSE_READ = re.compile(r"\$\{(BENCH_[A-Z0-9_]+)")


def python_names(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if NAME.fullmatch(node.value):
                yield node.value
        elif isinstance(node, ast.keyword) and node.arg and NAME.fullmatch(node.arg):
            yield node.arg


def shell_names(source: str) -> Iterator[str]:
    for line in source.splitlines():
        yield from NAME.findall(SHELL_COMMENT.sub("", line))


def compose_names(source: str) -> Iterator[str]:
    yield from COMPOSE_READ.findall(source)


def code_names(root: Path = REPO) -> dict[str, set[str]]:
    """Each variable the code names, with the files that name it."""
    found: dict[str, set[str]] = {}
    sources: list[tuple[Path, object]] = []
    for folder in ("bench", "hydra_plugins", "scripts"):
        sources += [(p, python_names) for p in sorted((root / folder).rglob("*.py"))]
    sources += [(p, shell_names) for p in sorted((root / "scripts").rglob("*.sh"))]
    sources += [(root / "compose.yaml", compose_names)]
    for path, scan in sources:
        if not path.is_file():
            continue
        for name in scan(path.read_text()):  # type: ignore[operator]
            found.setdefault(name, set()).add(str(path.relative_to(root)))
    return found


def table_names(text: str) -> set[str]:
    """The variables the table's rows name (a row's first cell may name several)."""
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `BENCH_"):
            names.update(NAME.findall(line.split("|")[1]))
    return names


def test_every_variable_the_code_names_has_a_row_and_every_row_is_used() -> None:
    code = code_names()
    table = table_names(TABLE.read_text())
    missing = {name: sorted(files) for name, files in code.items() if name not in table}
    assert not missing, (
        f"BENCH_* variables the code uses but {TABLE.relative_to(REPO)} lacks (add a row: "
        f"who sets it, who reads it, what it does, its default): {missing}"
    )
    stale = sorted(table - set(code))
    assert not stale, f"rows of {TABLE.relative_to(REPO)} for variables no code uses: {stale}"


def test_the_scan_sees_every_way_code_names_a_variable(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "bench" / "m.py").write_text(
        '"""BENCH_IN_A_DOCSTRING is prose."""\n'
        "import os\n"
        'A = os.environ.get("BENCH_READ")\n'
        'ENV_B = "BENCH_CONSTANT"\n'
        "env = dict(os.environ, BENCH_KEYWORD='1')\n"
        "# BENCH_IN_A_COMMENT\n"
        'text = f"BENCH_{A}_DYNAMIC"\n'
    )
    (tmp_path / "scripts" / "s.sh").write_text(
        "# BENCH_SHELL_COMMENT\n"
        "x=${BENCH_SHELL:-0}  # BENCH_TRAILING_COMMENT\n"
        "BENCH_SHELL_SET=1 bash other.sh\n"
        'echo "${#list[@]}" "$BENCH_PLAIN"\n'
    )
    (tmp_path / "compose.yaml").write_text("# BENCH_COMPOSE_COMMENT\nimage: ${BENCH_COMPOSE:-x}\n")
    assert set(code_names(tmp_path)) == {
        "BENCH_READ", "BENCH_CONSTANT", "BENCH_KEYWORD", "BENCH_SHELL", "BENCH_SHELL_SET",
        "BENCH_PLAIN", "BENCH_COMPOSE",
    }  # fmt: skip


def test_a_row_may_name_several_variables() -> None:
    text = (
        "| variable | set by |\n|---|---|\n"
        "| `BENCH_A`, `BENCH_B` | bench; see `BENCH_C` |\n"
        "prose naming `BENCH_D`\n"
    )
    assert table_names(text) == {"BENCH_A", "BENCH_B"}


def test_the_parity_hook_is_no_variable_any_more() -> None:
    """The parity check's hook is a file of the trial's folder (bench.trial.runtime.hooks)."""
    assert "BENCH_PARITY_DIR" not in code_names()
