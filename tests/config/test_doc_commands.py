"""Every ``bench ...`` / ``python -m bench ...`` command in a code block of docs/ and
README.md composes as shown (a dry compose through Hydra and the typed config, no trial):
its keys and group options are bench's (bench.cli.overrides, every value of a sweep), and
the config of its first job composes and types.  A tool's command (``bench report ...``)
names a tool bench has.  Lines with placeholders (``<cluster>``, ``KEY=VALUE``, ``...``)
are counted apart, not checked."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from bench import cli
from bench.cli.overrides import check
from bench.core.config import BenchConfig
from bench.sweep.compose import _unknown_keys

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
START = re.compile(r"^\s*(?:\$ )?(?:\.venv/bin/)?(python -m bench|bench)(\s|$)")
PLACEHOLDER = re.compile(r"<|\.\.\.|\bKEY=|=VALUE|\$\{?[A-Z]|\bOVERRIDES\b|\[")
FLAGS_WITH_VALUE = {"--cfg", "-c", "--info", "-i", "-cn", "-cp", "-cd", "-p", "--package"}


def commands() -> list[tuple[str, str]]:
    """(page:line, command) for each command line in a fenced code block."""
    found = []
    for page in PAGES:
        fenced, pending, where = False, "", ""
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced, pending = not fenced, ""
                continue
            if not fenced:
                continue
            if pending:
                pending += " " + line.strip()
            elif START.match(line):
                pending, where = line.strip().removeprefix("$ "), f"{page.relative_to(ROOT)}:{n}"
            else:
                continue
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            found.append((where, pending.split("  #")[0].split(" # ")[0].strip()))
            pending = ""
    return found


COMMANDS = commands()


def words(command: str) -> list[str]:
    tokens = shlex.split(command)
    return tokens[3:] if tokens[1:3] == ["-m", "bench"] else tokens[1:]


def overrides(args: list[str]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in FLAGS_WITH_VALUE:
            skip = True
        elif not a.startswith("-") and a != "plan":
            out.append(a)
    return out


def first_job(args: list[str]) -> list[str]:
    """The overrides of a sweep's first job: each comma list's first value; Hydra's own
    settings (``hydra.*``; its groups, ``hydra/launcher=...``, kept) and sweep functions
    left out."""
    out = []
    for a in args:
        key, _, value = a.partition("=")
        if key.lstrip("+").startswith("hydra.") or "(" in value:
            continue
        out.append(f"{key}={value.split(',')[0]}" if "," in value and "[" not in value else a)
    return out


SWEEPS = [(w, c) for w, c in COMMANDS if not PLACEHOLDER.search(c) and words(c)[:1] not in
          [[t] for t in cli.TOOLS]]  # fmt: skip


def test_the_docs_show_commands_and_the_tools_exist() -> None:
    assert len(COMMANDS) >= 40, len(COMMANDS)
    tools = [words(c)[0] for _, c in COMMANDS if words(c) and "=" not in words(c)[0]]
    unknown = sorted({t for t in tools if not t.startswith("-") and t not in [*cli.TOOLS, "plan"]})
    assert not unknown, unknown


@pytest.mark.parametrize(("where", "command"), SWEEPS, ids=[w for w, _ in SWEEPS])
def test_a_documented_command_composes(where: str, command: str) -> None:
    args = overrides(words(command))
    assert check(args) == [], f"{where}: {command}"
    with initialize_config_dir(config_dir=cli.CONF_DIR, version_base="1.3"):
        config = compose("config", overrides=first_job(args))
    with open_dict(config):
        config.pop("hydra", None)
    assert _unknown_keys(config, BenchConfig) == [], f"{where}: {command}"
    assert isinstance(OmegaConf.to_object(config), BenchConfig), f"{where}: {command}"
