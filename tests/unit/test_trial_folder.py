"""What a trial leaves in its folder is not trusted (docs/security.md): the host copies only
regular files inside the folder into MLflow (or the spool), never following a link, and
names everything else in ``bench.refused_files``.  The trial here is a stand-in for a
hostile worker or image: it replaces its log with a link to a host file, leaves a FIFO where
its telemetry should be, links a host folder in, and names paths outside its folder."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from bench import tracking
from bench.core.config import BenchConfig
from bench.core.result import ERROR, OK, EpochRecord, TrialResult
from bench.launchers import process
from bench.launchers.base import Launcher
from bench.launchers.collect import collect
from bench.sweep import session as session_mod
from bench.trial.loop import EpochCallback
from bench.trial.runtime.protocol import EventReader, read_result, tail

SECRET = "HOST SECRET 7f3a"


def host_file(tmp_path: Path) -> Path:
    """A file of the host's, outside any trial folder."""
    secret = tmp_path / "host" / "shadow"
    secret.parent.mkdir()
    secret.write_text(f"root:{SECRET}:19000::::::\n")
    return secret


class Hostile(Launcher):
    """Leaves a trial folder as a malicious image could, and reports ok."""

    def __init__(self, secret: Path) -> None:
        self.secret = secret

    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        workdir.mkdir(parents=True)
        (workdir / "worker.log").symlink_to(self.secret)
        os.mkfifo(workdir / "telemetry_host.csv")
        (workdir / "plots").mkdir()
        (workdir / "plots" / "epochs.png").write_bytes(b"\x89PNG fine")
        (workdir / "plots" / "more.png").symlink_to(self.secret)
        (workdir / "hostdir").symlink_to(self.secret.parent, target_is_directory=True)
        (workdir / "hard.csv").hardlink_to(self.secret)
        result = TrialResult(OK, cfg.framework.name, cfg.model.name, cfg.mode)
        result.files = [
            "telemetry_host.csv",
            "plots/epochs.png",
            "hostdir",
            "hard.csv",
            str(self.secret),
            "../host/shadow",
        ]
        return result


def test_a_hostile_trial_folder_gives_up_only_its_regular_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = host_file(tmp_path)
    monkeypatch.setenv("BENCH_STATE_DIR", str(tmp_path / "state"))
    store = tracking.Spool("http://127.0.0.1:9", "bench", "unreachable in this test")
    sweep_id = store.start_sweep("sweep", {})
    sweep = session_mod.Sweep(store, sweep_id, 1, launcher=lambda name: Hostile(secret))
    done: list[session_mod.Row] = []
    worker = threading.Thread(  # a host that followed the FIFO would block here for ever
        target=lambda: done.append(sweep.run(BenchConfig(), "trial", tmp_path / "trial", 1)),
        daemon=True,
    )
    worker.start()
    worker.join(30)
    assert done, "collecting the trial's folder blocked (it opened the FIFO)"
    (spooled,) = tracking.spooled()
    record = json.loads(spooled.read_text())
    assert SECRET not in spooled.read_text()
    logged = set(record["files"])
    assert "plots/epochs.png" in logged
    assert not logged & {"worker.log", "telemetry_host.csv", "plots/more.png", "hard.csv"}
    assert not any(name.startswith(("hostdir", "/", "..")) for name in logged)
    refused = record["result"]["environment"]["refused_files"]
    for what in (
        "worker.log: a symbolic link",
        "telemetry_host.csv: a FIFO",
        "plots/more.png: a symbolic link",
        "hostdir: a symbolic link",
        "hard.csv: a hard link",
        f"'{secret}': not a name inside",
        "'../host/shadow': not a name inside",
    ):
        assert what in refused, what
    assert "not collected" in capsys.readouterr().err


def test_collect_copies_regular_files_and_folders_byte_for_byte(tmp_path: Path) -> None:
    workdir, into = tmp_path / "trial", tmp_path / "staged"
    (workdir / "prof" / "a").mkdir(parents=True)
    (workdir / "prof" / "a" / "trace.pb").write_bytes(b"\x00\xff")
    (workdir / "worker.log").write_text("log\n")
    into.mkdir()
    got = collect(workdir, ["worker.log", "prof", "missing.csv"], into)
    assert got.refused == [] and got.files == [into / "worker.log", into / "prof"]
    assert (into / "prof" / "a" / "trace.pb").read_bytes() == b"\x00\xff"


def test_the_protocol_files_are_not_followed_or_blocked_on(tmp_path: Path) -> None:
    """The host's other reads of a trial folder: the log's tail in an error message, the
    result and the epochs, each a link to a host file or a FIFO."""
    secret = host_file(tmp_path)
    outside = tmp_path / "host" / "result.json"
    outside.write_text(json.dumps(TrialResult(OK, "torch", "lenet5", "train").to_dict()))
    log = tmp_path / "worker.log"
    log.symlink_to(secret)
    assert SECRET not in tail(log)
    status, message = process.died(1, BenchConfig(), log)
    assert status == ERROR and SECRET not in message
    (tmp_path / "result.json").symlink_to(outside)
    assert read_result(tmp_path / "result.json") is None
    os.mkfifo(tmp_path / "events.jsonl")
    seen: list[EpochRecord] = []
    assert EventReader(tmp_path / "events.jsonl", seen.append).poll() == []  # returns at once
    os.mkfifo(tmp_path / "fifo.log")
    assert tail(tmp_path / "fifo.log") == ""


def test_a_trial_file_too_large_to_read_is_refused_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile or broken trial that writes gigabytes does not take the host's memory: its
    result is no result, its events none, its log's tail only the last megabyte."""
    from bench.trial.runtime import protocol

    monkeypatch.setattr(protocol, "MAX_READ", 1000)
    big = TrialResult(OK, "torch", "lenet5", "train")
    big.error = "x" * 5000
    (tmp_path / "result.json").write_text(json.dumps(big.to_dict()))
    assert read_result(tmp_path / "result.json") is None
    (tmp_path / "events.jsonl").write_text("y" * 5000 + "\n")
    assert EventReader(tmp_path / "events.jsonl").poll() == []
    (tmp_path / "worker.log").write_text("old line\n" * 100 + "the last line\n")
    assert tail(tmp_path / "worker.log", lines=1) == "the last line"
    with pytest.raises(OSError, match="more than 1000 bytes"):
        protocol.read_regular(tmp_path / "result.json")
