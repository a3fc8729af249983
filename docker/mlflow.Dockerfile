# The MLflow tracking server of compose.yaml: mlflow pinned by docker/constraints-mlflow.txt,
# its database (sqlite) on the volume at /mlflow/db and the run artifacts it serves on the
# volume at /mlflow/artifacts.  Runs as a non-root user.
# Build arguments: BASE_IMAGE (any image with python3 and its venv module).
# Optional: docker/ca-bundle.pem, a CA bundle for pip (build stage only).
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# The bracketed name is optional: a pattern that matches nothing copies nothing.
COPY docker/constraints-mlflow.txt docker/ca-bundle.pe[m] /ctx/
RUN set -eu; \
    if [ -s /ctx/ca-bundle.pem ]; then export PIP_CERT=/ctx/ca-bundle.pem; fi; \
    python3 -m venv /opt/venv; \
    pip="/opt/venv/bin/python -m pip --no-cache-dir --disable-pip-version-check --no-input -q"; \
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
