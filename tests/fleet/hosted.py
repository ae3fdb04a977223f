"""A HyperShift management cluster for the fleet tests: 3 HostedClusters and 5 NodePools, and what
`fleet` must say of each NodePool (stream metadata of 4.22 and 4.19, tests/fixtures/stream-metadata
via the bundled index)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CRDS = Path(__file__).resolve().parent.parent / "fixtures" / "crds" / "hypershift.openshift.io.yaml"
HS = "hypershift.openshift.io/v1beta1"
NAMESPACE = "clusters"


def crds() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(CRDS.read_text()) if d]


def hosted_cluster(name: str, region: str, version: str) -> dict[str, Any]:
    image = f"quay.io/openshift-release-dev/ocp-release:{version}-multi"
    return {
        "apiVersion": HS, "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"release": {"image": image}, "platform": {"type": "AWS", "aws": {"region": region}},
                 "clusterID": f"00000000-0000-4000-8000-00000000000{len(name)}"},
        "status": {"version": {"desired": {"version": version, "image": image},
                               "history": [{"version": version, "state": "Completed"},
                                           {"version": "4.16.3", "state": "Completed"}]}},
    }


def node_pool(name: str, cluster: str, version: str, arch: str = "amd64", stream: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterName": cluster,
        "release": {"image": f"quay.io/openshift-release-dev/ocp-release:{version}-multi"},
        "platform": {"type": "AWS", "aws": {"instanceType": "m6i.xlarge"}},
        "management": {"upgradeType": "Replace"},
        "arch": arch,
        "replicas": 2,
    }
    if stream is not None:
        spec["osImageStream"] = {"name": stream}
    return {"apiVersion": HS, "kind": "NodePool", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec, "status": {"version": version, "replicas": 2}}


HOSTED = [
    hosted_cluster("east", "us-east-1", "4.22.0"),
    hosted_cluster("gulf", "me-south-1", "4.22.0"),  # 4.22 ships no AMI in me-south-1
    hosted_cluster("legacy", "us-east-2", "4.19.4"),  # 4.19 has no rhel-10 stream
]
POOLS = [
    node_pool("east-x86", "east", "4.22.0"),
    node_pool("east-arm-rhel10", "east", "4.22.0", arch="arm64", stream="rhel-10"),
    node_pool("gulf-x86", "gulf", "4.22.0"),
    node_pool("legacy-x86", "legacy", "4.19.4"),
    node_pool("legacy-rhel10", "legacy", "4.19.4", stream="rhel-10"),
]
# NodePool -> (stream, architecture, validPlatformImage, missingPlatformImage)
EXPECTED: dict[str, tuple[str, str, bool, str | None]] = {
    "east-x86": ("rhel-9", "x86_64", True, None),
    "east-arm-rhel10": ("rhel-10", "aarch64", True, None),
    "gulf-x86": ("rhel-9", "x86_64", False, "aws/me-south-1/x86_64 in stream rhel-9 of OpenShift 4.22"),
    "legacy-x86": ("rhel-9", "x86_64", True, None),
    "legacy-rhel10": ("rhel-10", "x86_64", False, "stream rhel-10 in OpenShift 4.19"),
}
