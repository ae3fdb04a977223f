#!/usr/bin/env bash
# The project's one test command (README "Quick start", and CI through .ci/run).
# Installs the project with its test extras into .venv, then runs lint, type checks and every test,
# including the integration tests on a real loopback kube-apiserver (tests/harness/cluster.py finds
# or builds the binaries: kube-apiserver, kube-controller-manager and etcd 3.6, all from Go modules).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Against the image's pins (constraints.txt), so the tests run the versions the image ships; then
# check the pins still cover every runtime dependency exactly (hack/gen_constraints.py).
# setuptools' "editable installation" banner (a UserWarning of its build backend) says nothing here.
PYTHONWARNINGS="ignore::UserWarning" .venv/bin/python -m pip install -q -c constraints.txt -e '.[test]'
.venv/bin/python hack/gen_constraints.py --check
.venv/bin/ruff check
.venv/bin/mypy
# The test control plane's binaries (Kubernetes 1.34 and its etcd), before pytest: from the cache in
# seconds, or built from Go modules the first time (10-15 minutes on 2 cores, a progress line at least
# every 30 s; tests/harness/cluster.py, hack/build-kube-from-modules.sh).
.venv/bin/python tests/harness/cluster.py --prepare
# kustomize, to render the kustomizations as `oc apply -k` does (tests/deploy): built once, cached.
export BOOTIMAGE_KUSTOMIZE="${BOOTIMAGE_KUSTOMIZE:-$HOME/.cache/bootimage-controller/kustomize-v5.7.1/kustomize}"
[ -x "$BOOTIMAGE_KUSTOMIZE" ] || bash hack/build-kustomize.sh "$(dirname "$BOOTIMAGE_KUSTOMIZE")"
# The MCO's way of naming a new AWSMachineTemplate, with CAPA's Go types (tests/core/capi/test_template_names.py):
# built once from Go modules (about 3 minutes), cached by its sources.
bash hack/build-capi-template-name.sh
# Python in this image writes no bytecode (PYTHONDONTWRITEBYTECODE=1): every pytest process would then
# compile and assertion-rewrite all the test modules again (16 s of CPU each; collection took the four
# workers 50 s on 2 cores). One collection writes them first, and every process after it reads them.
unset PYTHONDONTWRITEBYTECODE
# A collection error is said by the runs below, which collect again: not here, not twice.
.venv/bin/python -m pytest -q -p no:cacheprovider --soak --collect-only >/dev/null 2>&1 || true
# Three processes wait more than they work, so with no arguments they run beside the suite, each in a
# pytest process (and a control plane) of its own:
# - the soak: 6 minutes of a settled fleet (tests/soak);
# - the idle minutes: the 60 s API server outage (tests/integration/test_daemon_outage.py: its server is
#   stopped, nothing runs), then the five idle minutes of tests/integration/test_absent_kinds.py (an
#   absent kind's cost);
# - the real MCO: the forecast beside it on AWS (tests/integration/test_real_mco.py, 16 kinds, 75 s of
#   MCO resyncs), then on GCP and Azure (tests/integration/test_forecast_platforms.py).
# Two processes (the forecasts after the soak and after the idle minutes) each took 10 to 10.5
# minutes, longer than the suite; three end minutes before it.
beside=()
pids=()
logs=()
titles=()
run_beside() {
  local title="$1" log
  shift
  log="$(mktemp)"
  .venv/bin/python -m pytest -q -rs -p no:cacheprovider --durations=5 "$@" >"$log" 2>&1 &
  pids+=("$!")
  logs+=("$log")
  titles+=("$title")
}
if [ "$#" -eq 0 ]; then
  run_beside "the soak (tests/soak; beside the suite):" --soak tests/soak
  run_beside "the API server outage and absent kinds (test_daemon_outage.py, test_absent_kinds.py; beside the suite):" \
    tests/integration/test_daemon_outage.py tests/integration/test_absent_kinds.py
  run_beside "the forecast beside the real MCO on AWS, GCP and Azure (test_real_mco.py, test_forecast_platforms.py; beside the suite):" \
    tests/integration/test_real_mco.py tests/integration/test_forecast_platforms.py
  beside=(--ignore=tests/integration/test_forecast_platforms.py --ignore=tests/integration/test_daemon_outage.py
          --ignore=tests/integration/test_absent_kinds.py --ignore=tests/integration/test_real_mco.py)
fi
# `-rs`: a skipped test says why (the reason line), here and in the processes beside the suite.
# Four workers (one file at a time each, each with its own loopback control plane): most integration
# tests wait on a server (a lease to expire, a first-boot deadline), so more workers than cores fill
# those waits on 2 cores; with two the suite took 10.4 minutes at b4c0370, with three 10.4-11.2 at
# 2c63944-46d5c6d, over its 10-minute budget. `--no-loadscope-reorder`: the workers take the files in
# the order tests/conftest.py gives (the minute-long ones first), not xdist's (most tests first).
# Not `-q`: quiet, xdist says "bringing up nodes..." twice off a terminal; at the default verbosity it
# says how many workers and tests instead.
rc=0
.venv/bin/python -m pytest -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder --durations=15 -rs \
  "${beside[@]}" "$@" || rc=$?
# Each process beside the suite: wait for it, print its output under a title, keep the first failure.
for i in "${!pids[@]}"; do
  code=0
  wait "${pids[$i]}" || code=$?
  echo "--- ${titles[$i]}"
  cat "${logs[$i]}"
  rm -f "${logs[$i]}"
  if [ "$rc" -eq 0 ]; then rc=$code; fi
done
exit "$rc"
