#!/usr/bin/env bash
# promtool (from Debian's `prometheus` package) for the alert rule tests (tests/deploy/test_alerts.py).
# Unpacked into a cache, never installed: no service starts, nothing outside the cache changes.
# Prints the path of promtool. Takes about 2 s (a 19 MB download); cached afterwards.
set -euo pipefail
cache="${BOOTIMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootimage-controller}/promtool"
bin="$cache/usr/bin/promtool"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
if command -v promtool >/dev/null 2>&1; then command -v promtool; exit 0; fi
mkdir -p "$cache"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
if ! apt-get download prometheus >/dev/null 2>&1; then
  # Empty package lists (a fresh container): refresh them once, then try again.
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get download prometheus >/dev/null 2>&1
fi
dpkg -x prometheus_*.deb "$cache"
"$bin" --version >/dev/null
echo "$bin"
