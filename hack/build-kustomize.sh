#!/bin/bash
# Build kustomize (sigs.k8s.io/kustomize/kustomize/v5) from Go modules into OUTDIR, for the tests
# that render the kustomizations as `oc apply -k` does (no kubectl or oc on this machine). Go is found
# by hack/go-toolchain.sh. About a minute the first time; cached by version.
# Usage: hack/build-kustomize.sh OUTDIR     env: KUSTOMIZE_VERSION=v5.7.1  GO=/path/to/go
set -euo pipefail
VERSION=${KUSTOMIZE_VERSION:-v5.7.1}
OUT=$(realpath -m "${1:?usage: build-kustomize.sh OUTDIR}")
[[ -x $OUT/kustomize ]] && exit 0
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
source "$(dirname "$0")/go-toolchain.sh"
find_go "$W"
echo "[kustomize $VERSION] building with $GO ($("$GO" env GOVERSION))"
mkdir -p "$OUT"
GOTOOLCHAIN=local GOPATH=$W/gopath GOMODCACHE=$W/gopath/pkg/mod GOCACHE=$W/gocache GOFLAGS=-modcacherw \
  CGO_ENABLED=0 GOBIN="$W/bin" "$GO" install "sigs.k8s.io/kustomize/kustomize/v5@$VERSION" >"$W/build.log" 2>&1 \
  || { echo "[kustomize $VERSION] build failed; its output:" >&2; tail -n 40 "$W/build.log" >&2; exit 1; }
mv "$W/bin/kustomize" "$OUT/kustomize"
echo "[kustomize $VERSION] built: $OUT/kustomize"
