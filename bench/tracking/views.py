"""The runs table a user opens: a saved view of MLflow's UI on an experiment, naming the
columns bench's runs are compared by, so that ``bench ui``'s link shows them at once.

MLflow 3.17 keeps a saved view as an experiment tag ``mlflow.sharedViewState.<id>``: an
envelope ``{name, createdAt, updatedAt, state}`` whose ``state`` is the JSON text of the
runs page's search facets and table state (``selectedColumns`` and the rest), what its
"Save as new view" writes; ``?viewStateShareKey=<id>`` opens it (mlflow/server/js, the
``sharedViewState`` envelope in its chunks).  bench keeps one such view, replaced each time:
an experiment holds at most 40."""

from __future__ import annotations

import json
import time
from typing import Any

from bench.core import metrics

VIEW_ID = "bench-latest"
_TAG = "mlflow.sharedViewState."

# The runs table's columns, as the UI names them: what a comparison reads first.
COLUMNS = [
    "attributes.`Duration`",
    "attributes.`Dataset`",
    f"metrics.`{metrics.TRIAL_SAMPLES_PER_S}`",  # the rate the sweep's summary shows
    f"metrics.`{metrics.TRIAL_TIME_S}`",
    f"metrics.`{metrics.EPOCH_TIME_S}`",
    "tags.`bench.status`",
    "params.`framework.name`",
    "params.`batch_size`",
]


def view_state(sweep_id: str) -> dict[str, Any]:
    """The runs page's state: a sweep's trials (all runs without one), oldest first, with
    :data:`COLUMNS`; every other field at the UI's own default."""
    return {
        "searchFilter": f"tags.mlflow.parentRunId = '{sweep_id}'" if sweep_id else "",
        "orderByKey": "attributes.start_time",
        "orderByAsc": True,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": COLUMNS,
        "columnOrder": [],
        "columnWidths": {},
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "groupBy": None,
        "groupsExpanded": {},
        "globalLineChartConfig": {
            "xAxisKey": "step",
            "lineSmoothness": 0,
            "selectedXAxisMetricKey": "",
        },
    }


def save_runs_view(client: Any, experiment_id: str, sweep_id: str, label: str) -> str:
    """Save (or replace) bench's view of ``experiment_id`` on ``client``'s store, named for
    ``label``; the id its link takes (``viewStateShareKey``)."""
    now = int(time.time() * 1000)
    envelope = {
        "name": f"bench: {label}"[:120],
        "createdAt": now,
        "updatedAt": now,
        "state": json.dumps(view_state(sweep_id)),
    }
    client.set_experiment_tag(experiment_id, _TAG + VIEW_ID, json.dumps(envelope))
    return VIEW_ID
