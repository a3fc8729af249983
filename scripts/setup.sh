#!/usr/bin/env bash
# Create .venv with the pinned host environment and bench installed in editable mode.  Safe
# to re-run: it reinstalls only when the lock, the variant or pyproject changed.
#
# The variant matches the host: where an NVIDIA driver answers (nvidia-smi lists a GPU),
# "cuda": requirements-cuda.lock (torch's CUDA wheel, as on PyPI, and TensorFlow with its
# CUDA libraries, tensorflow[and-cuda]); otherwise "cpu": requirements.lock.  BENCH_VARIANT=
# cpu|cuda overrides the choice; BENCH_SETUP_PLAN=1 prints the choice and installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

variant=${BENCH_VARIANT:-}
gpus=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -8 || true)
if [ -z "$variant" ]; then
  if [ -n "$gpus" ]; then
    variant=cuda; why="nvidia-smi lists $(echo "$gpus" | wc -l) GPU(s): $(echo "$gpus" | head -1)"
  else
    variant=cpu; why="no NVIDIA driver answers (nvidia-smi)"
  fi
else
  why="BENCH_VARIANT=$variant"
fi
case $variant in
  cpu) lock=requirements.lock ;;
  cuda) lock=requirements-cuda.lock ;;
  *) echo "setup: BENCH_VARIANT: cpu or cuda, got '$variant'" >&2; exit 2 ;;
esac
echo "setup: $why: the $variant variant ($lock)" >&2
if [ "${BENCH_SETUP_PLAN:-0}" = 1 ]; then
  echo "variant=$variant lock=$lock"
  exit 0
fi

python=${PYTHON:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null; then python=$candidate; break; fi
  done
fi
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is needed (found $("$python" --version))" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=".venv/.bench-$( (echo "$variant"; cat "$lock" pyproject.toml scripts/setup.sh) | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing the pinned environment into .venv (a few minutes the first time)" >&2
  # uv installs the hashed lock (every file checked against its hash; parallel downloads),
  # itself installed by pip at the lock's version and hash.
  awk '/^uv==/ {on=1; print; next} on && /^ +--hash/ {print; next} {on=0}' "$lock" \
    > .venv/uv-requirement.txt
  .venv/bin/python -m pip install -q --require-hashes --no-deps -r .venv/uv-requirement.txt
  links=()
  for dir in ${PIP_FIND_LINKS:-}; do links+=(--find-links "$dir"); done  # a local torch wheel
  if [ -z "${SSL_CERT_FILE:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt  # uv does not read pip's config
  fi
  # --compile-bytecode, as pip does by default: without .pyc files every bench process
  # compiles what it imports (about 5 s more per trial) wherever PYTHONDONTWRITEBYTECODE is set.
  if ! .venv/bin/uv pip install --quiet --require-hashes --compile-bytecode \
      --python .venv/bin/python "${links[@]}" -r "$lock" 2> .venv/install-errors.txt; then
    cat .venv/install-errors.txt >&2
    if grep -q "torch==.*+cpu" "$lock"; then
      echo "setup: the cpu variant takes PyTorch's CPU build (torch==$(sed -n \
        's/^torch==\([^ ]*\).*/\1/p' "$lock")): offer its wheel through PIP_FIND_LINKS=DIR, or" \
        "regenerate the lock with yours (scripts/locks.py)" >&2
    fi
    exit 1
  fi
  .venv/bin/uv pip install --quiet --no-deps --python .venv/bin/python -e .
  .venv/bin/python -m compileall -q -j 0 bench hydra_plugins >/dev/null  # editable: the sources
  .venv/bin/uv pip freeze --python .venv/bin/python --exclude-editable \
    > ".venv/installed-$variant.txt"
  rm -f .venv/.bench-*
  touch "$stamp"
fi

# MXNet's own environment (.venv-mxnet) and Horovod (built from its sdist with a small patch,
# about 13 minutes on 2 cores) are made where they are first needed: by a sweep's first MXNet
# trial, and by `bench setup mxnet|horovod`.  BENCH_MXNET=1 and BENCH_HOROVOD=1 make them now.
if [ "${BENCH_MXNET:-0}" = 1 ]; then
  BENCH_VARIANT=$variant bash scripts/setup_mxnet.sh
fi
if [ "${BENCH_HOROVOD:-0}" = 1 ]; then
  bash scripts/setup_horovod.sh
fi
