#!/usr/bin/env bash
# The Prometheus server (Debian's `prometheus` package, the one hack/install-promtool.sh unpacks)
# for the `fleet --prometheus` tests (tests/fleet/test_fleet_prometheus.py). Prints the path of
# the prometheus binary; cached afterwards.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/prometheus-deb.sh"
bin="$PROMETHEUS_DEB_ROOT/usr/bin/prometheus"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
if command -v prometheus >/dev/null 2>&1; then command -v prometheus; exit 0; fi
unpack_prometheus_deb
"$bin" --version >/dev/null
echo "$bin"
