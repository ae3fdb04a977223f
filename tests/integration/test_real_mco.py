"""Beside the **real** Machine Config Operator boot image controller (issues 32 and 34).

The unmodified controller of openshift/machine-config-operator 7ff337a (../shared/tools/mco, its own
process and user) and the daemon start at the same moment on a 4.22 AWS cluster installed at 4.12,
on openshift/api's real CRDs, EC2 served by moto. A plain, a rhel-10, an Argo CD-tracked and a
handed-over (by `hand-over`), a claimed, a Hive and an opted-out MachineSet, an arm64 one in another
region, one in a region the golden data lacks, one with an owner reference, a Windows one, one with
AMI filters, a customer's AMI, a Red Hat AMI outside the bundled index and one at target (16 kinds);
then a golden-data change that lands during an upgrade (both wait, `after-upgrade`, and write once it
completes). At each step
`plan --from-cluster` says who writes what next, and that is what happens:
- one writer per MachineSet (told apart by managedFields): the MCO the plain, the Argo CD and the Hive
  one (it reads neither mark), the daemon the rhel-10, the handed-over and the claimed one, which the
  MCO never writes;
- an opted-out one (`boot-image-updates: Disabled`) is the MCO's too, a conflict with the admin's pin;
- the Argo CD one is a writer conflict: exactly one BootImageWriterConflict naming the MCO and the
  fix; applying the fix (skew to Manual, the label, the MachineConfiguration patch; the operator's
  status as the operator copies it) stops the MCO writing it.
Skipped, with the reason printed, where ../shared is absent (the stand-in covers the fast tests).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.amis import CUSTOM_AMI, RED_HAT_OWNER, catalogue
from cloud.moto_server import point_boto3_at, running_moto
from harness.cluster import ClusterFactory, TestCluster
from harness.objects import (
    api_client_for,
    apply,
    cluster_version,
    feature_gate,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
    mco_cluster_operator,
)
from harness.real_mco import MCO_CRDS, operator_status, printed, require_real_mco, running_real_mco
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    BOOT_IMAGE_UPDATES_DISABLED,
    CLAIM_HOLDER_NAME,
    LABEL_BOOT_IMAGE_WRITER,
    LABEL_HIVE_MACHINE_POOL,
    LABEL_OSSTREAM,
    MAPI_NAMESPACE,
)

from .daemon_helpers import (
    daemon_task,
    list_machinesets,
    next_writes,
    plan_from_cluster,
    run_cli,
    user_data_secret,
    wait_for,
)
from .test_coexistence import FIXTURE, INSTALLED_412, NEXT_RHEL9, NEXT_RHEL10, ami, creator_of, golden
from .test_daemon_cloud import credentials_secret

pytestmark = pytest.mark.integration

OURS = "bootimage-controller"
MCO_RESYNC = 5  # seconds: the MCO's resync here (its default is 20 minutes), what "it did not write" waits out
MC_PATH = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"
MS_PATH = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"
ARGO_ID = "workers:machine.openshift.io/MachineSet:openshift-machine-api/argo-pool"
ARM_FIXTURE = "aws-aarch64-us-east-2a-4.16.yaml"
REGION_FIXTURE = "aws-x86_64-me-south-1a-4.21.yaml"  # me-south-1: not in the 4.22 data
FILTERS_FIXTURE = "aws-x86_64-ami-filters.yaml"
WINDOWS = {"spec": {"template": {"metadata": {"labels": {"machine.openshift.io/os-id": "Windows"}}}}}
POOL_OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pool-owner", "namespace": MAPI_NAMESPACE}}


def catalogue_with_next_release() -> list[dict[str, Any]]:
    """Every stream AMI and the next release's (Red Hat's, in EC2 only), as moto serves them."""
    amis = catalogue()
    template = next(a for a in amis if a["owner_id"] == RED_HAT_OWNER and a["architecture"] == "x86_64")
    for ami_id, release in ((NEXT_RHEL9, "9.8.20260601-0"), (NEXT_RHEL10, "10.2.20260601-0")):
        amis.append({**template, "ami_id": ami_id, "name": f"rhcos-{release}-x86_64", "description": f"OpenShift 4 {release}"})
    return amis


@pytest.fixture
def moto_with_next_amis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's EC2 with every stream AMI and the next release's, for the MCO and the daemon."""
    with running_moto(catalogue_with_next_release(), tmp_path) as url:
        point_boto3_at(url, tmp_path, monkeypatch)
        yield url


async def planned(cluster: TestCluster, *extra: str) -> dict[str, tuple[str, str]]:
    return next_writes(await plan_from_cluster(cluster, *extra))


async def play_operator(api: k8s_client.ApiClient, node_disruption: Any) -> None:
    """What the MCO operator does on a spec change: copy it to status (the controller reads status)."""
    mc = await kube_request(api, "GET", MC_PATH)
    status = operator_status(mc, node_disruption, "4.12.0")
    await kube_request(api, "PATCH", f"{MC_PATH}/status", {"status": status},
                       content_type="application/merge-patch+json")


def writers(ms: dict[str, Any]) -> set[str]:
    """Who wrote the boot image field: the managers of managedFields that own `f:ami`."""
    return {e["manager"] for e in ms["metadata"].get("managedFields", []) if '"f:ami"' in json.dumps(e.get("fieldsV1"))}


async def arrange_cluster(api: k8s_client.ApiClient, binary: Path) -> Any:
    """A 4.22 AWS cluster installed at 4.12, as the MCO and the daemon read it, without MachineSets;
    the MachineConfiguration status as the operator writes it. Returns that status's node disruption
    part (the operator's default), to write it again after a spec change."""
    await apply(api, infrastructure("AWS", region="us-east-1"))
    await apply(api, cluster_version(INSTALLED_412))
    await apply(api, mco_cluster_operator("4.22.0"))
    status = printed(binary, "--print-featuregate-status", "4.22.0")
    gate = feature_gate("4.22.0")
    gate["status"] = status
    await apply(api, gate)
    await apply(api, machine_configuration())
    await apply(api, golden(False))
    await apply(api, user_data_secret())
    await apply(api, credentials_secret("AKIDEXAMPLEKEY123456", "not-a-real-secret-value-0123456789"))
    node_disruption = printed(binary, "--print-node-disruption-status")
    await play_operator(api, node_disruption)
    return node_disruption


async def arrange(api: k8s_client.ApiClient, binary: Path) -> Any:
    node_disruption = await arrange_cluster(api, binary)
    await apply(api, machineset_from_fixture(FIXTURE, "mco-pool"))
    await apply(api, machineset_from_fixture(FIXTURE, "rhel10-pool", labels={LABEL_OSSTREAM: "rhel-10"}))
    await apply(api, machineset_from_fixture(FIXTURE, "argo-pool", annotations={ANNOTATION_ARGOCD_TRACKING_ID: ARGO_ID}))
    await apply(api, machineset_from_fixture(FIXTURE, "handed-pool"))
    await apply(api, machineset_from_fixture(FIXTURE, "hive-pool", labels={LABEL_HIVE_MACHINE_POOL: "worker"}))
    # A Red Hat AMI the bundled index does not know (the next release's, in EC2 only): offline, who
    # writes it is EC2's to say (issue 49); the MCO asks EC2 and moves it back to the golden image.
    unknown = machineset_from_fixture(FIXTURE, "rh-unknown-pool")
    unknown["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = NEXT_RHEL9
    await apply(api, unknown)
    # Opted out of this controller: the MCO reads no such annotation (issue 49).
    await apply(api, machineset_from_fixture(FIXTURE, "pinned-pool", annotations={
        ANNOTATION_BOOT_IMAGE_UPDATES: BOOT_IMAGE_UPDATES_DISABLED}))
    # The other kinds a real AWS cluster holds (issue 49): arm64 in another region, a region the
    # golden data lacks, an owner reference, Windows, AMI filters, a customer's AMI, one at target.
    await apply(api, machineset_from_fixture(ARM_FIXTURE, "arm-pool"))
    await apply(api, machineset_from_fixture(REGION_FIXTURE, "region-pool"))
    owner = await apply(api, POOL_OWNER)
    await apply(api, machineset_from_fixture(FIXTURE, "owned-pool", owner_references=[{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "pool-owner", "uid": owner["metadata"]["uid"]}]))
    await apply(api, machineset_from_fixture(FIXTURE, "windows-pool", merge=WINDOWS))
    await apply(api, machineset_from_fixture(FILTERS_FIXTURE, "filters-pool"))
    custom = machineset_from_fixture(FIXTURE, "custom-pool")
    custom["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = CUSTOM_AMI
    await apply(api, custom)
    at_target = machineset_from_fixture(FIXTURE, "at-target-pool")
    at_target["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = targets(golden(False))["mco-pool"]
    await apply(api, at_target)
    return node_disruption


def providerspec_ami(ms: dict[str, Any]) -> Any:
    """The boot image field as it is (an id or filters)."""
    return ms["spec"]["template"]["spec"]["providerSpec"]["value"].get("ami")


async def at(api: k8s_client.ApiClient, want: dict[str, str]) -> bool:
    fleet = await list_machinesets(api)
    return all(ami(fleet[name]) == image for name, image in want.items())


def targets(cm: dict[str, Any]) -> dict[str, str]:
    streams = json.loads(cm["data"]["streams"])
    at_ = {s: streams[s]["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] for s in streams}
    return {"mco-pool": at_["rhel-9"], "argo-pool": at_["rhel-9"], "rhel10-pool": at_["rhel-10"],
            "handed-pool": at_["rhel-9"], "claimed-pool": at_["rhel-9"], "hive-pool": at_["rhel-9"],
            "pinned-pool": at_["rhel-9"], "rh-unknown-pool": at_["rhel-9"], "at-target-pool": at_["rhel-9"]}


def arm_target(cm: dict[str, Any]) -> str:
    streams = json.loads(cm["data"]["streams"])
    return str(streams["rhel-9"]["architectures"]["aarch64"]["images"]["aws"]["regions"]["us-east-2"]["image"])


async def conflicts(api: k8s_client.ApiClient, name: str = "argo-pool") -> list[dict[str, Any]]:
    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
    return [e for e in doc["items"] if e["reason"] == "BootImageWriterConflict" and e["involvedObject"]["name"] == name]


NOBODY = ("nobody", "never")
# Left alone by both, whatever the golden data: another region's pool the data lacks, an owner
# reference, Windows, AMI filters (the MCO: "current AMI.ID is undefined").
LEFT_ALONE = {"region-pool": NOBODY, "owned-pool": NOBODY, "windows-pool": NOBODY, "filters-pool": NOBODY}
# A customer's AMI, offline: not in the bundled index, so whether the MCO writes it is EC2's to say.
OFFLINE_CUSTOM = {"custom-pool": ("mco", "unknown")}
# The first golden data (offline plan); the arm64 pool's region and architecture are in it, the
# at-target pool boots it already.
EXPECTED_FIRST = {"mco-pool": ("mco", "now"), "argo-pool": ("mco", "now"), "hive-pool": ("mco", "now"),
                  "pinned-pool": ("mco", "now"), "rh-unknown-pool": ("mco", "unknown"), "arm-pool": ("mco", "now"),
                  "rhel10-pool": (OURS, "now"), "handed-pool": (OURS, "now"), "claimed-pool": (OURS, "now"),
                  "at-target-pool": NOBODY, **LEFT_ALONE, **OFFLINE_CUSTOM}
# The next golden data (new us-east-1 x86_64 AMIs only): the arm64 pool stays, the at-target pool moves.
EXPECTED_NEXT = {"mco-pool": ("mco", "now"), "argo-pool": ("mco", "now"), "hive-pool": ("mco", "now"),
                 "pinned-pool": ("mco", "now"), "rh-unknown-pool": ("mco", "now"), "at-target-pool": ("mco", "now"),
                 "rhel10-pool": (OURS, "now"), "handed-pool": (OURS, "now"), "claimed-pool": (OURS, "now"),
                 "arm-pool": NOBODY, **LEFT_ALONE, **OFFLINE_CUSTOM}


async def test_beside_the_real_mco_plan_says_who_writes_what_and_that_is_what_happens(
    fresh_cluster: ClusterFactory, moto_with_next_amis: str, tmp_path: Path
) -> None:
    binary = require_real_mco()
    cluster = fresh_cluster(crd_dirs=(MCO_CRDS,))
    async with await api_client_for(cluster.kubeconfig) as api:
        node_disruption = await arrange(api, binary)
        code, out, err = await run_cli(cluster, "hand-over", "handed-pool", "--yes")
        assert code == 0, out + err
        holder = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}")
        await apply(api, machineset_from_fixture(FIXTURE, "claimed-pool", owner_references=[{
            "apiVersion": "v1", "kind": "ConfigMap", "name": CLAIM_HOLDER_NAME, "uid": holder["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": False}]))
        said = await planned(cluster)
        assert said == EXPECTED_FIRST, said
        verified = await planned(cluster, "--cloud-verify")
        assert (verified["rh-unknown-pool"], verified["custom-pool"]) == (("mco", "now"), NOBODY), verified
        left = (*LEFT_ALONE, "custom-pool", "at-target-pool")  # nobody writes them under the first data
        untouched = {name: providerspec_ami(ms) for name, ms in (await list_machinesets(api)).items() if name in left}
        assert len(untouched) == len(left), untouched

        mco_log = tmp_path / "mco.log"
        with running_real_mco(binary, cluster, moto_with_next_amis, mco_log, resync=f"{MCO_RESYNC}s"):
            async with daemon_task(cluster.kubeconfig):
                first = {**targets(golden(False)), "arm-pool": arm_target(golden(False))}
                await wait_for(lambda: at(api, first), 60, "every MachineSet at the 4.22 images")
                await wait_for(lambda: _some(conflicts(api)), 30, "the writer conflict Event")
                fleet = await list_machinesets(api)
                creator = creator_of(api)  # the test's own writes (it created the objects)
                mco = writers(fleet["mco-pool"]) - {creator}
                assert len(mco) == 1 and OURS not in mco, fleet["mco-pool"]["metadata"]["managedFields"]
                assert writers(fleet["argo-pool"]) - {creator} == mco, "the MCO writes the Argo CD MachineSet"
                assert writers(fleet["hive-pool"]) - {creator} == mco, "the MCO writes the Hive MachineSet"
                assert writers(fleet["pinned-pool"]) - {creator} == mco, "the MCO writes the opted-out MachineSet"
                assert writers(fleet["rh-unknown-pool"]) - {creator} == mco, "the MCO writes the AMI EC2 says is Red Hat's"
                # Said as a conflict with the admin's pin (Events go out in batches: wait for it).
                await wait_for(lambda: _some(conflicts(api, "pinned-pool")), 30, "the opted-out pool's conflict Event")
                assert len(await conflicts(api, "pinned-pool")) == 1
                for ours in ("rhel10-pool", "handed-pool", "claimed-pool"):
                    assert writers(fleet[ours]) - {creator} == {OURS}, f"{ours}: never the MCO's"
                assert writers(fleet["arm-pool"]) - {creator} == mco, "the MCO writes the arm64 pool in us-east-2"
                await asyncio.sleep(MCO_RESYNC + 3)  # a resync more: it would have written the rest
                fleet = await list_machinesets(api)
                assert {name: providerspec_ami(fleet[name]) for name in untouched} == untouched, "nobody writes these"
                assert all(writers(fleet[name]) - {creator} == set() for name in untouched)
                assert len(await conflicts(api, "hive-pool")) == 1
                said = await conflicts(api)
                assert len(said) == 1
                message = said[0]["message"]
                assert "the Machine Config Operator and GitOps both write" in message

                # A golden-data change, planned before it lands (`--bootimages`, the next release's
                # ConfigMap): the same writers. It lands while an upgrade is in progress: both
                # controllers wait (`after-upgrade`), nothing is written for longer than a resync;
                # once the upgrade completes they write.
                settled = await planned(cluster)
                assert settled == {name: OFFLINE_CUSTOM.get(name, NOBODY) for name in settled}, settled
                next_cm = tmp_path / "next-coreos-bootimages.json"
                next_cm.write_text(json.dumps(golden(True)))
                assert await planned(cluster, "--bootimages", str(next_cm)) == EXPECTED_NEXT
                await apply(api, cluster_version((("4.23.0", "Partial"), *INSTALLED_412)))
                # Both read the ClusterVersion from their caches: let its watch event reach them first.
                await asyncio.sleep(2)
                await apply(api, golden(True))
                during = await planned(cluster)
                assert during == {name: (writer, "after-upgrade") if when == "now" else (writer, when)
                                  for name, (writer, when) in EXPECTED_NEXT.items()}, during
                still = {name: providerspec_ami(ms) for name, ms in (await list_machinesets(api)).items()}
                await asyncio.sleep(MCO_RESYNC + 3)
                assert {name: providerspec_ami(ms) for name, ms in (await list_machinesets(api)).items()} == still, (
                    "both controllers wait for the upgrade", mco_log.read_text()[-3000:])
                await apply(api, cluster_version((("4.23.0", "Completed"), *INSTALLED_412)))
                second = targets(golden(True))
                await wait_for(lambda: at(api, second), 90, "every MachineSet at the next images")
                fleet = await list_machinesets(api)
                for ours in ("rhel10-pool", "handed-pool", "claimed-pool"):
                    assert writers(fleet[ours]) - {creator} == {OURS}, f"{ours}: never the MCO's"
                assert writers(fleet["at-target-pool"]) - {creator} == mco, "the pool at target moves with the MCO"
                assert ami(fleet["arm-pool"]) == first["arm-pool"], "its region's image did not change"

                async def two_conflicts() -> bool:
                    return len(await conflicts(api)) >= 2

                # Once per target: the new target is a new conflict (and its own Event).
                await wait_for(two_conflicts, 30, "the conflict Event of the new target")

                # The fix the message names: skew to Manual, the label (Git's), the selector patch.
                assert "move skew enforcement to Manual first" in message
                await kube_request(api, "PATCH", MC_PATH, {"spec": {"bootImageSkewEnforcement": {
                    "mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.16.0"}}}},
                    content_type="application/merge-patch+json")
                await play_operator(api, node_disruption)
                patch = next(json.loads(part.split("'")[0]) for part in message.split("--type=merge -p '")[1:]
                             if "managedBootImages" in part.split("'")[0])
                await kube_request(api, "PATCH", MC_PATH, patch, content_type="application/merge-patch+json")
                await play_operator(api, node_disruption)
                live = fleet["argo-pool"]
                live["metadata"].setdefault("labels", {})[LABEL_BOOT_IMAGE_WRITER] = "gitops"
                stale = ami(machineset_from_fixture(FIXTURE, "argo-pool"))
                live["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = stale
                await kube_request(api, "PUT", f"{MS_PATH}/argo-pool", live)
                said = await planned(cluster)
                assert said["argo-pool"] == ("nobody", "never") and said["mco-pool"][0] == "nobody"
                await asyncio.sleep(MCO_RESYNC + 3)  # longer than the MCO's resync: it would have written
                assert ami((await list_machinesets(api))["argo-pool"]) == stale, mco_log.read_text()[-3000:]
                assert len(await conflicts(api)) == 2, "no more conflict Events: one per target"


async def _some(found: Any) -> bool:
    return bool(await found)
