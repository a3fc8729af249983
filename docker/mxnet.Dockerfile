# bench's MXNet image: the pinned framework (MXNet 1.9.1, numpy 1.23), bench's trial code,
# a non-root user.  MXNet is retired upstream (see README: MXNet); its environment is
# pinned by docker/constraints-mxnet.txt, the same file scripts/setup_mxnet.sh uses for
# the host's .venv-mxnet.
#
# Built by bench (bench/images.py, tagged bench/mxnet:VARIANT-CONTENTHASH) or by
# `docker compose build mxnet`; the build context is the repository root (see .dockerignore).
# Build arguments:
#   BASE_IMAGE   the image to build on, pinned by digest (bench resolves a tag to one).
#                Default: NVIDIA's CUDA 11.7 runtime with cuDNN 8 (Ubuntu 22.04; Python 3.11
#                comes from Ubuntu's python3.11 package when the base has none).  The cpu
#                variant's default is python:3.11-slim-bookworm.
#   VARIANT      cuda (default): mxnet-cu117 (CUDA 11.7 build; a driver >= 515); cpu: mxnet
#                (OpenBLAS + oneDNN).  Both with the parameter-server kvstore built in.
#   BENCH_UID    uid of the image's `bench` user (the launcher runs trials as a non-root uid).
# Optional files in docker/: wheelhouse/*.whl (wheels pip may install).
# Needs BuildKit (bench builds with it; compose: see compose.yaml): pip's downloads are kept
# in a cache mount between builds, and a CA bundle for pip comes in as the build secret
# `ca` (`--secret id=ca,src=FILE`), never part of a layer.
ARG BASE_IMAGE=nvidia/cuda:11.7.1-cudnn8-runtime-ubuntu22.04

FROM ${BASE_IMAGE} AS runtime
# MXNet's libmxnet.so needs the system's libgomp and libquadmath; Python 3.11 with venv.
RUN set -eu; \
    missing=""; \
    command -v python3.11 >/dev/null || missing="python3.11 python3.11-venv"; \
    ldconfig -p | grep -q libgomp.so.1 || missing="$missing libgomp1"; \
    ldconfig -p | grep -q libquadmath.so.0 || missing="$missing libquadmath0"; \
    if [ -n "$missing" ]; then \
      apt-get update; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; \
      rm -rf /var/lib/apt/lists/*; \
    fi

FROM runtime AS build
ARG VARIANT=cuda
# The bracketed names are optional: a pattern that matches nothing copies nothing.
COPY docker/constraints-mxnet.txt docker/wheelhous[e] /ctx/
RUN --mount=type=cache,target=/var/cache/bench-pip --mount=type=secret,id=ca \
    set -eu; \
    export PIP_CACHE_DIR=/var/cache/bench-pip; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    case "$VARIANT" in \
      cpu) framework=mxnet ;; \
      cuda) framework=mxnet-cu117 ;; \
      *) echo "VARIANT must be cpu or cuda, got '$VARIANT'" >&2; exit 1 ;; \
    esac; \
    python3.11 -m venv /opt/venv; \
    pip="/opt/venv/bin/python -m pip --disable-pip-version-check --no-input -q"; \
    $pip install --constraint /ctx/constraints-mxnet.txt pip; \
    $pip install --constraint /ctx/constraints-mxnet.txt --find-links /ctx \
      "$framework" numpy psutil nvidia-ml-py scikit-learn matplotlib mlcommons-loadgen; \
    /opt/venv/bin/python -c "import mxnet; print('mxnet', mxnet.__version__)"

FROM runtime
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
