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
stamp=".venv/.bench-$( (echo "$variant"; cat requirements.lock "$lock" pyproject.toml) | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing the pinned environment into .venv (a few minutes the first time)" >&2
  .venv/bin/python -m pip install -q --upgrade pip
  if ! .venv/bin/python -m pip install -q -r "$lock" 2> .venv/pip-errors.txt; then
    [ "$variant" = cuda ] || { cat .venv/pip-errors.txt >&2; exit 1; }
    # TensorFlow's CUDA libraries could not join torch's (pip's resolver says why): keep
    # TensorFlow without them, on the CPU; bench's device preflight refuses sweeps that
    # would compare it there with torch on the GPU.
    tail -5 .venv/pip-errors.txt >&2
    echo "setup: tensorflow[and-cuda] does not install beside torch's CUDA wheel (above);" \
      "installing requirements.lock: TensorFlow will train on the CPU here (use" \
      "launcher=docker launcher.docker.gpus=all for it on the GPU)" >&2
    .venv/bin/python -m pip install -q -r requirements.lock
  fi
  .venv/bin/python -m pip install -q --no-deps -e .
  .venv/bin/python -m pip freeze --exclude-editable > ".venv/installed-$variant.txt"
  rm -f .venv/.bench-*
  touch "$stamp"
fi

# MXNet's own environment (.venv-mxnet): framework=mxnet trials run in it.
if [ "${BENCH_SKIP_MXNET:-0}" != 1 ]; then
  BENCH_VARIANT=$variant bash scripts/setup_mxnet.sh
fi
# Horovod, built from its sdist with a small patch (scripts/setup_horovod.sh; BENCH_HOROVOD=0 skips).
bash scripts/setup_horovod.sh
