#!/usr/bin/env bash
# Builds benchmarks/go_baseline (client-go, from the Go module proxy) into the project's cache, keyed
# by the sources' hash, and prints the binary's path. About 30 s the first time; cached afterwards.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${BOOTIMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootimage-controller}"
key="$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
bin="$cache/go-baseline-$key/go-baseline"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
go="$(command -v go || echo /usr/local/go/bin/go)"
[ -x "$go" ] || { echo "go-baseline: no Go toolchain (go on PATH or /usr/local/go)" >&2; exit 1; }
work="$cache/go-baseline-build"
mkdir -p "$(dirname "$bin")" "$work"
(cd "$here" && GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" GOCACHE="$work/gocache" GOTOOLCHAIN=local \
  GOFLAGS="-modcacherw -mod=readonly" CGO_ENABLED=0 "$go" build -o "$bin.tmp" .) >&2
mv "$bin.tmp" "$bin"
echo "$bin"
