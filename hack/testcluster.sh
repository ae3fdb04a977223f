#!/usr/bin/env bash
# Start the loopback test control plane (etcd + kube-apiserver + kube-controller-manager, the
# project's CRDs installed, OpenShift namespaces created) for manual experiments; Ctrl-C stops it.
# Usage: hack/testcluster.sh [WORKDIR]    then: export KUBECONFIG=<printed path>
# Same code as the integration tests (tests/harness/cluster.py), so the same binary lookup:
# KUBEBUILDER_ASSETS, $BOOTIMAGE_TEST_CACHE or ~/.cache/bootimage-controller/kube-v1.20.2,
# ../shared/tools, else a build from Debian's source package.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || python=python3
cd "$root/tests"
exec "$python" -m harness.cluster "$@"
