#!/bin/bash
# Build kube-apiserver and kube-controller-manager v1.20.2 from Debian bookworm's `kubernetes`
# source package (which carries vendor/), with Debian's Go 1.19. Needs root for apt-get.
# Usage: hack/build-kube-from-debian.sh OUTDIR     (about 5 minutes on 2 cores; 3 GB of scratch space)
set -euo pipefail
OUT=$(realpath -m "${1:?usage: build-kube-from-debian.sh OUTDIR}"); W=${W:-$(mktemp -d)}
mkdir -p "$W/apt/lists/partial" "$OUT"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  golang-1.19-go rsync make golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev >/dev/null
# source lists in a private apt state dir, derived from the machine's own Debian sources
# (deb822 files: add the deb-src type), so the system's apt configuration is untouched
mkdir -p "$W/apt/sources.list.d"
for f in /etc/apt/sources.list.d/*.sources; do
  sed 's/^Types: deb$/Types: deb deb-src/' "$f" > "$W/apt/sources.list.d/${f##*/}"
done
[[ -f /etc/apt/sources.list ]] && sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$W/apt/sources.list" || : > "$W/apt/sources.list"
A="-o Dir::Etc::SourceList=$W/apt/sources.list -o Dir::Etc::SourceParts=$W/apt/sources.list.d -o Dir::State::Lists=$W/apt/lists -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache="
apt-get $A update -qq
(cd "$W" && apt-get $A source --download-only -qq kubernetes=1.20.5+really1.20.2-1.1+deb12u1)
mkdir -p "$W/k8s" && tar xzf "$W"/kubernetes_1.20.5+really1.20.2.orig.tar.gz -C "$W/k8s" --strip-components=1
cd "$W/k8s"
# the vendored reflect2 1.0.1 / json-iterator 1.1.10 crash under Go >= 1.18: use Debian's 1.0.2 / 1.1.12
rm -rf vendor/github.com/modern-go/reflect2 vendor/github.com/json-iterator/go
cp -rL /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
cp -rL /usr/share/gocode/src/github.com/json-iterator/go vendor/github.com/json-iterator/go
find vendor/github.com/modern-go/reflect2 vendor/github.com/json-iterator/go -name '*_test.go' -delete
# Built with Go >= 1.16, 1.20's CRD validator rejects "" in string fields as null: its zero-value check
# only worked by accident of Go 1.15's reflect (kubernetes/kubernetes#99804). Apply the 1.21 fix
# (kubernetes/kube-openapi#230): drop the check. (bootimage-controller addition to shared/tools' script)
zero_check='data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))'
for f in $(grep -rlF "$zero_check" vendor/ staging/ 2>/dev/null || true); do
  sed -i "s/if $zero_check {/if data == nil {/" "$f"
done
export PATH=/usr/lib/go-1.19/bin:$PATH CGO_ENABLED=0 GOPROXY=off GOCACHE=$W/gocache HOME=$W/home GOPATH=$W/k8s/.go
mkdir -p "$HOME"
make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" GOLDFLAGS="-s -w" >"$W/make.log" 2>&1 || { tail -30 "$W/make.log"; exit 1; }
cp _output/bin/kube-apiserver _output/bin/kube-controller-manager "$OUT/"
"$OUT/kube-apiserver" --version
