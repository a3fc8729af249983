# The MLflow tracking server of compose.yaml: mlflow pinned by docker/constraints-mlflow.txt,
# its database (sqlite) on the volume at /mlflow/db and the run artifacts it serves on the
# volume at /mlflow/artifacts.  Runs as a non-root user.
# Build arguments: BASE_IMAGE (any image with python3 and its venv module).
# Needs BuildKit (bench builds with it; compose: see compose.yaml): pip's downloads are kept
# in a cache mount between builds, and a CA bundle for pip comes in as the build secret
# `ca` (`--secret id=ca,src=FILE`), never part of a layer.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
COPY docker/constraints-mlflow.txt /ctx/
RUN --mount=type=cache,target=/var/cache/bench-pip --mount=type=secret,id=ca \
    set -eu; \
    export PIP_CACHE_DIR=/var/cache/bench-pip; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    python3 -m venv /opt/venv; \
    pip="/opt/venv/bin/python -m pip --disable-pip-version-check --no-input -q"; \
    $pip install --constraint /ctx/constraints-mlflow.txt pip; \
    $pip install --constraint /ctx/constraints-mlflow.txt mlflow; \
    /opt/venv/bin/mlflow --version

FROM ${BASE_IMAGE}
COPY --from=build /opt/venv /opt/venv
RUN useradd --uid 1000 --user-group --create-home mlflow 2>/dev/null \
      || useradd --user-group --create-home mlflow; \
    mkdir -p /mlflow/db /mlflow/artifacts && chown -R mlflow:mlflow /mlflow
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
USER mlflow
WORKDIR /mlflow
EXPOSE 5000
CMD ["mlflow", "server", "--host", "0.0.0.0", "--port", "5000", \
     "--backend-store-uri", "sqlite:////mlflow/db/mlflow.db", \
     "--artifacts-destination", "/mlflow/artifacts"]
