"""Credentials in a tracking URI (``http://USER:PASSWORD@HOST``): understood, handed to
MLflow's own variables, and never printed, spooled or logged (issue 29, finding 4).  The
server here is a small local one that asks for basic auth; the real MLflow server behind
such a proxy runs in tests/e2e/test_tracking_server.py."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.tracking import reach


@pytest.fixture
def guarded() -> Iterator[str]:
    """http://127.0.0.1:PORT, answering /health only with the basic auth of user:s3cret."""
    want = "Basic " + base64.b64encode(b"user:s3cret").decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(200 if self.headers.get("Authorization") == want else 401)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def no_credentials() -> Iterator[None]:
    """None before each test, and none left after it (take_credentials sets them)."""
    import os

    saved = {k: os.environ.pop(k, None) for k in (reach.USERNAME_VAR, reach.PASSWORD_VAR)}
    yield
    for key, value in saved.items():
        os.environ.pop(key, None)
        if value is not None:
            os.environ[key] = value


def test_credentials_leave_the_uri_for_mlflows_variables() -> None:
    import os

    clean = reach.take_credentials("http://user:s%40cret@127.0.0.1:5000/prefix")
    assert clean == "http://127.0.0.1:5000/prefix"
    assert os.environ[reach.USERNAME_VAR] == "user"
    assert os.environ[reach.PASSWORD_VAR] == "s@cret"
    assert reach.take_credentials("sqlite:///mlruns/mlflow.db") == "sqlite:///mlruns/mlflow.db"


def test_every_uri_in_a_text_is_redacted() -> None:
    line = "tracking.uri=http://user:s3cret@host:5000 model=lenet5 x=https://a:b@c/d"
    assert reach.redact(line) == "tracking.uri=http://***@host:5000 model=lenet5 x=https://***@c/d"
    assert reach.redact("sqlite:///mlruns/mlflow.db") == "sqlite:///mlruns/mlflow.db"


def test_a_server_that_wants_credentials_is_reached_with_them(guarded: str) -> None:
    host = guarded.removeprefix("http://")
    # Before: the URI went to urllib as it was: "Name or service not known", and spooled.
    assert reach.reachable(f"http://user:s3cret@{host}") is None
    assert "s3cret" not in (reach.reachable(f"http://user:wrong@{host}") or "s3cret")
    assert "which were refused" in (reach.reachable(f"http://user:wrong@{host}") or "")


def test_a_server_asking_for_credentials_none_were_given_says_which_variables(
    guarded: str,
) -> None:
    said = reach.reachable(guarded) or ""
    assert "HTTP 401" in said and "none were given" in said
    assert reach.USERNAME_VAR in said and reach.PASSWORD_VAR in said


def test_the_config_boundary_takes_them_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra import compose, initialize_config_dir

    from bench.cli import CONF_DIR
    from bench.core.config import flatten, to_dict
    from bench.sweep.compose import to_bench_config

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        config = compose("config", overrides=["tracking.uri=http://user:s3cret@127.0.0.1:9"])
    cfg = to_bench_config(config)
    assert cfg.tracking.uri == "http://127.0.0.1:9"
    assert "s3cret" not in repr(flatten(to_dict(cfg)))  # params, config.json, spool records


def test_the_command_line_loses_them_before_hydra_writes_its_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hydra copies the overrides into its output folders (.hydra/overrides.yaml): the CLI
    hands them over without the password."""
    from bench.cli import _without_credentials

    monkeypatch.delenv(reach.USERNAME_VAR, raising=False)
    monkeypatch.delenv(reach.PASSWORD_VAR, raising=False)
    args = ["-m", "model=lenet5", "tracking.uri=http://user:s3cret@127.0.0.1:9",
            "+tracking.uri=https://u:p%40ss@h"]  # fmt: skip
    out = _without_credentials(args)
    assert out == [
        "-m",
        "model=lenet5",
        "tracking.uri=http://127.0.0.1:9",
        "+tracking.uri=https://h",
    ]
    import os

    assert (os.environ[reach.USERNAME_VAR], os.environ[reach.PASSWORD_VAR]) == ("u", "p@ss")


@pytest.mark.parametrize("quote", ["'", '"'])
def test_a_quoted_uri_loses_them_too(quote: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: ``tracking.uri='http://u:pw@h'`` kept its password, which Hydra wrote to
    .hydra/overrides.yaml, config.yaml and hydra.yaml."""
    from bench.cli import _credentials_left, _without_credentials

    monkeypatch.delenv(reach.USERNAME_VAR, raising=False)
    monkeypatch.delenv(reach.PASSWORD_VAR, raising=False)
    out = _without_credentials([f"tracking.uri={quote}http://u:s3cret@127.0.0.1:9{quote}"])
    assert out == [f"tracking.uri={quote}http://127.0.0.1:9{quote}"]
    assert _credentials_left(out) == ""
    import os

    assert os.environ[reach.PASSWORD_VAR] == "s3cret"


@pytest.mark.parametrize(
    "args",
    [
        ["tracking={uri:http://u:s3cret@127.0.0.1:9,experiment:x}"],
        ["-m", "tracking.uri=http://u:s3cret@a:9,http://u:s3cret@b:9"],
        ["+extra_uri=https://u:s3cret@h"],
    ],
)
def test_credentials_in_any_other_form_are_refused_in_one_line(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before Hydra sees the command line (so no .hydra/ file is written): one line naming
    MLflow's variables, without the password."""
    from bench.cli import _credentials_left, _without_credentials

    monkeypatch.delenv(reach.USERNAME_VAR, raising=False)
    monkeypatch.delenv(reach.PASSWORD_VAR, raising=False)
    line = _credentials_left(_without_credentials(args))
    assert reach.USERNAME_VAR in line and reach.PASSWORD_VAR in line
    assert "s3cret" not in line and "\n" not in line


LEAKY = "# @package _global_\ntracking:\n  uri: http://u:s3cret@127.0.0.1:9\n"


def test_a_password_in_a_config_file_is_refused_before_hydra_writes_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 51: a preset holding ``tracking.uri: http://u:pw@h`` (a folder of the user's, or
    bench's conf/) reached .hydra/config.yaml: refused in one line naming the file and the
    key, exit 2, before Hydra (here a stand-in) is started."""
    import sys

    import bench.cli as cli

    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "leaky.yaml").write_text(LEAKY)
    started: list[str] = []
    monkeypatch.setattr(cli, "main", lambda: started.append("hydra"))
    monkeypatch.chdir(tmp_path)
    for flags in (["--config-dir", "conf"], ["-cd=conf"], ["hydra.searchpath=[file://conf]"]):
        monkeypatch.setattr(sys, "argv", ["bench", *flags, "model=lenet5"])  # chosen or not
        with pytest.raises(SystemExit) as done:
            cli.run()
        assert done.value.code == 2 and not started
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "s3cret" not in err, err
        assert err.startswith(f"bench: {Path('conf/experiment/leaky.yaml')}: tracking.uri: ")
        assert reach.USERNAME_VAR in err and reach.PASSWORD_VAR in err


def test_only_a_value_counts_not_a_comment_nor_an_interpolation(tmp_path: Path) -> None:
    from bench.cli import CONF_DIR, _credentials_in_files

    assert _credentials_in_files(["-m", "model=lenet5"], CONF_DIR) == ""  # bench's own: none
    (tmp_path / "a.yaml").write_text(
        "# tracking.uri: http://u:s3cret@h (a comment)\n"
        "tracking:\n  uri: http://${oc.env:BENCH_USER}:${oc.env:BENCH_PW}@h\n"
    )
    assert _credentials_in_files(["--config-dir", str(tmp_path)], CONF_DIR) == ""
    (tmp_path / "b.yaml").write_text("servers:\n  - http://a\n  - https://u:s3cret@b\n")
    line = _credentials_in_files(["--config-dir", str(tmp_path)], CONF_DIR)
    assert f"{tmp_path / 'b.yaml'}: servers.1: a URI with credentials (https://***@b)" in line
