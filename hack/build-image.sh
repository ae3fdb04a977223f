#!/bin/bash
# Build the controller's image (Dockerfile: the base pinned by digest, every wheel hash-locked) and,
# with --push, push it; then point the manifests at it with hack/set-image.sh.
#   hack/build-image.sh quay.io/example/bootimage-controller:0.1.0 [--push] [--bundle]
# podman, else buildah. --bundle also builds the OLM bundle image (bundle.Dockerfile) as
# <name>-bundle:<tag>.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: hack/build-image.sh <registry>/<path>/bootimage-controller:<tag> [--push] [--bundle]}
shift
push=false; bundle=false
for arg in "$@"; do
  case $arg in
    --push) push=true ;;
    --bundle) bundle=true ;;
    *) echo "error: unknown option $arg" >&2; exit 2 ;;
  esac
done
if command -v podman >/dev/null; then build=(podman build); pushcmd=(podman push)
elif command -v buildah >/dev/null; then build=(buildah bud); pushcmd=(buildah push)
else echo "error: neither podman nor buildah is installed (dnf install podman)" >&2; exit 1
fi
"${build[@]}" -t "$ref" -f Dockerfile .
$push && "${pushcmd[@]}" "$ref"
if $bundle; then
  bundle_ref="${ref%:*}-bundle:${ref##*:}"
  "${build[@]}" -t "$bundle_ref" -f bundle.Dockerfile .
  $push && "${pushcmd[@]}" "$bundle_ref"
fi
echo "built $ref; next: hack/set-image.sh $ref"
