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


def test_with_bench_s_view_the_link_opens_it_and_the_view_holds_the_sweep() -> None:
    link = ui.runs_link("http://127.0.0.1:5000", "7", "abc123", "bench-latest")
    params = parse_qs(urlsplit(link).fragment.partition("?")[2])
    assert params["viewStateShareKey"] == ["bench-latest"]
    assert "searchFilter" not in params  # a filter in the link would override the view's


def test_the_saved_view_is_mlflows_envelope_with_benchs_columns() -> None:
    import json

    from bench.core import metrics
    from bench.tracking import views

    class Client:
        tags: dict[tuple[str, str], str] = {}

        def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
            self.tags[(experiment_id, key)] = value

    client = Client()
    assert views.save_runs_view(client, "7", "abc123", "framework=torch,tf") == "bench-latest"
    ((where, value),) = client.tags.items()
    assert where == ("7", "mlflow.sharedViewState.bench-latest")  # one view, replaced
    envelope = json.loads(value)
    assert envelope["name"] == "bench: framework=torch,tf"
    assert isinstance(envelope["createdAt"], int) and isinstance(envelope["state"], str)
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == "tags.mlflow.parentRunId = 'abc123'"
    assert f"metrics.`{metrics.TRIAL_SAMPLES_PER_S}`" in state["selectedColumns"]
    assert "tags.`bench.status`" in state["selectedColumns"]
    assert len(value) < 20_000  # MLflow's UI refuses a larger view
