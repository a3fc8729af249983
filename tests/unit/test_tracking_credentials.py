"""Credentials in a tracking URI (``http://USER:PASSWORD@HOST``): understood, handed to
MLflow's own variables, and never printed, spooled or logged (issue 29, finding 4).  The
server here is a small local one that asks for basic auth; the real MLflow server behind
such a proxy runs in tests/e2e/test_tracking_server.py."""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator

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
