"""`bench TOOL ...` runs the tool (each also `python -m bench.TOOL`), with its own exit
status; a bare word never reaches Hydra."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from bench import cli


@pytest.mark.parametrize("tool", sorted(cli.TOOLS))
def test_every_tool_answers_help(tool: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setattr(sys, "argv", ["bench", tool, "--help"])
    with pytest.raises(SystemExit) as done:
        cli.run()
    assert done.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_a_tools_bad_input_keeps_its_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench", "parity", "--frameworks", "torch"])
    with pytest.raises(SystemExit) as done:
        cli.run()
    assert done.value.code == 2
    assert "--frameworks" in capsys.readouterr().err


def test_a_word_that_is_no_command_is_refused_before_hydra(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench", "setup", "mxnet"])
    with pytest.raises(SystemExit) as done:
        cli.run()
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "'setup' is not a command" in err and "report, sync" in err and "key=value" in err
