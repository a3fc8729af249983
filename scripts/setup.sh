#!/usr/bin/env bash
# Create .venv with the pinned host environment (requirements.lock) and bench installed
# in editable mode.  Safe to re-run: it reinstalls only when the lock or pyproject changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null; then python=$candidate; break; fi
  done
fi
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup: Python 3.11 or newer is needed (found $("$python" --version))" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=".venv/.bench-$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing the pinned environment into .venv (a few minutes the first time)" >&2
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.lock
  .venv/bin/python -m pip install -q --no-deps -e .
  rm -f .venv/.bench-*
  touch "$stamp"
fi

# MXNet's own environment (.venv-mxnet): framework=mxnet trials run in it.
if [ "${BENCH_SKIP_MXNET:-0}" != 1 ]; then
  bash scripts/setup_mxnet.sh
fi
# Horovod, built from its sdist with a small patch (scripts/setup_horovod.sh; BENCH_HOROVOD=0 skips).
bash scripts/setup_horovod.sh
