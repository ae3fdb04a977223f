#!/bin/bash
# Build hack/capi-template-name (the Machine Config Operator's way of naming a new AWSMachineTemplate,
# with CAPA's own types) for tests/core/capi/test_template_names.py and hack/gen_capi_shape.py.
# Cached by the content of its sources: ~/.cache/bootimage-controller/capi-template-name-<sha>/.
# Needs the Go module proxy the first time (about 3 minutes on 2 cores); Go is found by
# hack/go-toolchain.sh.
# Usage: hack/build-capi-template-name.sh [--path]   (--path: print where the binary is or will be)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/capi-template-name" && pwd)
key=$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go | sha256sum | cut -c1-12)
OUT=$HOME/.cache/bootimage-controller/capi-template-name-$key
if [[ ${1:-} == --path ]]; then echo "$OUT/capi-template-name"; exit 0; fi
[[ -x $OUT/capi-template-name ]] && exit 0
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
source "$(dirname "$0")/go-toolchain.sh"
find_go "$W"
echo "[capi-template-name] building with $GO ($("$GO" env GOVERSION)) into $OUT"
mkdir -p "$OUT"
(cd "$SRC" && GOTOOLCHAIN=local GOPATH=$W/gopath GOMODCACHE=$W/gopath/pkg/mod GOCACHE=$W/gocache \
  GOFLAGS="-modcacherw -mod=readonly" CGO_ENABLED=0 "$GO" build -o "$W/capi-template-name" . >"$W/build.log" 2>&1) \
  || { echo "[capi-template-name] build failed; its output:" >&2; tail -n 40 "$W/build.log" >&2; exit 1; }
mv "$W/capi-template-name" "$OUT/capi-template-name"
echo "[capi-template-name] built: $OUT/capi-template-name"
