#!/usr/bin/env bash
# Build the vCenter simulator the vSphere integration tests use, from Debian packages only:
#   golang-go + golang-github-vmware-govmomi-dev (installed here when missing, with apt-get).
# Usage: hack/vcsim/build.sh OUTPUT   (about a minute; no network beyond Debian's mirror)
set -euo pipefail
out=${1:?usage: build.sh OUTPUT}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v go >/dev/null || [ ! -d /usr/share/gocode/src/github.com/vmware/govmomi/simulator ]; then
    echo "vcsim: installing golang-go and golang-github-vmware-govmomi-dev" >&2
    sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
    $sudo_ apt-get install -y -q golang-go golang-github-vmware-govmomi-dev >&2 \
        || { $sudo_ apt-get update -q >&2 && $sudo_ apt-get install -y -q golang-go golang-github-vmware-govmomi-dev >&2; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/vcsim"
cp "$here/main.go" "$work/src/vcsim/"
echo "vcsim: building (about a minute)" >&2
(cd "$work/src/vcsim" && GO111MODULE=off GOPATH="$work:/usr/share/gocode" GOCACHE="$work/cache" \
    go build -o "$out.tmp" . )
mv "$out.tmp" "$out"
echo "vcsim: built $out" >&2
