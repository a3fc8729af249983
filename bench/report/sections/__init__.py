"""The report's sections.  Each builder returns None when the runs hold no data for it."""

from bench.report.sections import common
from bench.report.sections.breakdown import breakdown
from bench.report.sections.common import Context
from bench.report.sections.generation import generation
from bench.report.sections.other_pairs import other_pairs
from bench.report.sections.serving import HISTORY_KEYS as SERVING_HISTORY
from bench.report.sections.serving import serving
from bench.report.sections.time_to_accuracy import time_to_accuracy
from bench.report.sections.timing import inference_vs_batch, power, relative_time
from bench.report.sections.training import (
    accuracy,
    distributed,
    epochs_and_utilization,
    oom_frontier,
)
from bench.report.sections.tuning import at_best
from bench.report.sections.versions import versions

# The histories the report reads: per-epoch metrics, and each LoadGen run's load and p99.
HISTORY_KEYS = common.HISTORY_KEYS + SERVING_HISTORY

__all__ = [
    "HISTORY_KEYS",
    "Context",
    "accuracy",
    "at_best",
    "breakdown",
    "distributed",
    "epochs_and_utilization",
    "generation",
    "inference_vs_batch",
    "oom_frontier",
    "other_pairs",
    "power",
    "relative_time",
    "serving",
    "time_to_accuracy",
    "versions",
]
