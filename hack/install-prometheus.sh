#!/usr/bin/env bash
# The Prometheus server (from Debian's `prometheus` package, the one hack/install-promtool.sh
# unpacks) for the `fleet --prometheus` tests (tests/fleet/test_fleet_prometheus.py). Unpacked
# into a cache, never installed: no service starts. Prints the path of the prometheus binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
promtool="$(bash "$here/install-promtool.sh" | tail -n 1)"
bin="$(dirname "$promtool")/prometheus"
if [ ! -x "$bin" ]; then
  # promtool came from PATH without its server beside it: unpack the package into the cache.
  cache="${BOOTIMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootimage-controller}/promtool"
  bin="$cache/usr/bin/prometheus"
  if [ ! -x "$bin" ]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 || true; apt-get download prometheus >/dev/null 2>&1; }; } && dpkg -x prometheus_*.deb "$cache")
  fi
fi
"$bin" --version >/dev/null
echo "$bin"
