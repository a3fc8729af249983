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

# Sections below: one per feature.
