#!/usr/bin/env bash
# Build Horovod 0.28.1 against this venv's torch and TensorFlow, and install it into .venv
# (or the environment of BENCH_PYTHON: `bench setup horovod` sets it to bench's own).
#
# Horovod's last release (0.28.1, 2023) does not build against torch >= 2.1 or TF >= 2.16 as
# released; patches/horovod-0.28.1.patch is the smallest fix (docs/distributed.md, "Horovod"): C++17 for
# the core and the torch extension, XLA ops made opt-in (TF 2.16+ wheels lack the highwayhash
# headers they include), and a Release build without debug info (faster to build).
#
# The built wheel is cached under ~/.cache/bench/horovod-<hash of every input> (sdist version,
# patch, torch, TensorFlow and Python versions, build flags): with a cached wheel this takes
# seconds; a build takes about 13 minutes on 2 cores.  BENCH_HOROVOD=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${BENCH_HOROVOD:-1}" = 0 ] && { echo "setup_horovod: skipped (BENCH_HOROVOD=0)" >&2; exit 0; }

version=0.28.1
patch_file=patches/horovod-$version.patch
py=${BENCH_PYTHON:-$PWD/.venv/bin/python}
prefix=$("$py" -c 'import sys; print(sys.prefix)')
flags="HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_MXNET=1"
versions=$("$py" - <<'PY'
import importlib.metadata as m, sys
print(sys.version.split()[0], m.version("torch"), m.version("tensorflow"))
PY
)
key=$( (echo "$version $flags $versions"; cat "$patch_file") | sha256sum | cut -c1-16)
cache=${BENCH_CACHE:-$HOME/.cache/bench}/horovod-$key
stamp=$prefix/.horovod-$key

if [ -f "$stamp" ]; then exit 0; fi
if ! ls "$cache"/horovod-$version-*.whl >/dev/null 2>&1; then
  echo "setup_horovod: building Horovod $version for python/torch/tf $versions (about 13 min on 2 cores)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$py" -m pip download -q --no-deps --no-binary :all: "horovod==$version" -d "$work"
  tar --no-same-owner -xzf "$work/horovod-$version.tar.gz" -C "$work"
  (cd "$work/horovod-$version" && patch -p1 --quiet) < "$patch_file"
  mkdir -p "$cache"
  start=$(date +%s)
  (
    cd "$work/horovod-$version"
    export PATH="$(dirname "$py"):$PATH"  # cmake finds this venv's python, torch and TF
    export $flags MAKEFLAGS="-j$(nproc)"
    "$py" -m pip wheel -q . --no-build-isolation --no-deps -w "$cache"
  ) > "$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; echo "setup_horovod: the build failed" >&2; exit 1; }
  echo "setup_horovod: built in $(( $(date +%s) - start )) s; cached in $cache" >&2
fi
"$py" -m pip install -q --no-deps --force-reinstall "$cache"/horovod-$version-*.whl
rm -f "$prefix"/.horovod-*
touch "$stamp"
