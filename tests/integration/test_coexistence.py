"""The daemon beside the MCO's own controller (issue 22), on the loopback kube-apiserver.

A stand-in for the MCO's boot image controller (mco_standin.py: the reference's rules) runs beside the
daemon through one golden-data change on an AWS cluster at 4.22 installed at 4.12. Each MachineSet is
written by one of them only (told apart by the API server's field managers), nothing hot-loops, and
the admin is told before the claim that makes the MCO hold upgrades. On 4.18, where the MCO's
controller does not cover AWS without the admin's entry, the daemon manages every MachineSet.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    feature_gate,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
    mco_cluster_operator,
)
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_MANAGER,
    ANNOTATION_HOT_LOOP,
    CLAIM_HOLDER_NAME,
    LABEL_OSSTREAM,
    MAPI_NAMESPACE,
)

from .daemon_helpers import daemon_task, list_machinesets, user_data_secret, wait_for
from .mco_standin import MANAGER as MCO_MANAGER
from .mco_standin import running_mco

pytestmark = pytest.mark.integration

FIXTURE = "aws-x86_64-us-east-1a-4.16.yaml"
OURS = "bootimage-controller"
NEXT_RHEL9, NEXT_RHEL10 = "ami-0f00000000000000a", "ami-0f00000000000000b"
INSTALLED_412 = (("4.22.0", "Completed"), ("4.12.0", "Completed"))


def golden(next_release: bool) -> dict[str, Any]:
    """The 4.22 ConfigMap; `next_release`: the same with new us-east-1 AMIs in both streams."""
    cm = bootimages_configmap("coreos-bootimages-4.22-multistream.yaml")
    if next_release:
        stream = json.loads(cm["data"]["stream"])
        streams = json.loads(cm["data"]["streams"])
        for doc, ami in ((stream, NEXT_RHEL9), (streams["rhel-9"], NEXT_RHEL9), (streams["rhel-10"], NEXT_RHEL10)):
            doc["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] = ami
        cm["data"]["stream"], cm["data"]["streams"] = json.dumps(stream), json.dumps(streams)
    return cm


def targets(cm: dict[str, Any]) -> dict[str, str]:
    streams = json.loads(cm["data"]["streams"])
    at = {s: streams[s]["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] for s in streams}
    return {"mco-pool": at["rhel-9"], "rhel10-pool": at["rhel-10"], "handed-pool": at["rhel-9"]}


async def arrange(api: k8s_client.ApiClient, mco_version: str, gates: list[str]) -> None:
    await apply(api, infrastructure("AWS", region="us-east-1"))
    await apply(api, cluster_version(INSTALLED_412))
    await apply(api, mco_cluster_operator(mco_version))
    await apply(api, feature_gate(mco_version, gates))
    await apply(api, machine_configuration())
    await apply(api, golden(False))
    await apply(api, user_data_secret())
    await apply(api, machineset_from_fixture(FIXTURE, "mco-pool"))
    await apply(api, machineset_from_fixture(FIXTURE, "rhel10-pool", labels={LABEL_OSSTREAM: "rhel-10"}))
    await apply(api, machineset_from_fixture(FIXTURE, "handed-pool",
                                             annotations={ANNOTATION_BOOT_IMAGE_MANAGER: "bootimage-controller"}))


def ami(ms: dict[str, Any]) -> str:
    return str(ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"])


async def at_targets(api: k8s_client.ApiClient, cm: dict[str, Any]) -> bool:
    fleet = await list_machinesets(api)
    return all(ami(fleet[name]) == want for name, want in targets(cm).items())


def writers(ms: dict[str, Any], creator: str) -> set[str]:
    """Field managers that wrote the MachineSet, but for the test that created it (`creator`)."""
    return {e["manager"] for e in ms["metadata"].get("managedFields", [])} - {creator}


def creator_of(api: k8s_client.ApiClient) -> str:
    return str(api.user_agent).split("/", 1)[0]


async def events(api: k8s_client.ApiClient, reason: str) -> list[dict[str, Any]]:
    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
    return [e for e in doc["items"] if e["reason"] == reason]


async def test_beside_the_mco_of_4_22_each_machineset_has_one_writer_and_the_admin_is_warned_first(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    await arrange(kube_api, "4.22.0", ["BootImageSkewEnforcement", "ManagedBootImagesCPMS"])
    async with daemon_task(kube_cluster.kubeconfig):
        # The admin handed `handed-pool` over while the daemon runs: it is claimed (after the warning)
        # before the MCO's next pass, which then skips it.
        async def handed_over() -> bool:
            return bool((await list_machinesets(kube_api))["handed-pool"]["metadata"].get("ownerReferences"))

        await wait_for(handed_over, 30, "the handed-over MachineSet to be claimed")
        claimed = (await list_machinesets(kube_api))["handed-pool"]
        claimed_rv = int(claimed["metadata"]["resourceVersion"])
        assert [r["name"] for r in claimed["metadata"]["ownerReferences"]] == [CLAIM_HOLDER_NAME]
        async with running_mco(kube_cluster.kubeconfig, "4.12.0") as mco:
            await _through_a_golden_change(kube_api, mco)
        fleet = await list_machinesets(kube_api)
        mc = await kube_request(kube_api, "GET", "/apis/operator.openshift.io/v1/machineconfigurations/cluster")
        co = await kube_request(kube_api, "GET", "/apis/config.openshift.io/v1/clusteroperators/machine-config-bootimages")
    _assert_one_writer_each(fleet, mco, creator_of(kube_api))
    await _assert_told_first(kube_api, mc, co, claimed_rv)


async def _through_a_golden_change(kube_api: k8s_client.ApiClient, mco: Any) -> None:
    first = golden(False)
    await wait_for(lambda: at_targets(kube_api, first), 30, "both controllers to settle on the 4.22 images")
    second = golden(True)
    await apply(kube_api, second)
    await wait_for(lambda: at_targets(kube_api, second), 30, "both controllers to settle on the next images")
    await asyncio.sleep(2)  # a reverting fight would show up as more writes now
    passes = mco.passes

    async def two_more_passes() -> bool:
        return mco.passes > passes + 1

    await wait_for(two_more_passes, 10, "two more MCO passes")


def _assert_one_writer_each(fleet: dict[str, Any], mco: Any, me: str) -> None:
    # One writer each: the MCO's rhel-9 pool is the MCO's, the rhel-10 and handed-over pools ours.
    assert writers(fleet["mco-pool"], me) == {MCO_MANAGER}
    assert writers(fleet["rhel10-pool"], me) == {OURS}
    assert writers(fleet["handed-pool"], me) == {OURS}
    assert mco.writes == {"mco-pool": 2}, mco.writes  # once per release, never a revert
    # No hot loop: each of ours was written once per release (the count is per target), no HotLoop.
    for name in ("rhel10-pool", "handed-pool"):
        assert json.loads(fleet[name]["metadata"]["annotations"][ANNOTATION_HOT_LOOP])["count"] == 1


async def _assert_told_first(kube_api: k8s_client.ApiClient, mc: Any, co: Any, claimed_rv: int) -> None:
    assert await events(kube_api, "HotLoop") == []
    # The admin was told before the claim: the Warning exists and was stored before the claiming write.
    warnings = await events(kube_api, "BootImageClaimWouldHoldUpgrades")
    assert len(warnings) == 1 and warnings[0]["involvedObject"]["name"] == "handed-pool"
    assert int(warnings[0]["metadata"]["resourceVersion"]) < claimed_rv
    text = warnings[0]["message"]
    assert "4.12.0" in text and '"mode":"Manual"' in text and "rhcosVersion" in text
    upgradeable = next(c for c in co["status"]["conditions"] if c["type"] == "Upgradeable")
    assert "Machine Config Operator: claiming MachineSet openshift-machine-api/handed-pool" in upgradeable["message"]
    # ... and what it predicted is what the MCO did: its record fell back to the install version.
    assert mc["status"]["bootImageSkewEnforcementStatus"] == {"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}}
    # The MachineConfiguration's status is the MCO's: conditions and skew record, we wrote neither.
    assert OURS not in {e["manager"] for e in mc["metadata"].get("managedFields", [])}


async def test_on_4_18_without_the_mcos_controller_the_daemon_manages_every_machineset(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    await arrange(kube_api, "4.18.0", ["ManagedBootImages", "ManagedBootImagesAWS"])
    async with daemon_task(kube_cluster.kubeconfig):
        for cm in (golden(False), golden(True)):
            await apply(kube_api, cm)
            await wait_for(lambda cm=cm: at_targets(kube_api, cm), 30, "the daemon to update every MachineSet")
    fleet = await list_machinesets(kube_api)
    for name in targets(golden(True)):
        assert writers(fleet[name], creator_of(kube_api)) == {OURS}, name
        assert [r["name"] for r in fleet[name]["metadata"]["ownerReferences"]] == [CLAIM_HOLDER_NAME]
    # The MCO of 4.18 has no skew enforcement: no warning before these claims.
    assert await events(kube_api, "BootImageClaimWouldHoldUpgrades") == []


async def test_an_argo_cd_machineset_is_written_by_the_mco_a_conflict_said_once_and_the_fix_ends_it(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    """The MCO reads no Argo CD mark (the real one, measured; the stand-in likewise): the daemon says
    so once, with the MachineConfiguration patch that leaves the MachineSet out, and once applied
    (the label in Git, the patch; the operator copies it to status) the MCO leaves it alone (issue 32)."""
    from bootimage_controller.constants import ANNOTATION_ARGOCD_TRACKING_ID, LABEL_BOOT_IMAGE_WRITER

    await arrange(kube_api, "4.22.0", ["BootImageSkewEnforcement", "ManagedBootImagesCPMS"])
    tracked = machineset_from_fixture(FIXTURE, "argo-pool", annotations={
        ANNOTATION_ARGOCD_TRACKING_ID: "workers:machine.openshift.io/MachineSet:openshift-machine-api/argo-pool"})
    await apply(kube_api, tracked)
    stale = ami(tracked)
    async with running_mco(kube_cluster.kubeconfig, "4.12.0") as mco:
        async def first_pass() -> bool:
            return mco.passes >= 1

        await wait_for(first_pass, 15, "the MCO's first pass (its status, as on a cluster)")
        async with daemon_task(kube_cluster.kubeconfig):
            async def conflict_said() -> bool:
                return any(e["involvedObject"]["name"] == "argo-pool" for e in await events(kube_api, "BootImageWriterConflict"))

            await wait_for(conflict_said, 30, "the writer conflict Event")
            await wait_for(lambda: at_targets(kube_api, golden(False)), 30, "the MCO and the daemon to settle")
            assert mco.writes["argo-pool"] >= 1, "the MCO writes the Argo CD MachineSet: no mark stops it"
            said = [e for e in await events(kube_api, "BootImageWriterConflict") if e["involvedObject"]["name"] == "argo-pool"]
            assert len(said) == 1 and said[0]["count"] == 1
            message = said[0]["message"]
            assert "the Machine Config Operator and GitOps both write" in message
            # The fix as an admin applies it: the label (in Git; here on the object, with the old image
            # Git holds), then the MachineConfiguration patch the Event names.
            # Skew enforcement moves to Manual first (OpenShift refuses Partial while it is Automatic),
            # as the Event says; the stand-in, playing the operator, copies it to status.
            assert "move skew enforcement to Manual first" in message
            await kube_request(kube_api, "PATCH", "/apis/operator.openshift.io/v1/machineconfigurations/cluster",
                               {"spec": {"bootImageSkewEnforcement": {"mode": "Manual", "manual": {
                                   "mode": "OCPVersion", "ocpVersion": "4.16.0"}}}},
                               content_type="application/merge-patch+json")

            async def manual() -> bool:
                mc = await kube_request(kube_api, "GET", "/apis/operator.openshift.io/v1/machineconfigurations/cluster")
                return bool(mc.get("status", {}).get("bootImageSkewEnforcementStatus", {}).get("mode") == "Manual")

            await wait_for(manual, 10, "the operator (stand-in) to report Manual")
            patch = next(json.loads(part.split("'")[0]) for part in message.split("--type=merge -p '")[1:]
                         if "managedBootImages" in part.split("'")[0])
            await kube_request(kube_api, "PATCH", "/apis/operator.openshift.io/v1/machineconfigurations/cluster", patch,
                               content_type="application/merge-patch+json")
            live = (await list_machinesets(kube_api))["argo-pool"]
            live["metadata"].setdefault("labels", {})[LABEL_BOOT_IMAGE_WRITER] = "gitops"
            live["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = stale
            await kube_request(kube_api, "PUT", f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets/argo-pool", live)
            writes, passes = mco.writes["argo-pool"], mco.passes

            async def three_passes() -> bool:
                return mco.passes >= passes + 3

            await wait_for(three_passes, 15, "three more MCO passes")
            assert mco.writes["argo-pool"] == writes, "out of the MCO's enrollment: no more writes"
            assert ami((await list_machinesets(kube_api))["argo-pool"]) == stale, "Git's image stays"
            assert mco.writes["mco-pool"] >= 1, "every other MachineSet stays the MCO's"
