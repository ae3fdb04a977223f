"""What `plan` forecasts is what happens, on GCP and Azure, beside the **real** MCO (issue 49).

AWS has its own, longer run in test_real_mco.py (EC2 served by moto). Here, per platform, a table of
the MachineSet kinds a real cluster holds; `plan --from-cluster` says, per MachineSet, who writes its
boot image next and to what; then the unmodified MCO controller (../shared/tools/mco, its own user)
and the daemon run together, and the test checks, per MachineSet, that `nextWrite.writer` is who wrote
the boot image (managedFields) and `target` the image it ended at; `nobody` means nobody wrote it for
longer than one MCO resync. Neither platform's rules ask the cloud, so the offline plan must be
right. Skipped, with the reason printed, where ../shared is absent.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory
from harness.objects import (
    api_client_for,
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
from harness.real_mco import MCO_CRDS, operator_status, printed, require_real_mco, running_real_mco
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    BOOT_IMAGE_UPDATES_DISABLED,
    LABEL_OSSTREAM,
    MAPI_NAMESPACE,
)
from bootimage_controller.core.model import get_path, parse_dotted

from .daemon_helpers import (
    daemon_task,
    list_machinesets,
    plan_from_cluster,
    run_cli,
    user_data_secret,
    wait_for,
)
from .test_coexistence import INSTALLED_412, creator_of

pytestmark = pytest.mark.integration

OURS = "bootimage-controller"
RESYNC = 5  # seconds: the MCO's resync here (its default is 20 minutes), what "nobody wrote it" waits out
MC_PATH = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"
WINDOWS = {"spec": {"template": {"metadata": {"labels": {"machine.openshift.io/os-id": "Windows"}}}}}
OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pool-owner", "namespace": MAPI_NAMESPACE}}
GCP = "gcp-x86_64-us-central1-a-4.16.yaml"
AZURE_NOPLAN = "azure-x86_64-marketplace-noplan-4.20.yaml"
AZURE_LEGACY = "azure-x86_64-legacy-gallery-gen2-4.16.yaml"
CUSTOMER_GALLERY = ("/subscriptions/0000/resourceGroups/team-images/providers/Microsoft.Compute/galleries/"
                    "team_gallery/images/hardened-rhcos-gen2/versions/1.0.0")


def _kinds(platform: str, owner_uid: str = "") -> dict[str, tuple[dict[str, Any], tuple[str, str]]]:
    """MachineSet name -> (the object, (writer, when) the forecast must say). `owner_uid`: a real
    object's, so that the garbage collector keeps the MachineSet another controller owns."""
    plain = GCP if platform == "GCP" else AZURE_LEGACY
    mco, ours, nobody = ("mco", "now"), (OURS, "now"), ("nobody", "never")

    def ms(name: str, fixture: str = plain, **extra: Any) -> dict[str, Any]:
        return machineset_from_fixture(fixture, name, **extra)

    kinds = {
        "plain": (ms("plain"), mco),
        "opted-out": (ms("opted-out", annotations={ANNOTATION_BOOT_IMAGE_UPDATES: BOOT_IMAGE_UPDATES_DISABLED}), mco),
        "argo": (ms("argo", annotations={ANNOTATION_ARGOCD_TRACKING_ID: "w:machine.openshift.io/MachineSet:x/argo"}), mco),
        "hive": (ms("hive", labels={"hive.openshift.io/machine-pool": "worker"}), mco),
        "owned": (ms("owned", owner_references=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "pool-owner",
                                                  "uid": owner_uid}]), nobody),
        "windows": (ms("windows", merge=WINDOWS), nobody),
        "handed": (ms("handed"), ours),  # handed over with `hand-over` before anything runs
    }
    if platform == "GCP":
        kinds |= {
            "rhel10": (ms("rhel10", labels={LABEL_OSSTREAM: "rhel-10"}), ours),
            "custom": (ms("custom", "gcp-x86_64-custom-image.yaml"), nobody),
            "project-image": (ms("project-image", provider_spec={"disks": [{
                "autoDelete": True, "boot": True, "sizeGb": 128, "type": "pd-ssd",
                "image": "projects/my-project/global/images/my-rhcos"}]}), nobody),
        }
    else:
        kinds |= {
            "at-target": (ms("at-target", AZURE_NOPLAN), nobody),  # the no-plan marketplace image, current
            # The MCO takes any resourceID for a legacy upload: a customer's gallery image is replaced too.
            "customer-gallery": (ms("customer-gallery", provider_spec={"image": {"resourceID": CUSTOMER_GALLERY}}), mco),
            "confidential": (ms("confidential", provider_spec={"securityProfile": {"settings": {
                "securityType": "ConfidentialVM"}}}), nobody),
            "custom-publisher": (ms("custom-publisher", provider_spec={"image": {
                "publisher": "contoso", "offer": "hardened", "sku": "rhcos", "version": "1.0.0", "resourceID": None}}),
                nobody),
            # No Azure marketplace data in the rhel-10 stream: nobody can write it.
            "rhel10": (ms("rhel10", labels={LABEL_OSSTREAM: "rhel-10"}), nobody),
        }
    return kinds


def _same_image(live: Any, target: Any) -> bool:
    """Equal as the typed structs read them: an empty string and a missing key are the same."""
    if isinstance(live, dict) and isinstance(target, dict):
        keys = set(live) | set(target)
        return all((live.get(k) or "") == (target.get(k) or "") for k in keys)
    return bool(live == target)


async def _arrange(api: k8s_client.ApiClient, binary: Path, platform: str) -> None:
    await apply(api, infrastructure(platform))
    await apply(api, cluster_version(INSTALLED_412))
    await apply(api, mco_cluster_operator("4.22.0"))
    gate = feature_gate("4.22.0")
    gate["status"] = printed(binary, "--print-featuregate-status", "4.22.0")
    await apply(api, gate)
    await apply(api, machine_configuration())
    await apply(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(api, user_data_secret())
    owner = await apply(api, OWNER)
    for obj, _ in _kinds(platform, owner["metadata"]["uid"]).values():
        await apply(api, obj)
    mc = await kube_request(api, "GET", MC_PATH)
    status = operator_status(mc, printed(binary, "--print-node-disruption-status"), "4.12.0")
    await kube_request(api, "PATCH", f"{MC_PATH}/status", {"status": status},
                       content_type="application/merge-patch+json")


@pytest.mark.parametrize("platform", ["GCP", "Azure"])
async def test_the_forecast_is_what_the_real_mco_and_the_daemon_do(
    platform: str, fresh_cluster: ClusterFactory, tmp_path: Path
) -> None:
    binary = require_real_mco()
    cluster = fresh_cluster(crd_dirs=(MCO_CRDS,))
    kinds = _kinds(platform)
    async with await api_client_for(cluster.kubeconfig) as api:
        await _arrange(api, binary, platform)
        code, out, err = await run_cli(cluster, "hand-over", "handed", "--yes")
        assert code == 0, out + err
        rows = {m["name"]: m for m in (await plan_from_cluster(cluster))["machineSets"]}
        said = {name: (rows[name]["nextWrite"]["writer"], rows[name]["nextWrite"]["when"]) for name in kinds}
        assert said == {name: expected for name, (_, expected) in kinds.items()}, said
        if platform == "Azure":
            # It is replaced as a legacy upload: plan says so with the image it replaces.
            assert CUSTOMER_GALLERY in json.dumps(rows["customer-gallery"]["current"])
            assert "is not the installer's upload" in rows["customer-gallery"]["message"]
            assert "warning" not in rows["plain"]["message"], "the installer's own upload is no surprise"
        creator = creator_of(api)
        mco_log = tmp_path / "mco.log"
        before = await list_machinesets(api)
        with running_real_mco(binary, cluster, "http://127.0.0.1:9", mco_log, resync=f"{RESYNC}s"):
            async with daemon_task(cluster.kubeconfig):
                written = await _happens_as_said(api, rows, said, creator, platform, since=before)
                mco_name = written["mco"]
                assert len(mco_name) == 1 and OURS not in mco_name, (mco_name, mco_log.read_text()[-2000:])

                # A golden change, planned with --bootimages before it lands, while an upgrade is in
                # progress: both controllers wait (`after-upgrade`); once it completes they write.
                upcoming = next_golden(platform)
                planned_file = tmp_path / "next-coreos-bootimages.json"
                planned_file.write_text(json.dumps(upcoming))
                ahead = {m["name"]: m for m in (await plan_from_cluster(cluster, "--bootimages", str(planned_file)))[
                    "machineSets"]}
                await apply(api, cluster_version((("4.23.0", "Partial"), *INSTALLED_412)))
                # Both controllers read the ClusterVersion from their caches: let the watch event
                # reach them before the golden data does (else the MCO may act on it first; it did once).
                await asyncio.sleep(2)
                await apply(api, upcoming)
                during_rows = {m["name"]: m for m in (await plan_from_cluster(cluster))["machineSets"]}
                during = {name: row["nextWrite"] for name, row in during_rows.items()}
                held = {name: (ahead[name]["nextWrite"]["writer"], "after-upgrade") if ahead[name]["nextWrite"][
                    "writer"] != "nobody" else ("nobody", "never") for name in kinds}
                assert {name: (during[name]["writer"], during[name]["when"]) for name in kinds} == held, {
                    name: (during_rows[name]["reason"], during_rows[name]["message"]) for name in kinds}
                still = await list_machinesets(api)
                await asyncio.sleep(RESYNC + 3)
                assert _boot_images(await list_machinesets(api)) == _boot_images(still), "both waited for the upgrade"
                await apply(api, cluster_version((("4.23.0", "Completed"), *INSTALLED_412)))
                ahead_said = {name: (ahead[name]["nextWrite"]["writer"], ahead[name]["nextWrite"]["when"])
                              for name in kinds}
                await _happens_as_said(api, ahead, ahead_said, creator, platform, since=still)
    assert {MAPI_NAMESPACE} == {r["namespace"] for r in rows.values() if r["name"] in kinds}


def _boot_images(fleet: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: get_path(ms, ("spec", "template", "spec", "providerSpec")) for name, ms in fleet.items()}


async def _happens_as_said(api: k8s_client.ApiClient, rows: dict[str, dict[str, Any]],
                           said: dict[str, tuple[str, str]], creator: str, platform: str,
                           since: dict[str, dict[str, Any]] | None = None) -> dict[str, set[str]]:
    """Wait until every MachineSet a writer was named for is at its planned target, and one MCO
    resync more; then check, per MachineSet, who wrote it (the newest providerSpec write in
    managedFields) and that the `nobody` ones did not change. Returns the writers seen, by name."""
    before = since if since is not None else await list_machinesets(api)

    async def at_targets() -> bool:
        fleet = await list_machinesets(api)
        return all(_same_image(get_path(fleet[n], parse_dotted(rows[n]["field"])), rows[n]["target"])
                   for n, (writer, _) in said.items() if writer != "nobody")

    await wait_for(at_targets, 60, f"every {platform} MachineSet a writer was named for at its target")
    await asyncio.sleep(RESYNC + 3)  # past a resync of the MCO's: it would have written the rest
    fleet = await list_machinesets(api)
    seen: dict[str, set[str]] = {"mco": set(), OURS: {OURS}, "nobody": set()}
    for name, (writer, _when) in said.items():
        if writer == "nobody":
            assert _boot_images({name: fleet[name]}) == _boot_images({name: before[name]}), f"{name}: nobody was to write it"
            continue
        last = newest_boot_image_writer(fleet[name], creator)
        if writer == "mco":
            seen["mco"].add(str(last))
            assert last != OURS, f"{platform} {name}: planned mco, written by this controller"
        else:
            assert last == OURS, f"{platform} {name}: planned {writer}, written by {last}"
        live = get_path(fleet[name], parse_dotted(rows[name]["field"]))
        assert _same_image(live, rows[name]["target"]), f"{name}: {live} is not the planned target"
    return seen


def newest_boot_image_writer(obj: dict[str, Any], creator: str) -> str | None:
    """The field manager whose providerSpec write is the newest (the test's own creation aside)."""
    entries = [e for e in obj["metadata"].get("managedFields", [])
               if '"f:providerSpec"' in json.dumps(e.get("fieldsV1")) and e["manager"] != creator]
    return str(max(entries, key=lambda e: e.get("time") or "")["manager"]) if entries else None


def next_golden(platform: str) -> dict[str, Any]:
    """The 4.22 ConfigMap with the next builds' images for `platform` (GCP image names, Azure's
    no-plan marketplace version), in `stream` (the MCO's) and `streams` (every stream)."""
    cm = bootimages_configmap("coreos-bootimages-4.22-multistream.yaml")
    stream, streams = json.loads(cm["data"]["stream"]), json.loads(cm["data"]["streams"])
    for doc, build in ((stream, "9.8.20260601-0"), (streams["rhel-9"], "9.8.20260601-0"),
                       (streams["rhel-10"], "10.2.20260601-0")):
        x86 = doc["architectures"]["x86_64"]
        if platform == "GCP":
            x86["images"]["gcp"].update(name=f"rhcos-{build.replace('.', '-')}-gcp-x86-64", release=build)
        else:
            for image in ((x86.get("rhel-coreos-extensions") or {}).get("marketplace", {}).get("azure", {})
                          .get("no-purchase-plan", {}).values()):
                image["version"] = build.removesuffix("-0")
    cm["data"]["stream"], cm["data"]["streams"] = json.dumps(stream), json.dumps(streams)
    return cm

