#!/usr/bin/env bash
# Create .venv-mxnet: MXNet's own pinned environment (docker/constraints-mxnet.txt).  Run by
# `bench setup mxnet` (and a sweep's first MXNet trial), which for an installed wheel sets
# BENCH_MXNET_VENV (the environment, else .venv-mxnet) and BENCH_SOURCE_ROOT (the folder put
# on its path, else this checkout).
#
# MXNet 1.9.1 needs numpy 1.23.x and so cannot share .venv (numpy 2.x for torch and
# TensorFlow).  Trials with framework=mxnet run `python -m bench.trial.worker` with this
# environment's interpreter (bench/envs/interpreters.py); the host process never imports mxnet.
# bench's sources are put on this environment's path by a .pth file (no copy: edits apply).
# Safe to re-run: it reinstalls only when the constraints or this script changed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${BENCH_SOURCE_ROOT:-$(pwd)}
venv=${BENCH_MXNET_VENV:-.venv-mxnet}

python=${PYTHON_MXNET:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null; then python=$candidate; break; fi
  done
fi
# numpy 1.23 has wheels up to Python 3.11; MXNet 1.9.1 is tested up to 3.11.
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "setup_mxnet: Python 3.11 is needed (found $("$python" --version)); set PYTHON_MXNET" >&2; exit 1; }

# MXNet's CUDA build (mxnet-cu117) links the CUDA 11 runtime, which no wheel of it brings:
# on the cuda variant (BENCH_VARIANT, set by setup.sh) it is installed only where that
# runtime is found; otherwise MXNet stays the CPU build, and bench's device preflight keeps
# it out of sweeps that would compare it there with a framework on the GPU.
package=mxnet
if [ "${BENCH_VARIANT:-cpu}" = cuda ]; then
  if ldconfig -p 2>/dev/null | grep -q 'libcudart.so.11'; then
    package=mxnet-cu117
    echo "setup_mxnet: the CUDA 11 runtime is here: MXNet's CUDA build (mxnet-cu117==1.9.1)" >&2
  else
    echo "setup_mxnet: MXNet stays the CPU build: its CUDA build needs the CUDA 11 runtime" \
      "(libcudart.so.11), not found here; launcher=docker runs it on the GPU from its image" >&2
  fi
fi
stamp="$venv/.bench-$( (echo "$package"; cat docker/constraints-mxnet.txt scripts/setup_mxnet.sh) | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup_mxnet: installing MXNet 1.9.1 ($package) into $venv (seconds with uv and a warm cache)" >&2
  mkdir -p "$(dirname "$venv")"
  uv=${BENCH_UV:-}
  if [ -z "$uv" ] && [ -x .venv/bin/uv ]; then uv=$PWD/.venv/bin/uv; fi
  other=$([ "$package" = mxnet ] && echo mxnet-cu117 || echo mxnet)  # both install "mxnet"
  wanted=("$package==1.9.1" numpy psutil nvidia-ml-py scikit-learn matplotlib mlcommons-loadgen)
  if [ -n "$uv" ]; then  # uv (bench's own dependency): parallel downloads, a shared cache
    if [ -z "${SSL_CERT_FILE:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
      export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt  # uv does not read pip's config
    fi
    [ -x "$venv/bin/python" ] || "$uv" venv --quiet --python "$python" "$venv"
    uvpip=("$uv" pip --quiet)
    "${uvpip[@]}" uninstall --python "$venv/bin/python" "$other" >/dev/null 2>&1 || true
    "${uvpip[@]}" install --python "$venv/bin/python" --compile-bytecode \
      --constraint docker/constraints-mxnet.txt \
      "${wanted[@]}"
  else
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    pip="$venv/bin/python -m pip --disable-pip-version-check --no-input -q"
    $pip install --constraint docker/constraints-mxnet.txt pip
    $pip uninstall -y "$other" >/dev/null 2>&1 || true
    $pip install --constraint docker/constraints-mxnet.txt "${wanted[@]}"
  fi
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$root" > "$site/bench-source.pth"
  # The worker side of bench must import here without torch, TensorFlow, Hydra or MLflow.
  "$venv/bin/python" -c 'import mxnet, bench.trial.worker, bench.trial.frameworks.mxnet_adapter; print("mxnet", mxnet.__version__)' >&2
  rm -f "$venv"/.bench-*
  touch "$stamp"
fi
