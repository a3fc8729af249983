# bench's PyTorch image: the pinned framework, bench's trial code, a non-root user.
#
# Built by bench (bench/images.py, tagged bench/torch:VARIANT-CONTENTHASH) or by
# `docker compose build torch`; the build context is the repository root (see .dockerignore).
# Build arguments:
#   BASE_IMAGE   the image to build on, pinned by digest (bench resolves a tag to one).
#                Default: PyTorch's official CUDA runtime image.  Needs python3 with venv.
#   VARIANT      cuda (default): the framework build for NVIDIA GPUs (the official image's
#                own torch when it matches the pin); cpu: the CPU-only build, from
#                docker/wheelhouse/ if a torch wheel is there, else from TORCH_CPU_INDEX_URL.
#   BENCH_UID    uid of the image's `bench` user (the launcher runs trials as a non-root uid).
# Optional files in docker/: version.lock (a framework version other than the pinned one:
# bench.envs.environments.image_lock's hashed lock, installed instead of the pins) and
# wheelhouse/*.whl (wheels pip may install).
# transformers (the hf extra: model=hf under framework=torch, built from its config class,
# no weights downloaded), at the version the host's lock pins, for the pinned torch only: a
# version.lock image has none, and bench refuses model=hf there before any trial.  Never
# keras-hub, tensorflow-text or TensorFlow (those are the TF image's).
# Needs BuildKit (bench builds with it; compose: see compose.yaml): pip's downloads are kept
# in a cache mount between builds, and a CA bundle for pip comes in as the build secret
# `ca` (`--secret id=ca,src=FILE`), never part of a layer.
ARG BASE_IMAGE=pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime

FROM ${BASE_IMAGE} AS build
ARG VARIANT=cuda
ARG TORCH_CPU_INDEX_URL=https://download.pytorch.org/whl/cpu
# The bracketed names are optional: a pattern that matches nothing copies nothing.
COPY docker/constraints-torch.txt docker/wheelhous[e] docker/version.loc[k] /ctx/
RUN --mount=type=cache,target=/var/cache/bench-pip --mount=type=secret,id=ca \
    set -eu; \
    export PIP_CACHE_DIR=/var/cache/bench-pip; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    case "$VARIANT" in \
      cpu) if ls /ctx/torch-*.whl >/dev/null 2>&1; then index=""; \
           else index="--extra-index-url $TORCH_CPU_INDEX_URL"; fi ;; \
      cuda) index="" ;; \
      *) echo "VARIANT must be cpu or cuda, got '$VARIANT'" >&2; exit 1 ;; \
    esac; \
    python3 -m venv --system-site-packages /opt/venv; \
    pip="/opt/venv/bin/python -m pip --disable-pip-version-check --no-input -q"; \
    $pip install --constraint /ctx/constraints-torch.txt pip; \
    if [ -s /ctx/version.lock ]; then \
      $pip install --require-hashes --no-deps -r /ctx/version.lock; \
    else \
      $pip install --constraint /ctx/constraints-torch.txt --find-links /ctx $index \
        torch transformers numpy psutil nvidia-ml-py scikit-learn matplotlib mlcommons-loadgen; \
    fi; \
    /opt/venv/bin/python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; \
    if [ ! -s /ctx/version.lock ]; then \
      /opt/venv/bin/python -c "import transformers; print('transformers', transformers.__version__)"; \
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
