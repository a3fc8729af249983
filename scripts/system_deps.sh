#!/usr/bin/env bash
# System packages and services the test suite needs (Debian; run as root).  Idempotent:
# installs only what is missing and starts only what is not running.  Sections are added
# by the features that need them; each one must be safe to run twice.
set -euo pipefail

apt_install() {  # apt_install PACKAGE... : install the ones not yet installed
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "system_deps: please install: ${missing[*]} (needs root and apt-get)" >&2
    return 1
  fi
  echo "system_deps: installing ${missing[*]}" >&2
  if [ -z "${BENCH_APT_UPDATED:-}" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    export BENCH_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# `source scripts/system_deps.sh --functions-only` defines apt_install and stops here.
if [ "${1:-}" = "--functions-only" ]; then return 0 2>/dev/null || exit 0; fi

# Sections below: one per feature.

# Comparison report (issue 9): tests/e2e/test_report.py renders the HTML report in headless
# Chromium and keeps a screenshot; fonts so that the page's text renders.
apt_install chromium fonts-dejavu-core

# Containers (issue 5): launcher=docker, compose.yaml and tests/e2e/test_docker.py need a
# Docker engine (Debian's docker.io), a compose tool (docker-compose) and debootstrap (for
# the local base image, scripts/build_base_image.sh: no registry is reachable here).  The
# engine is started when none answers: by systemd where it runs, else dockerd in the
# background (log: /var/log/dockerd.log) on overlay2, or vfs where overlayfs is missing.
apt_install docker.io docker-compose debootstrap
if ! docker info >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    systemctl start docker
  else
    driver=overlay2
    grep -qw overlay /proc/filesystems || driver=vfs
    echo "system_deps: starting dockerd (storage driver $driver)" >&2
    setsid nohup dockerd --storage-driver="$driver" --log-level=warn \
      >>/var/log/dockerd.log 2>&1 </dev/null &
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || {
    echo "system_deps: the Docker engine did not start; /var/log/dockerd.log says:" >&2
    tail -20 /var/log/dockerd.log >&2
    exit 1
  }
fi

# Slurm (issue 8): a real two-node cluster (two slurmd on this host) for tests/e2e/test_slurm.py.
bash "$(dirname "${BASH_SOURCE[0]}")/slurm_cluster.sh"
