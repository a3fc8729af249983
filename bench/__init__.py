"""bench: a containerized benchmark matrix for deep-learning frameworks, tracked in MLflow."""

__version__ = "0.1.0"
