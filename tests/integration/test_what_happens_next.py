"""What `plan` says will happen is what happens (issue 32), on the loopback kube-apiserver.

- The upgrade gate: with ClusterVersion Partial, `plan --from-cluster` says nothing is patched until
  the upgrade completes and `run --once` writes nothing; once it is Completed, `run --once` writes
  exactly the MachineSets `plan` said this controller patches now, and none of the MCO's.
- A writer conflict (an Argo CD MachineSet the MCO covers): one BootImageWriterConflict naming the
  MCO and the fix, the proposal saying the MCO writes it too, the metric; applying the fix's
  MachineConfiguration patch ends it.
- `hand-over` and `hand-back`: the claim and the annotation in one write each, and the skew warning
  (nothing written without --yes) where the MCO would then hold upgrades.
The same beside the real MCO controller: test_real_mco.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.mco import FIXTURE_BY_PLATFORM
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    feature_gate,
    get_object,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
    mco_cluster_operator,
)
from kubernetes_asyncio import client as k8s_client

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_MANAGER,
    CLAIM_HOLDER_NAME,
    LABEL_BOOT_IMAGE_WRITER,
    LABEL_OSSTREAM,
    MAPI_NAMESPACE,
    METRIC_WRITER_CONFLICTS,
)
from bootimage_controller.daemon import run as daemon

from .daemon_helpers import (
    list_machinesets,
    next_writes,
    plan_from_cluster,
    run_args,
    run_cli,
    user_data_secret,
)

pytestmark = pytest.mark.integration

AWS = FIXTURE_BY_PLATFORM["AWS"]
GATES_422 = ["ManagedBootImagesCPMS", "BootImageSkewEnforcement"]
ARGO_ID = "workers:machine.openshift.io/MachineSet:openshift-machine-api/argo"


async def arrange(api: k8s_client.ApiClient, history: tuple[tuple[str, str], ...]) -> None:
    """AWS, the 4.22 golden data, the MCO 4.22; a plain, a rhel-10, an Argo CD and a to-be-handed MachineSet."""
    await apply(api, infrastructure("AWS", region="us-east-1"))
    await apply(api, cluster_version(history))
    await apply(api, machine_configuration())
    await apply(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(api, user_data_secret())
    await apply(api, mco_cluster_operator("4.22.0"))
    await apply(api, feature_gate("4.22.0", GATES_422))
    await apply(api, machineset_from_fixture(AWS, "plain"))
    await apply(api, machineset_from_fixture(AWS, "rhel10", labels={LABEL_OSSTREAM: "rhel-10"}))
    await apply(api, machineset_from_fixture(AWS, "argo", annotations={ANNOTATION_ARGOCD_TRACKING_ID: ARGO_ID}))
    await apply(api, machineset_from_fixture(AWS, "handme"))


async def once(cluster: TestCluster) -> int:
    return await asyncio.wait_for(daemon.run_async(run_args(cluster.kubeconfig, "--once", "--no-leader-elect")), 120)


async def versions(api: k8s_client.ApiClient) -> dict[str, str]:
    return {n: o["metadata"]["resourceVersion"] for n, o in (await list_machinesets(api)).items()}


async def events(api: k8s_client.ApiClient, name: str, reason: str) -> list[dict[str, Any]]:
    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
    return [e for e in doc["items"] if e["involvedObject"]["name"] == name and e["reason"] == reason]


async def test_plan_says_what_run_once_writes_before_and_after_the_upgrade_completes(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    await arrange(kube_api, (("4.22.0", "Partial"), ("4.16.0", "Completed")))
    doc = await plan_from_cluster(kube_cluster)
    assert doc["gate"]["open"] is False and "Partial" in doc["gate"]["message"]
    said = next_writes(doc)
    assert said["rhel10"] == ("bootimage-controller", "after-upgrade")
    assert said["plain"] == ("mco", "after-upgrade") and said["handme"] == ("mco", "after-upgrade")
    code, table, _ = await run_cli(kube_cluster, "plan", "--from-cluster")
    assert code == 0
    assert "nothing is patched until the upgrade completes" in " ".join(table.split())
    before = await versions(kube_api)
    await once(kube_cluster)
    assert await versions(kube_api) == before, "the gate is closed: nothing written"

    await apply(kube_api, cluster_version((("4.22.0", "Completed"), ("4.16.0", "Completed"))))
    doc = await plan_from_cluster(kube_cluster)
    assert doc["gate"]["open"] is True
    ours_now = {n for n, w in next_writes(doc).items() if w == ("bootimage-controller", "now")}
    assert ours_now == {"rhel10"}
    await once(kube_cluster)
    after = await versions(kube_api)
    assert {n for n in before if before[n] != after[n]} == ours_now, "exactly what plan said, nothing of the MCO's"


async def test_a_writer_conflict_is_said_once_with_the_fix_and_the_fix_ends_it(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    await arrange(kube_api, (("4.22.0", "Completed"), ("4.16.0", "Completed")))
    doc = await plan_from_cluster(kube_cluster)
    argo = next(m for m in doc["machineSets"] if m["name"] == "argo")
    assert (argo["manager"], argo["alsoWrittenBy"], argo["nextWrite"]["writer"]) == ("gitops", ["mco"], "mco")
    code, table, _ = await run_cli(kube_cluster, "plan", "--from-cluster")
    assert code == 0
    assert "1 writer conflict" in " ".join(table.split())
    await once(kube_cluster)
    found = await events(kube_api, "argo", "BootImageWriterConflict")
    assert len(found) == 1 and found[0]["type"] == "Warning"
    message = found[0]["message"]
    assert "the Machine Config Operator and GitOps both write" in message
    assert "oc patch machineconfiguration cluster --type=merge" in message
    proposal = await events(kube_api, "argo", "BootImageUpdateProposed")
    assert proposal and "the Machine Config Operator writes this MachineSet too" in proposal[0]["message"]
    assert obs.REGISTRY.get_sample_value(METRIC_WRITER_CONFLICTS, {"namespace": MAPI_NAMESPACE, "name": "argo"}) == 1
    co = await kube_request(kube_api, "GET", "/apis/config.openshift.io/v1/clusteroperators/machine-config-bootimages")
    available = next(c for c in co["status"]["conditions"] if c["type"] == "Available")
    assert "1 MachineSet written by the Machine Config Operator and GitOps or Hive alike" in available["message"]
    assert "openshift-machine-api/argo" in available["message"]

    # The fix: the label in Git (here: on the object), then the MachineConfiguration patch the Event named.
    patch = next(json.loads(part.split("'")[0]) for part in message.split("--type=merge -p '")[1:]
                 if "managedBootImages" in part.split("'")[0])
    live = await get_object(kube_api, machineset_from_fixture(AWS, "argo"))
    assert live is not None
    live["metadata"].setdefault("labels", {})[LABEL_BOOT_IMAGE_WRITER] = "gitops"
    await apply(kube_api, live)
    await kube_request(kube_api, "PATCH", "/apis/operator.openshift.io/v1/machineconfigurations/cluster", patch,
                       content_type="application/merge-patch+json")
    doc = await plan_from_cluster(kube_cluster)
    rows = {m["name"]: m for m in doc["machineSets"]}
    assert rows["argo"]["alsoWrittenBy"] == [] and rows["argo"]["nextWrite"]["writer"] == "nobody"
    assert rows["plain"]["manager"] == "mco", "every other MachineSet stays the MCO's"
    await once(kube_cluster)
    assert obs.REGISTRY.get_sample_value(METRIC_WRITER_CONFLICTS, {"namespace": MAPI_NAMESPACE, "name": "argo"}) is None


async def test_hand_over_claims_and_annotates_in_one_write_and_warns_first_when_the_mco_would_hold(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    # Installed at 4.12: once the MCO skips the MachineSet, its skew record falls back below 4.13.
    await arrange(kube_api, (("4.22.0", "Completed"), ("4.12.0", "Completed")))
    before = await versions(kube_api)
    code, _, err = await run_cli(kube_cluster, "hand-over", "handme")
    assert code == 1 and "hold upgrades" in err and "nothing written" in err
    assert await versions(kube_api) == before
    code, out, err = await run_cli(kube_cluster, "hand-over", "handme", "--yes")
    assert code == 0, out + err
    # --yes still says it, with the Manual setting that avoids the hold (issue 49, item 5).
    assert "hold upgrades" in err and '"mode":"Manual"' in err and "as asked (--yes)" in err
    live = (await list_machinesets(kube_api))["handme"]
    refs = live["metadata"].get("ownerReferences") or []
    assert [r["name"] for r in refs] == [CLAIM_HOLDER_NAME]
    assert live["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_MANAGER] == "bootimage-controller"
    # One write: the resourceVersion moved once, and one managedFields entry carries both.
    entries = [f for f in live["metadata"]["managedFields"] if f["operation"] == "Update"]
    both = [f for f in entries if "f:ownerReferences" in json.dumps(f["fieldsV1"])
            and ANNOTATION_BOOT_IMAGE_MANAGER in json.dumps(f["fieldsV1"])]
    assert both, entries
    assert next_writes(await plan_from_cluster(kube_cluster))["handme"][0] == "bootimage-controller"
    code, out, _ = await run_cli(kube_cluster, "hand-over", "handme", "--yes")
    assert code == 0 and "already handed over" in out

    code, out, err = await run_cli(kube_cluster, "hand-back", "handme")
    assert code == 0, out + err
    live = (await list_machinesets(kube_api))["handme"]
    assert not live["metadata"].get("ownerReferences")
    assert ANNOTATION_BOOT_IMAGE_MANAGER not in (live["metadata"].get("annotations") or {})
    assert next_writes(await plan_from_cluster(kube_cluster))["handme"][0] == "mco"
    code, out, _ = await run_cli(kube_cluster, "hand-back", "missing")
    assert code == 1 and "not found" in out


async def test_hand_over_of_a_machineset_the_mco_would_not_hold_for_writes_without_asking(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    await arrange(kube_api, (("4.22.0", "Completed"), ("4.16.0", "Completed")))
    code, out, err = await run_cli(kube_cluster, "hand-over", "handme")
    assert code == 0, out + err
    assert "handed over to bootimage-controller" in out


async def test_a_machineset_a_policy_keeps_is_external_proposed_and_never_written(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    """An ACM configuration policy keeps `ami.id` (it owns the field in managedFields) and puts its
    image back: the daemon names it, proposes, and never writes the MachineSet (issue 34, item 1)."""
    from harness.objects import api_client_for

    await apply(kube_api, infrastructure("AWS", region="us-east-1"))
    await apply(kube_api, cluster_version())
    await apply(kube_api, machine_configuration())
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, user_data_secret())
    policed = machineset_from_fixture(AWS, "policed")
    kept = policed["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"]
    policed["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = "ami-0f00000000000000a"
    await apply(kube_api, policed)
    path = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets/policed"
    body = {"spec": {"template": {"spec": {"providerSpec": {"value": {"ami": {"id": kept}}}}}}}
    async with await api_client_for(kube_cluster.kubeconfig) as policy:
        policy.user_agent = "config-policy-controller/v0.14"

        async def enforce() -> None:
            await kube_request(policy, "PATCH", path, body, content_type="application/merge-patch+json")

        await enforce()
        doc = await plan_from_cluster(kube_cluster)
        row = next(m for m in doc["machineSets"] if m["name"] == "policed")
        assert (row["manager"], row["action"], row["nextWrite"]["writer"]) == ("external", "patch", "external")
        ours = [e for e in (await list_machinesets(kube_api))["policed"]["metadata"]["managedFields"]
                if e["manager"] == "bootimage-controller"]
        assert ours == []
        from .daemon_helpers import daemon_task

        async with daemon_task(kube_cluster.kubeconfig):
            for _ in range(15):  # the policy keeps reverting while the daemon runs
                await enforce()
                await asyncio.sleep(0.3)
            proposals = await events(kube_api, "policed", "BootImageUpdateProposed")
        live = (await list_machinesets(kube_api))["policed"]
        writers_ = {e["manager"] for e in live["metadata"]["managedFields"]}
        assert "bootimage-controller" not in writers_, json.dumps(live["metadata"]["managedFields"])
        assert live["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] == kept
        assert proposals and "config-policy-controller" in proposals[0]["message"]
