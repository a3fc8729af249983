#!/usr/bin/env bash
# Set up, lint, type-check, check the import contracts, build the docs and run the whole
# test suite.
#
# Horovod's build (about 13 minutes of compiling on 2 cores, cached afterwards) runs niced in
# the background while the lint and the rest of the suite run; the Horovod tests run last and
# wait for it (tests/conftest.py).  BENCH_HOROVOD=0 skips the build and those tests.  The
# Docker tests' images start building in the background too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system_deps.sh
BENCH_MXNET=1 BENCH_HOROVOD=0 bash scripts/setup.sh

build=$(mktemp -d)
background=()  # process groups stopped when this script ends, however it ends
cleanup() {
  for pid in "${background[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
  rm -rf "$build"
}
trap cleanup EXIT
if [ "${BENCH_HOROVOD:-1}" = 0 ]; then
  echo 0 > "$build/rc"
else
  setsid bash -c 'nice -n 10 .venv/bin/python -m bench setup horovod >"$0/log" 2>&1; echo $? >"$0/rc"' \
    "$build" &
  background+=($!)
fi
export BENCH_HOROVOD_BUILD=$build
# The Docker tests' images, built meanwhile too (tests/docker_images.py); their fixture
# waits for a build under way (bench.images.ensure and the base image script hold locks).
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  setsid .venv/bin/python -m tests.docker_images >"$build/images.log" 2>&1 &
  background+=($!)
fi

.venv/bin/ruff check bench tests scripts hydra_plugins
.venv/bin/ruff format --check bench tests scripts hydra_plugins
.venv/bin/mypy bench
.venv/bin/lint-imports --no-cache  # the import contracts in pyproject.toml
.venv/bin/python scripts/layout_doc.py --check  # the docs' module and script lists
.venv/bin/python scripts/locks.py --check  # the locks are what pyproject.toml and the grid give
# The wheels bench carries to a Python 3.12 interpreter that has its own torch (the GPU check's
# machine): the set resolves for CPython 3.12 manylinux x86_64 and stays under 50 MiB.
.venv/bin/python scripts/gpu_wheels.py --check
bash scripts/docs.sh  # docs/: mkdocs --strict, no broken link or anchor
# Two pytest-xdist workers; tests that share the Docker engine's images, the Slurm cluster,
# the version environments or the Horovod build keep to one worker (tests/conftest.py).
.venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
if [ -f "$build/rc" ]; then cat "$build/log" >&2; fi
