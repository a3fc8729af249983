"""bench ui: the link it prints opens the runs table in MLflow's model-training view (the
view is the browser's choice, so the link carries workflowType), and the wait for the
server is bounded."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from bench.cli import ui


def test_the_link_opens_the_training_runs_of_the_sweep() -> None:
    link = ui.runs_link("http://127.0.0.1:5000/", "7", "abc123")
    fragment = urlsplit(link).fragment
    path, _, query = fragment.partition("?")
    assert path == "/experiments/7/runs"
    params = parse_qs(query)
    assert params["workflowType"] == ["machine_learning"]
    assert params["searchFilter"] == ["tags.mlflow.parentRunId = 'abc123'"]


def test_the_wait_gives_up() -> None:
    assert ui.wait_until_up("http://127.0.0.1:9/", limit_s=0.3, sleep=0.1) is False
