"""The OLM bundle (issue 17): current with manifests/, and its CSV accepted unchanged by the API server
against the ClusterServiceVersion schema (tests/fixtures/olm), so a catalog install runs it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.objects import kube_request

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CSV_CRD = REPO / "tests" / "fixtures" / "olm" / "clusterserviceversions.crd.yaml"
CSV_FILE = REPO / "bundle" / "manifests" / "bootimage-controller.clusterserviceversion.yaml"


def test_the_bundle_is_generated_from_the_manifests() -> None:
    result = subprocess.run([sys.executable, str(REPO / "hack" / "gen_bundle.py"), "--check"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_csv_runs_the_kustomize_deployment_and_says_what_an_admin_needs() -> None:
    csv = yaml.safe_load(CSV_FILE.read_text())
    deployment = next(d for d in yaml.safe_load_all((REPO / "manifests" / "deployment.yaml").read_text()) if d)
    strategy = csv["spec"]["install"]["spec"]
    assert strategy["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["args"] == \
        deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {m["type"]: m["supported"] for m in csv["spec"]["installModes"]} == {
        "OwnNamespace": True, "SingleNamespace": False, "MultiNamespace": False, "AllNamespaces": False}
    annotations = csv["metadata"]["annotations"]
    assert annotations["operators.openshift.io/infrastructure-features"] == '["disconnected", "proxy-aware"]'
    assert annotations["features.operators.openshift.io/proxy-aware"] == "true"
    assert csv["spec"]["icon"][0]["mediatype"] == "image/svg+xml" and csv["spec"]["description"]
    rules = [r for p in strategy["clusterPermissions"] for r in p["rules"]]
    granted = {(g, res) for r in rules for g in r.get("apiGroups", []) for res in r.get("resources", [])}
    # The namespaced rules of the kustomize install are there (cluster-wide: OLM has no cross-namespace Roles).
    assert {("machine.openshift.io", "machinesets"), ("cluster.x-k8s.io", "machinedeployments"),
            ("", "secrets")} <= granted


async def test_the_api_server_accepts_the_csv_unchanged(kube_api: Any) -> None:
    crd = yaml.safe_load(CSV_CRD.read_text())
    await kube_request(kube_api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    try:
        path = "/apis/operators.coreos.com/v1alpha1/namespaces/openshift-machine-config-operator/clusterserviceversions"
        for _ in range(100):  # the CRD becomes served within a second or two
            try:
                await kube_request(kube_api, "GET", path)
                break
            except Exception:
                await asyncio.sleep(0.1)
        csv = yaml.safe_load(CSV_FILE.read_text())
        csv["metadata"]["namespace"] = "openshift-machine-config-operator"
        stored = await kube_request(kube_api, "POST", path, csv)
        assert stored["spec"] == csv["spec"], "a field OLM does not know was pruned"
        await kube_request(kube_api, "DELETE", f"{path}/{csv['metadata']['name']}")
    finally:
        await kube_request(kube_api, "DELETE",
                           "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterserviceversions.operators.coreos.com")
