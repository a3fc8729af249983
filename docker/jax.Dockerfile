# bench's JAX image: the pinned jax/jaxlib, Keras (the zoo's models on its JAX backend) and
# Flax (model.source=flax), bench's trial code, a non-root user.
#
# Built by bench (bench/images.py, tagged bench/jax:VARIANT-CONTENTHASH) or by
# `docker compose build jax`; the build context is the repository root (see .dockerignore).
# Build arguments:
#   BASE_IMAGE   the image to build on, pinned by digest (bench resolves a tag to one).
#                Default: the official Python image.  JAX publishes no official CUDA image:
#                both variants install from pip, the cuda variant with jax's CUDA 12 plugin
#                and the nvidia-* libraries it needs (the driver comes from the host with
#                the GPUs, as for every image bench runs with launcher.docker.gpus).
#   VARIANT      cuda (default): jax[cuda12]; cpu: jax[cpu] (jaxlib alone).
#   BENCH_UID    uid of the image's `bench` user (the launcher runs trials as a non-root uid).
# Optional files in docker/: version.lock (a framework version other than the pinned one:
# bench.envs.environments.image_lock's hashed lock, installed instead of the pins) and
# wheelhouse/*.whl (wheels pip may install).
# Needs BuildKit (bench builds with it; compose: see compose.yaml): pip's downloads are kept
# in a cache mount between builds, and a CA bundle for pip comes in as the build secret
# `ca` (`--secret id=ca,src=FILE`), never part of a layer.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ARG VARIANT=cuda
# The bracketed names are optional: a pattern that matches nothing copies nothing.
COPY docker/constraints-jax.txt docker/wheelhous[e] docker/version.loc[k] /ctx/
RUN --mount=type=cache,target=/var/cache/bench-pip --mount=type=secret,id=ca \
    set -eu; \
    export PIP_CACHE_DIR=/var/cache/bench-pip; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    case "$VARIANT" in \
      cpu) framework="jax jaxlib" ;; \
      cuda) framework="jax jaxlib jax-cuda12-plugin[with-cuda]" ;; \
      *) echo "VARIANT must be cpu or cuda, got '$VARIANT'" >&2; exit 1 ;; \
    esac; \
    python3 -m venv --system-site-packages /opt/venv; \
    pip="/opt/venv/bin/python -m pip --disable-pip-version-check --no-input -q"; \
    $pip install --constraint /ctx/constraints-jax.txt pip; \
    if [ -s /ctx/version.lock ]; then \
      $pip install --require-hashes --no-deps -r /ctx/version.lock; \
    else \
      $pip install --constraint /ctx/constraints-jax.txt --find-links /ctx \
        $framework keras flax numpy psutil nvidia-ml-py scikit-learn matplotlib \
        mlcommons-loadgen; \
    fi; \
    /opt/venv/bin/python -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"

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
