"""``bench report``'s path arguments: a FIFO or a device given as ``--uri`` or ``--claims``,
or a file as ``--out``, is refused in one line with exit 2, never waited on; and the report's
files replace whatever lies at their names (a FIFO, a link) instead of writing through it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.cli.report import main as report_main
from bench.report import write
from bench.report.document import Report, Section


def within(seconds: float, call: Callable[[], Any], fifos: list[Path]) -> Any:
    """``call()``'s answer, or a failure if it is still waiting after ``seconds`` (then the
    FIFOs' other ends are opened, so that the waiting thread ends)."""
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                try:
                    os.close(os.open(fifo, flags))
                except OSError:
                    pass
        pytest.fail(f"still waiting after {seconds} s (blocked on a FIFO)")
    return answer[0]


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--uri", "sqlite:///{fifo}", "bench.report: --uri: {fifo} cannot be read (not a regular"),
        ("--uri", "sqlite:////dev/zero", "bench.report: --uri: /dev/zero cannot be read (not a"),
        ("--claims", "{fifo}", "bench.report: --claims: {fifo} cannot be read (not a regular"),
        ("--out", "{file}", "bench.report: --out: {file} is not a folder"),
    ],
)
def test_a_path_that_is_no_file_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, said: str
) -> None:
    fifo, file = tmp_path / "fifo", tmp_path / "file"
    os.mkfifo(fifo)
    file.write_text("x")
    names = {"fifo": fifo, "file": file}
    argv = [flag, value.format(**names), "--no-log"]
    if flag != "--out":
        argv += ["--out", str(tmp_path / "r")]
    assert within(5, lambda: report_main(argv), [fifo]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(said.format(**names)) and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_the_reports_files_replace_a_fifo_or_a_link_at_their_names(tmp_path: Path) -> None:
    out, outside = tmp_path / "r", tmp_path / "outside.txt"
    out.mkdir()
    outside.write_text("kept")
    os.mkfifo(out / "report.md")
    (out / "report.html").symlink_to(outside)
    report = Report("t", "s", [Section("S", "s", ["text"])])
    page = within(5, lambda: write(report, out), [out / "report.md"])
    assert outside.read_text() == "kept" and not page.is_symlink()
    assert (out / "report.md").is_file() and "text" in (out / "report.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["figures", "report.html", "report.md"]
