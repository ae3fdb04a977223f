#!/usr/bin/env python3
"""Write the OLM bundle (bundle/) from manifests/, so a catalog install runs what `oc apply -k` does.

    python hack/gen_bundle.py            # rewrite bundle/
    python hack/gen_bundle.py --check    # exit 1 if bundle/ is not what manifests/ say

What OLM (v0, registry+v1 bundles) cannot express, and what the bundle does instead:
- Roles in other namespaces: a CSV's `permissions` apply to the install namespace only, so the
  rules of the Roles in openshift-machine-api and openshift-cluster-api become `clusterPermissions`
  (the same verbs and names, cluster-wide). The kustomize install stays the tighter one.
- DaemonSets: a bundle installs Deployments only, so the aleph reporter is not part of it (skew then
  judges from the other evidence, SPEC section 5).
- ValidatingAdmissionPolicies (the claim guard): not an object kind bundles carry; apply
  manifests/claim-guard-policy.yaml once (docs/install.md).
"""

from __future__ import annotations

import argparse
import base64
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "manifests"
BUNDLE = REPO / "bundle"
PACKAGE = "bootimage-controller"
NAMESPACE = "openshift-machine-config-operator"
CHANNEL = "alpha"
# Objects of the kustomize install a bundle carries as they are (OLM creates them in the install namespace).
CARRIED = ("service.yaml", "servicemonitor.yaml", "prometheusrule.yaml", "poddisruptionbudget.yaml", "trusted-ca.yaml")
ICON = """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="10" fill="#151515"/>
<path d="M14 44l10-24h16l10 24H14z" fill="#ee0000"/><circle cx="32" cy="27" r="5" fill="#fff"/></svg>"""


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def _version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def _image() -> str:
    """The image manifests/image sets (the one place: hack/set-image.sh writes it)."""
    component = yaml.safe_load((MANIFESTS / "image" / "kustomization.yaml").read_text())
    image = next(i for i in component["images"] if i["name"] == PACKAGE)
    if image.get("digest"):
        return f"{image['newName']}@{image['digest']}"
    return f"{image['newName']}:{image.get('newTag', 'latest')}"


def csv() -> dict[str, Any]:
    version = _version()
    deployment = next(d for d in _documents("deployment.yaml") if d["kind"] == "Deployment")
    spec = deployment["spec"]
    for container in spec["template"]["spec"]["containers"]:
        if container["image"] == PACKAGE:
            container["image"] = _image()
    # The bundle grants the Cluster API's rights too: clusterPermissions need no namespace to exist.
    rbac = _documents("rbac-controller.yaml") + _documents("components/capi/rbac-capi.yaml")
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace"))
             for b in rbac if b["kind"].endswith("Binding")
             and any(s.get("name") == PACKAGE and s.get("namespace") == NAMESPACE for s in b["subjects"])}
    cluster_rules: list[dict[str, Any]] = []
    own_rules: list[dict[str, Any]] = []
    for role in rbac:
        if role["kind"] not in ("ClusterRole", "Role"):
            continue
        key = (role["kind"], role["metadata"]["name"], role["metadata"].get("namespace"))
        if key not in bound:
            continue  # e.g. the metrics reader, bound to prometheus-k8s: carried as its own object
        if role["kind"] == "Role" and role["metadata"]["namespace"] == NAMESPACE:
            own_rules += role["rules"]
        else:
            cluster_rules += role["rules"]
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": f"{PACKAGE}.v{version}",
            "namespace": "placeholder",
            "annotations": {
                "capabilities": "Basic Install",
                "categories": "OpenShift Optional",
                "containerImage": _image(),
                "description": "Keeps the boot images of OpenShift worker MachineSets current and enforces boot image skew.",
                "operatorframework.io/suggested-namespace": NAMESPACE,
                "operators.openshift.io/infrastructure-features": '["disconnected", "proxy-aware"]',
                "features.operators.openshift.io/disconnected": "true",
                "features.operators.openshift.io/proxy-aware": "true",
                "features.operators.openshift.io/fips-compliant": "false",
                "features.operators.openshift.io/tls-profiles": "false",
                "features.operators.openshift.io/token-auth-aws": "false",
                "features.operators.openshift.io/token-auth-azure": "false",
                "features.operators.openshift.io/token-auth-gcp": "false",
                "features.operators.openshift.io/cnf": "false",
                "features.operators.openshift.io/cni": "false",
                "features.operators.openshift.io/csi": "false",
            },
            "labels": {"operatorframework.io/arch.amd64": "supported", "operatorframework.io/arch.arm64": "supported",
                       "operatorframework.io/os.linux": "supported"},
        },
        "spec": {
            "displayName": "Boot Image Controller",
            "description": (BUNDLE / "description.md").read_text(),
            "version": version,
            "maturity": CHANNEL,
            "minKubeVersion": "1.29.0",
            "provider": {"name": "bootimage-controller maintainers"},
            "maintainers": [{"name": "bootimage-controller maintainers"}],
            "keywords": ["boot image", "rhcos", "machineset", "cluster api", "skew"],
            "icon": [{"base64data": base64.b64encode(ICON.encode()).decode(), "mediatype": "image/svg+xml"}],
            "installModes": [
                {"type": "OwnNamespace", "supported": True},
                {"type": "SingleNamespace", "supported": False},
                {"type": "MultiNamespace", "supported": False},
                {"type": "AllNamespaces", "supported": False},
            ],
            # Served by OpenShift itself, not by an operator of the catalog: declared as native APIs so
            # OLM checks they exist rather than looking for their provider.
            "nativeAPIs": [
                {"group": "machine.openshift.io", "version": "v1beta1", "kind": "MachineSet"},
                {"group": "operator.openshift.io", "version": "v1", "kind": "MachineConfiguration"},
                {"group": "config.openshift.io", "version": "v1", "kind": "Infrastructure"},
                {"group": "config.openshift.io", "version": "v1", "kind": "ClusterVersion"},
                {"group": "config.openshift.io", "version": "v1", "kind": "ClusterOperator"},
            ],
            "customresourcedefinitions": {},
            "install": {
                "strategy": "deployment",
                "spec": {
                    "deployments": [{"name": deployment["metadata"]["name"], "label": deployment["metadata"]["labels"],
                                     "spec": spec}],
                    "clusterPermissions": [{"serviceAccountName": PACKAGE, "rules": cluster_rules}],
                    "permissions": [{"serviceAccountName": PACKAGE, "rules": own_rules}],
                },
            },
        },
    }


def metrics_reader() -> list[dict[str, Any]]:
    return [d for d in _documents("rbac-controller.yaml") if d["metadata"]["name"] == f"{PACKAGE}-metrics-reader"]


def annotations() -> dict[str, Any]:
    return {"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": PACKAGE,
        "operators.operatorframework.io.bundle.channels.v1": CHANNEL,
        "operators.operatorframework.io.bundle.channel.default.v1": CHANNEL,
    }}


def files() -> dict[Path, str]:
    header = "# Generated by hack/gen_bundle.py from manifests/: do not edit, re-run the script.\n"
    out = {
        BUNDLE / "manifests" / f"{PACKAGE}.clusterserviceversion.yaml": header + yaml.safe_dump(csv(), sort_keys=False),
        BUNDLE / "metadata" / "annotations.yaml": header + yaml.safe_dump(annotations(), sort_keys=False),
    }
    for name in CARRIED:
        for doc in _documents(name):
            doc["metadata"].pop("namespace", None)  # OLM puts them in the install namespace
            out[BUNDLE / "manifests" / f"{doc['metadata']['name']}.{doc['kind'].lower()}.yaml"] = header + yaml.safe_dump(doc, sort_keys=False)
    for doc in metrics_reader():
        out[BUNDLE / "manifests" / f"{doc['metadata']['name']}.{doc['kind'].lower()}.yaml"] = header + yaml.safe_dump(doc, sort_keys=False)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if bundle/ is not current")
    args = parser.parse_args(argv)
    wanted = files()
    present = {p for p in BUNDLE.rglob("*.yaml")} if BUNDLE.exists() else set()
    if args.check:
        stale = [str(p.relative_to(REPO)) for p, text in wanted.items() if not p.exists() or p.read_text() != text]
        stale += [str(p.relative_to(REPO)) for p in present - set(wanted)]
        if stale:
            print(f"bundle/ is out of date ({', '.join(sorted(stale))}): run hack/gen_bundle.py", file=sys.stderr)
            return 1
        return 0
    for path in present - set(wanted):
        path.unlink()
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(wanted)} files under {BUNDLE.relative_to(REPO)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
