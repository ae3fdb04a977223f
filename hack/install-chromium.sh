#!/usr/bin/env bash
# Headless Chromium (Debian's `chromium`) for the fleet page test (tests/fleet/test_fleet_page.py).
# Prints the path of the browser. Installed with apt-get when missing (root or sudo; about a minute
# and 110 MB the first time), then found on PATH.
set -euo pipefail
for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; exit 0; fi
done
sudo_=""
if [ "$(id -u)" -ne 0 ]; then sudo_="sudo"; fi
echo "[bootimage-controller tests] installing chromium with apt-get (about a minute, once)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo_ apt-get install -y -q --no-install-recommends chromium >&2 \
  || { $sudo_ apt-get update -q >&2 && $sudo_ apt-get install -y -q --no-install-recommends chromium >&2; }
command -v chromium
