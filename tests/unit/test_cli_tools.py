"""`bench TOOL ...` runs the tool (each also `python -m bench.TOOL`), with its own exit
status; a bare word never reaches Hydra."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import cli

REPO = Path(__file__).resolve().parents[2]


def bench(monkeypatch: pytest.MonkeyPatch, *argv: str) -> Any:
    """``bench ARGV...`` in this process: its exit status."""
    monkeypatch.setattr(sys, "argv", ["bench", *argv])
    with pytest.raises(SystemExit) as done:
        cli.run()
    return done.value.code


@pytest.mark.parametrize("tool", sorted(cli.TOOLS))
def test_every_tool_answers_help(tool: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    assert bench(monkeypatch, tool, "--help") == 0
    assert "usage:" in capsys.readouterr().out


def test_a_tools_bad_input_keeps_its_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert bench(monkeypatch, "parity", "--frameworks", "torch") == 2
    assert "--frameworks" in capsys.readouterr().err


def test_a_word_that_is_no_command_is_refused_before_hydra(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert bench(monkeypatch, "install", "mxnet") == 2
    err = capsys.readouterr().err
    assert "'install' is not a command" in err and "report, sync" in err and "key=value" in err


def test_ctrl_c_while_the_command_line_is_checked_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 51: Ctrl-C after the imports but before bench's handler is in place (the
    command line's checks, 0.4 s) gave a traceback and a death by SIGINT (-2)."""
    from bench.cli import overrides

    def interrupted(args: list[str]) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(overrides, "check", interrupted)
    assert bench(monkeypatch, "-m", "model=lenet5") == 130
    assert capsys.readouterr().err.strip().splitlines() == ["bench: interrupted"]


@pytest.mark.parametrize("then", ["raise", "exit 1"])
def test_an_interrupt_a_library_turned_into_an_error_is_still_an_interrupt(
    then: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 51: a Ctrl-C landing while OmegaConf merged a config came out as an
    AttributeError with a traceback (OmegaConf wraps what it catches); raised outside
    Hydra's task, or reported by Hydra as a failure (exit 1, read as bad input: 2), it is
    still the interrupt bench counted: one line, 130."""

    def composed_while_interrupted() -> None:
        try:
            cli._interrupt(signal.SIGINT, None)
        except KeyboardInterrupt:  # what the library does with it
            if then == "exit 1":
                raise SystemExit(1) from None
            raise AttributeError("'NoneType' has no attribute '_invalidate_flags_cache'") from None

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(cli, "main", composed_while_interrupted)
    try:
        assert bench(monkeypatch, "-m", "model=lenet5") == 130
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert capsys.readouterr().err.strip().splitlines()[-1] == "bench: interrupted"


# Run with python -m: an interrupt that ended a nested evaluation (PyRun_*, as a C extension
# runs while it loads) and was then caught, and the exit status that follows.
NESTED_INTERRUPT = """
import ctypes, sys
sys.path.insert(0, {repo!r})


def interrupted(args):
    ctypes.pythonapi.PyRun_SimpleString(b"raise KeyboardInterrupt")  # the C extension's
    raise KeyboardInterrupt  # and the same interrupt, reaching bench


if sys.argv[1] == "bench":
    from bench import cli
    from bench.cli import overrides

    overrides.check = interrupted
    sys.argv = ["bench", "-m", "model=lenet5"]
    cli.run()
try:
    interrupted([])
except KeyboardInterrupt:
    sys.exit(130)  # caught, as bench did before exit_with
"""


def test_an_interrupt_caught_after_an_extension_saw_it_still_exits_130(tmp_path: Any) -> None:
    """Issue 51: about one Ctrl-C in five in a sweep's first seconds ended -2, not 130, under
    python -m, after bench had said "interrupted": CPython had noted the interrupt as
    unhandled where it ended a nested evaluation (the control shows it), and killed itself
    with SIGINT after a clean exit."""
    import subprocess

    (tmp_path / "nested_interrupt.py").write_text(NESTED_INTERRUPT.format(repo=str(REPO)))

    def status(how: str) -> int:
        done = subprocess.run(
            [sys.executable, "-m", "nested_interrupt", how],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode

    assert status("plain") == -signal.SIGINT  # CPython's own behaviour, which bench undoes
    assert status("bench") == 130


def test_data_download_fetches_checks_and_keeps_an_archive(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from bench.cli import download

    site = tmp_path / "site"
    site.mkdir()
    (site / "cifar-10-python.tar.gz").write_bytes(b"not really CIFAR")
    monkeypatch.setattr(download, "BASE_URL", site.as_uri() + "/")
    monkeypatch.setitem(
        download.SOURCES,
        "cifar10",
        ("cifar-10-python.tar.gz", download.md5(site / "cifar-10-python.tar.gz")),
    )
    root = tmp_path / "data"
    assert bench(monkeypatch, "data", "download", "cifar10", "--root", str(root)) == 0
    assert (root / "cifar-10-python.tar.gz").read_bytes() == b"not really CIFAR"
    # A file whose sum is not the published one is discarded, with exit 1.
    monkeypatch.setitem(download.SOURCES, "cifar10", ("cifar-10-python.tar.gz", "0" * 32))
    (root / "cifar-10-python.tar.gz").unlink()
    assert "MD5 mismatch" in str(
        bench(monkeypatch, "data", "download", "cifar10", "--root", str(root))
    )
    assert not list(root.iterdir())


def test_data_download_without_network_prints_the_manual_steps(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from bench.cli import download

    monkeypatch.setattr(download, "BASE_URL", "http://127.0.0.1:9/")  # nothing listens there
    assert bench(monkeypatch, "data", "download", "cifar100", "--root", str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "eb9058c3a382ffc7106e4002c42a8d85" in err
    assert str(tmp_path / "cifar-100-python.tar.gz") in err
    assert not list(tmp_path.iterdir())  # no partial file left


def test_data_download_refuses_an_unknown_data_set(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert bench(monkeypatch, "data", "download", "imagenet") == 2
    assert "cifar10" in capsys.readouterr().err


def test_plan_checks_a_sweep_and_lists_its_trials_running_none(tmp_path: Any) -> None:
    """`bench plan ARGS` is `bench -m ARGS` stopped after every check (its own process:
    Hydra's entry point), with or without the -m; bad input is still exit 2."""
    import subprocess

    store = f"tracking.uri=sqlite:///{tmp_path}/m.db"
    for flag in ([], ["-m"]):
        done = subprocess.run(
            [sys.executable, "-m", "bench", "plan", *flag, "model=lenet5,vgg16",
             "framework=torch,tf", store],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[2:6] == [
            "1  framework=torch model=lenet5",
            "2  framework=tf model=lenet5",
            "3  framework=torch model=vgg16",
            "4  framework=tf model=vgg16",
        ]
        assert lines[-1].startswith("4 trials would run (a dry run: every check passed")
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "multirun").exists()
    bad = subprocess.run(
        [sys.executable, "-m", "bench", "plan", "model=lenet5", "batch_size=0", store],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "batch_size: must be >= 1, got 0" in bad.stderr


def test_cfg_job_resolves_benchs_own_resolvers(tmp_path: Any) -> None:
    """`--cfg job --resolve` of a preset whose data name is ${bench_cifar_if_present:}:
    the CLI registers the resolver before Hydra prints (no CIFAR archive here)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "bench", "--cfg", "job", "--resolve",
         "+experiment=seed004_cifar10_strategies"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "data:\n  name: synthetic\n" in done.stdout


@pytest.mark.parametrize("module", ["bench.models", "bench.trial.models.inventory"])
def test_the_inventory_keeps_its_entry_points(module: str) -> None:
    """``python -m bench.models`` (the host's command, bench.cli.models, behind the shim
    where it always was) and ``python -m bench.trial.models.inventory`` (the lines counted in a
    framework's own interpreter, which has no Hydra) both answer."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: python -m bench.models" in done.stdout and "--image-size" in done.stdout


def test_help_names_every_framework_from_its_spec() -> None:
    """``bench --help`` opens with conf/config.yaml's help header, whose framework list is
    the ``bench_frameworks`` resolver: the titles of the spec's frameworks.  (Composed here
    rather than run through Hydra's --help in this process, which rebinds the root logger
    to the test's captured stdout and breaks every later test's capture in this worker.)"""
    from omegaconf import OmegaConf

    from bench.core.frameworks import FRAMEWORKS

    conf = OmegaConf.load(Path(cli.CONF_DIR) / "config.yaml")
    header = OmegaConf.select(conf, "hydra.help.header")  # resolved by the resolver alone
    assert ", ".join(spec.title for spec in FRAMEWORKS.values()) in header, header


def test_report_reads_the_last_sweeps_store_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 50: `bench report` with no --uri reads the store the last sweep used, as `bench
    ui` and `bench reproduce` do, else bench's default store (each here a file that is no
    SQLite database, so that the refusal names the store it read)."""
    from bench.cli import report

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCH_LAST_STORE", str(tmp_path / "note"))
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns" / "mlflow.db").write_text("not a store")
    (tmp_path / "last.db").write_text("not a store either")
    assert report.main([]) == 2  # nothing noted: bench's default store
    assert "mlruns/mlflow.db is not an SQLite database" in capsys.readouterr().err
    (tmp_path / "note").write_text(f"sqlite:///{tmp_path / 'last.db'}\n")
    assert report.main([]) == 2
    assert f"{tmp_path / 'last.db'} is not an SQLite database" in capsys.readouterr().err
    assert report.main(["--uri", "sqlite:///mlruns/mlflow.db"]) == 2  # told: that one
    assert "mlruns/mlflow.db is not an SQLite database" in capsys.readouterr().err
