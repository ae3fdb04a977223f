#!/bin/bash
# Point every manifest at one image: the Deployment, the aleph DaemonSet, the uninstall Job (all
# through manifests/image, a kustomize component) and the OLM bundle's CSV (regenerated from it).
# Needs no kustomize binary.
#   hack/set-image.sh quay.io/example/bootimage-controller:0.1.0
#   hack/set-image.sh image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/bootimage-controller@sha256:<64 hex>
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: hack/set-image.sh <registry>/<path>/bootimage-controller:<tag>|@sha256:<digest>}
if [[ $ref =~ ^([a-z0-9.:_/-]+)@(sha256:[0-9a-f]{64})$ ]]; then
  name=${BASH_REMATCH[1]}; pin="  digest: ${BASH_REMATCH[2]}"
elif [[ $ref =~ ^([a-z0-9.:_/-]*[a-z0-9_-]):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$ && ${BASH_REMATCH[1]} == */* ]]; then
  name=${BASH_REMATCH[1]}; pin="  newTag: ${BASH_REMATCH[2]}"
else
  echo "error: $ref is not an image reference with a registry and a tag or digest (e.g. quay.io/me/bootimage-controller:0.1.0)" >&2
  exit 2
fi
component=manifests/image/kustomization.yaml
header=$(sed -n '/^apiVersion:/q;p' "$component")
cat >"$component" <<YAML
$header
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
images:
- name: bootimage-controller
  newName: $name
$pin
YAML
python=python3
[[ -x .venv/bin/python ]] && python=.venv/bin/python
"$python" hack/gen_bundle.py
echo "image set to $ref in $component and bundle/ (apply with: oc apply -k manifests/)"
