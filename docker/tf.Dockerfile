# bench's TensorFlow image: the pinned framework, bench's trial code, a non-root user.
#
# Built by bench (bench/images.py, tagged bench/tf:VARIANT-CONTENTHASH) or by
# `docker compose build tf`; the build context is the repository root (see .dockerignore).
# Build arguments:
#   BASE_IMAGE   the image to build on, pinned by digest (bench resolves a tag to one).
#                Default: TensorFlow's official GPU image.  Needs python3 with venv.
#   VARIANT      cuda (default): `tensorflow` (the official GPU image's own when it matches
#                the pin); cpu: `tensorflow-cpu`.
#   BENCH_UID    uid of the image's `bench` user (the launcher runs trials as a non-root uid).
# Optional files in docker/: version.lock (a framework version other than the pinned one:
# bench.envs.environments.image_lock's hashed lock, installed instead of the pins) and
# wheelhouse/*.whl (wheels pip may install).
# keras-hub and tensorflow-text (model=hf under framework=tf; never in the torch image):
# tensorflow-text requires the distribution `tensorflow`, which the cpu variant has as
# tensorflow-cpu, so both are installed without their dependencies, then keras-hub's own
# (tensorflow-text's is TensorFlow alone).
# Needs BuildKit (bench builds with it; compose: see compose.yaml): pip's downloads are kept
# in a cache mount between builds, and a CA bundle for pip comes in as the build secret
# `ca` (`--secret id=ca,src=FILE`), never part of a layer.
ARG BASE_IMAGE=tensorflow/tensorflow:2.21.0-gpu

FROM ${BASE_IMAGE} AS build
ARG VARIANT=cuda
# The bracketed names are optional: a pattern that matches nothing copies nothing.
COPY docker/constraints-tf.txt docker/wheelhous[e] docker/version.loc[k] /ctx/
RUN --mount=type=cache,target=/var/cache/bench-pip --mount=type=secret,id=ca \
    set -eu; \
    export PIP_CACHE_DIR=/var/cache/bench-pip; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    case "$VARIANT" in \
      cpu) framework=tensorflow-cpu ;; \
      cuda) framework=tensorflow ;; \
      *) echo "VARIANT must be cpu or cuda, got '$VARIANT'" >&2; exit 1 ;; \
    esac; \
    python3 -m venv --system-site-packages /opt/venv; \
    pip="/opt/venv/bin/python -m pip --disable-pip-version-check --no-input -q"; \
    $pip install --constraint /ctx/constraints-tf.txt pip; \
    if [ -s /ctx/version.lock ]; then \
      $pip install --require-hashes --no-deps -r /ctx/version.lock; \
    else \
      $pip install --constraint /ctx/constraints-tf.txt --find-links /ctx \
        "$framework" keras numpy psutil nvidia-ml-py scikit-learn matplotlib mlcommons-loadgen; \
      $pip install --constraint /ctx/constraints-tf.txt --no-deps keras-hub tensorflow-text; \
      deps=$(/opt/venv/bin/python -c "from importlib.metadata import requires; \
from packaging.requirements import Requirement as R; \
rs = [R(r) for r in requires('keras-hub')]; \
print(' '.join(r.name for r in rs if r.name != 'tensorflow-text' \
      and (r.marker is None or r.marker.evaluate({'extra': ''}))))"); \
      $pip install --constraint /ctx/constraints-tf.txt $deps; \
    fi; \
    /opt/venv/bin/python -c "import tensorflow as tf; print('tensorflow', tf.__version__)"; \
    if [ ! -s /ctx/version.lock ]; then \
      /opt/venv/bin/python -c "import keras_hub; print('keras-hub', keras_hub.__version__)"; \
    fi

FROM ${BASE_IMAGE}
ARG BENCH_UID=1000
COPY --from=build /opt/venv /opt/venv
RUN useradd --uid "$BENCH_UID" --user-group --create-home bench 2>/dev/null \
      || useradd --user-group --create-home bench; \
    mkdir -p /trial && chown bench:bench /trial
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/bench \
    PYTHONUNBUFFERED=1
COPY bench/ /opt/bench/bench/
RUN python -m compileall -q /opt/bench
USER bench
WORKDIR /trial
CMD ["python", "-m", "bench.trial.worker", "/trial"]
