"""The Deployment, the DaemonSet and the uninstall Job: hardened, and running real commands.

Container args are parsed by the controller's own argument parser, so a renamed or removed flag
fails here rather than in a crash-looping pod.
"""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.commands.cli import build_parser
from bootimage_controller.constants import SYSROOT_PATH

from .manifests import Manifest, all_manifests, containers, default_set, one, pod_spec

CONTROL_PLANE_TAINTS = {"node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane"}


def _workloads() -> list[Manifest]:
    return [m for m in all_manifests() if m.kind in ("Deployment", "DaemonSet", "Job")]


def _deployment() -> dict[str, Any]:
    return dict(one(default_set(), "Deployment", "bootimage-controller").obj)


def _daemonset() -> dict[str, Any]:
    return dict(one(default_set(), "DaemonSet", "bootimage-aleph-reporter").obj)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env", [])}


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


@pytest.mark.parametrize("workload", _workloads(), ids=lambda m: m.id)
def test_every_container_is_locked_down(workload: Manifest) -> None:
    spec = pod_spec(workload.obj)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    for container in containers(workload.obj):
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] is True
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
        assert sc["seccompProfile"]["type"] == "RuntimeDefault"
        assert not sc.get("privileged")
        assert "runAsUser" not in sc, "leave the UID to OpenShift's SCC (and the image's USER)"
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), container["name"]
        assert "memory" in resources["limits"], container["name"]


@pytest.mark.parametrize("workload", _workloads(), ids=lambda m: m.id)
def test_pods_run_on_control_plane_nodes_only(workload: Manifest) -> None:
    spec = pod_spec(workload.obj)
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/master": ""}
    tolerated = {
        t["key"] for t in spec["tolerations"] if t.get("effect") == "NoSchedule" and t["operator"] == "Exists"
    }
    assert tolerated >= CONTROL_PLANE_TAINTS


def test_the_deployment_runs_two_leader_elected_replicas_spread_over_nodes() -> None:
    deployment = _deployment()
    spec = pod_spec(deployment)
    assert deployment["spec"]["replicas"] == 2
    assert spec["priorityClassName"] == "system-cluster-critical"
    spread = spec.get("topologySpreadConstraints") or []
    anti = ((spec.get("affinity") or {}).get("podAntiAffinity")) or {}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert (
        any(
            c["topologyKey"] == "kubernetes.io/hostname" and c["labelSelector"]["matchLabels"] == labels
            for c in spread
        )
        or anti
    )
    (container,) = containers(deployment)
    args = build_parser().parse_args(container["args"])
    assert args.command == "run"
    assert args.leader_elect is True and args.once is False and args.dry_run is False
    env = _env(container)
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    # The instance metadata services would lend the node's cloud identity: never use them.
    assert env["AWS_EC2_METADATA_DISABLED"]["value"] == "true"


def test_probes_and_ports_match_the_addresses_the_daemon_listens_on() -> None:
    (container,) = containers(_deployment())
    args = build_parser().parse_args(container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": _port(args.health_addr), "metrics": _port(args.metrics_addr)}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_the_aleph_reporter_reads_the_host_sysroot_read_only_and_reports_its_own_node() -> None:
    daemonset = _daemonset()
    spec = pod_spec(daemonset)
    (container,) = containers(daemonset)
    env = _env(container)
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["args"][:3] == ["aleph-report", "--node-name", "$(NODE_NAME)"]
    # The kubelet expands $(NODE_NAME); the parser then sees a node name.
    args = build_parser().parse_args([a.replace("$(NODE_NAME)", "master-0") for a in container["args"]])
    assert args.command == "aleph-report" and args.node_name == "master-0" and not args.once
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = container["volumeMounts"]
    assert mount["readOnly"] is True and mount["mountPath"] == args.aleph_path == SYSROOT_PATH
    assert volumes[mount["name"]]["hostPath"]["path"] == SYSROOT_PATH
    assert spec["serviceAccountName"] == "bootimage-aleph-reporter"
    # Only that volume: no service account secrets or other host paths beyond the token.
    assert list(volumes) == [mount["name"]]


def test_the_uninstall_job_runs_release_claims_as_the_controller() -> None:
    job = one(all_manifests(), "Job", "bootimage-release-claims").obj
    (container,) = containers(job)
    assert build_parser().parse_args(container["args"]).command == "release-claims"
    assert pod_spec(job)["serviceAccountName"] == "bootimage-controller"
    assert pod_spec(job)["restartPolicy"] == "Never"
