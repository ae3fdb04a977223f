"""vSphere templates refreshed in a real vSphere API (govmomi's vcsim) by the daemon (issue 15).

Each test: a fresh vcsim (DC0 / DC0_C0 / LocalDS_0 / "VM Network"), a folder /DC0/vm/infra1 with the
install-time template in it, a loopback HTTP server with the stream's OVA, and the loopback
kube-apiserver with an Infrastructure naming that vCenter and failure domain.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    cluster_version,
    get_object,
    infrastructure,
    kube_request,
    machine_configuration,
    merge_patch,
)
from harness.objects import machineset_from_fixture as ms_fixture
from harness.vcsim import PASSWORD, USERNAME, Vcsim, running_vcsim
from vsphere.ovas import OvaServer, make_ova, serving

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_RELEASE,
    MAPI_NAMESPACE,
    METRIC_TEMPLATE_IMPORTS,
    VSPHERE_CREDENTIALS_SECRET,
)
from bootimage_controller.daemon import run as daemon

from .daemon_helpers import configmap_from_stream, list_machinesets, run_args, user_data_secret

pytestmark = pytest.mark.integration

OLD = "9.6.20250101-0"
NEW = "9.6.20251212-1"
INFRA = "infra1"
FOLDER = "/DC0/vm/infra1"
COMPUTED = f"{INFRA}-rhcos-fd1"
INSTALLER_NAME = f"{INFRA}-rhcos-region-zone"  # what the installer names it; not the computed name
RECORD = f"{ANNOTATION_RELEASE}="


# ---- vCenter, read and arranged with pyvmomi directly --------------------------------------------


def connect(sim: Vcsim) -> Any:
    from pyVim.connect import SmartConnect

    return SmartConnect(host=sim.host, port=sim.port, user=USERNAME, pwd=PASSWORD,
                        sslContext=ssl._create_unverified_context())


def inventory(sim: Vcsim) -> dict[str, tuple[str, str, bool, str]]:
    """Every VM in the datacenter: name -> (moid, parent folder name, is template, annotation).
    Walks the folders (vcsim's container views keep destroyed templates)."""
    from pyVmomi import vim

    si = connect(sim)
    out: dict[str, tuple[str, str, bool, str]] = {}
    pending = [si.content.searchIndex.FindByInventoryPath("DC0/vm")]
    while pending:
        folder = pending.pop()
        for child in folder.childEntity:
            if isinstance(child, vim.Folder):
                pending.append(child)
            elif isinstance(child, vim.VirtualMachine):
                out[child.name] = (child._moId, folder.name, bool(child.config.template), child.config.annotation or "")
    return out


def import_template(sim: Vcsim, ova: Path, name: str, folder: str, release: str) -> str:
    """The install-time template: imported, our record written (vcsim drops the OVF product
    version), marked a template. Uses only pyvmomi and the NFC upload, as an installer would."""
    import http.client
    import tarfile
    import time

    from pyVmomi import vim

    si = connect(sim)
    c = si.content
    dc = c.searchIndex.FindByInventoryPath("DC0")
    target = c.searchIndex.FindByInventoryPath(folder.lstrip("/"))
    if target is None:
        target = dc.vmFolder.CreateFolder(folder.rsplit("/", 1)[-1])
    pool = c.searchIndex.FindByInventoryPath("DC0/host/DC0_C0/Resources")
    with tarfile.open(ova) as tar:
        descriptor = tar.extractfile("rhcos.ovf").read().decode()  # type: ignore[union-attr]
        disk = tar.extractfile("disk.vmdk").read()  # type: ignore[union-attr]
    spec = c.ovfManager.CreateImportSpec(descriptor, pool, dc.datastore[0], vim.OvfManager.CreateImportSpecParams(entityName=name))
    lease = pool.ImportVApp(spec.importSpec, target)
    while lease.state == vim.HttpNfcLease.State.initializing:
        time.sleep(0.05)
    moid = lease.info.entity._moId
    url = lease.info.deviceUrl[0].url.replace("*", f"{sim.host}:{sim.port}")
    conn = http.client.HTTPSConnection(sim.host, sim.port, context=ssl._create_unverified_context())
    conn.request("PUT", url.split(f"{sim.port}", 1)[1], body=disk, headers={"Content-Length": str(len(disk))})
    assert conn.getresponse().status == 200
    lease.HttpNfcLeaseComplete()
    vm = vim.VirtualMachine(moid, si._stub)
    task = vm.ReconfigVM_Task(vim.vm.ConfigSpec(annotation=f"installed\n{RECORD}{release}"))
    while task.info.state not in ("success", "error"):
        time.sleep(0.05)
    vm.MarkAsTemplate()
    return str(moid)


# ---- the cluster ----------------------------------------------------------------------------------


@dataclass
class World:
    sim: Vcsim
    ovas: OvaServer
    cache: Path
    sha: str


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    (tmp_path / "www").mkdir()
    make_ova(tmp_path / "www" / "old.ova", OLD)
    sha = make_ova(tmp_path / "www" / "new.ova", NEW)
    with running_vcsim(tmp_path) as sim, serving(tmp_path / "www") as ovas:
        yield World(sim, ovas, tmp_path / "ova-cache", sha)


def vsphere_infrastructure(sim: Vcsim) -> dict[str, Any]:
    infra = infrastructure("VSphere", infrastructure_name=INFRA)
    infra["spec"]["platformSpec"]["vsphere"] = {
        "vcenters": [{"server": sim.host, "port": sim.port, "datacenters": ["DC0"]}],
        "failureDomains": [{
            "name": "fd1", "region": "region", "zone": "zone", "server": sim.host,
            "topology": {"datacenter": "DC0", "computeCluster": "/DC0/host/DC0_C0", "networks": ["VM Network"],
                         "datastore": "/DC0/datastore/LocalDS_0", "resourcePool": "/DC0/host/DC0_C0/Resources",
                         "folder": FOLDER},
        }],
    }
    return infra


def golden(w: World, *, sha: str | None = None) -> dict[str, Any]:
    cm = configmap_from_stream("installer-release-4.22-coreos-rhel-9.json", "4.22.0")
    stream = json.loads(cm["data"]["stream"])
    stream["architectures"]["x86_64"]["artifacts"]["vmware"] = {
        "release": NEW,
        "formats": {"ova": {"disk": {"location": f"{w.ovas.url}/new.ova", "sha256": sha or w.sha}}},
    }
    cm["data"]["stream"] = json.dumps(stream)
    return cm


def credentials(server: str) -> dict[str, Any]:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": VSPHERE_CREDENTIALS_SECRET, "namespace": MAPI_NAMESPACE},
            "data": {f"{server}.username": b64(USERNAME), f"{server}.password": b64(PASSWORD)}}


def vsphere_machineset(sim: Vcsim, name: str, template: str, **workspace: str) -> dict[str, Any]:
    ws = {"server": sim.host, "datacenter": "DC0", "datastore": "/DC0/datastore/LocalDS_0",
          "folder": FOLDER, "resourcePool": "/DC0/host/DC0_C0/Resources", **workspace}
    return ms_fixture("vsphere-x86_64-4.16.yaml", name, provider_spec={"template": template, "workspace": ws})


async def arrange(kube_api: Any, w: World, *machinesets: dict[str, Any], creds: bool = True, sha: str | None = None) -> None:
    await apply(kube_api, vsphere_infrastructure(w.sim))
    await apply(kube_api, cluster_version())
    await apply(kube_api, machine_configuration())
    await apply(kube_api, golden(w, sha=sha))
    await apply(kube_api, user_data_secret())
    if creds:
        await apply(kube_api, credentials(w.sim.host))
    for ms in machinesets:
        await apply(kube_api, ms)


async def once(kube_cluster: TestCluster, w: World, *extra: str) -> int:
    return await daemon.run_async(run_args(
        kube_cluster.kubeconfig, "--once", "--no-leader-elect", "--vsphere-insecure", "--ova-cache-dir", str(w.cache), *extra
    ))


def _writes() -> dict[tuple[str, str], float]:
    """Every write the (in-process) daemon has sent so far, by verb and resource."""
    out: dict[tuple[str, str], float] = {}
    for metric in obs.REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "bootimage_controller_api_requests_total" and sample.labels["verb"] in ("patch", "create", "update", "delete"):
                key = (sample.labels["verb"], sample.labels["resource"])
                out[key] = out.get(key, 0) + sample.value
    return out


def templates_imported() -> float:
    """The daemon's count of OVF imports into vCenter, as /metrics shows it."""
    return obs.REGISTRY.get_sample_value(f"{METRIC_TEMPLATE_IMPORTS}_total", {"result": "imported"}) or 0.0


def template_field(ms: dict[str, Any]) -> str:
    return str(ms["spec"]["template"]["spec"]["providerSpec"]["value"]["template"])


def release_in(annotation: str) -> str | None:
    return next((line[len(RECORD):] for line in annotation.splitlines() if line.startswith(RECORD)), None)


# ---- acceptance -----------------------------------------------------------------------------------


async def test_an_outdated_template_is_replaced_in_one_pass_and_the_next_pass_changes_nothing(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    old_moid = import_template(world.sim, world.ovas.directory / "old.ova", COMPUTED, FOLDER, OLD)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "workers", COMPUTED),
                  vsphere_machineset(world.sim, "more-workers", COMPUTED))
    before = await list_machinesets(kube_api)
    imports = templates_imported()

    assert await once(kube_cluster, world) == 0
    assert templates_imported() == imports + 1
    vms = inventory(world.sim)
    assert COMPUTED in vms and vms[COMPUTED][0] != old_moid, "the template was replaced by a new VM"
    _, folder, is_template, annotation = vms[COMPUTED]
    assert (folder, is_template, release_in(annotation)) == ("infra1", True, NEW)
    assert old_moid not in {v[0] for v in vms.values()}, "the old template VM is gone"
    assert not [n for n in vms if n.startswith("bic-")], "no temporary or renamed-away VM is left"
    after = await list_machinesets(kube_api)
    # The template kept its name: the MachineSets are not written at all; each is told by an Event.
    for name in ("workers", "more-workers"):
        assert after[name]["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"]
    events = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
    told = {e["involvedObject"]["name"] for e in events["items"]
            if e["reason"] == "BootImageUpdated" and f"vSphere template {COMPUTED} replaced" in e["message"]}
    assert told == {"workers", "more-workers"}

    mc = await get_object(kube_api, machine_configuration())
    writes = _writes()
    assert await once(kube_cluster, world) == 0
    assert _writes() == writes, "the second pass sent no write of any kind"
    assert inventory(world.sim) == vms, "the second pass made no vCenter change"
    assert world.ovas.gets("new.ova") == 1
    again = await list_machinesets(kube_api)
    assert again["workers"]["metadata"]["resourceVersion"] == after["workers"]["metadata"]["resourceVersion"]
    mc_again = await get_object(kube_api, machine_configuration())
    assert mc is not None and mc_again is not None
    assert mc_again["metadata"]["resourceVersion"] == mc["metadata"]["resourceVersion"]


async def test_two_machinesets_on_an_installer_named_template_share_one_download_and_one_import(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    import_template(world.sim, world.ovas.directory / "old.ova", INSTALLER_NAME, FOLDER, OLD)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "a", INSTALLER_NAME),
                  vsphere_machineset(world.sim, "b", INSTALLER_NAME))
    before = set(inventory(world.sim))

    assert await once(kube_cluster, world) == 0
    vms = inventory(world.sim)
    assert set(vms) - before == {COMPUTED}, "one import: the computed template, nothing else"
    assert release_in(vms[COMPUTED][3]) == NEW
    assert world.ovas.gets("new.ova") == 1
    # The installer-named template stays (it is the admin's to delete); both MachineSets point at
    # the computed one, claimed and recorded.
    assert release_in(vms[INSTALLER_NAME][3]) == OLD
    fleet = await list_machinesets(kube_api)
    for name in ("a", "b"):
        ms = fleet[name]
        assert template_field(ms) == COMPUTED
        assert ms["metadata"]["annotations"][ANNOTATION_RELEASE] == NEW
        assert any(r["kind"] == "ConfigMap" for r in ms["metadata"]["ownerReferences"])


async def test_a_crash_between_import_and_swap_is_finished_on_the_next_pass(
    kube_cluster: TestCluster, kube_api: Any, world: World, tmp_path: Path
) -> None:
    old_moid = import_template(world.sim, world.ovas.directory / "old.ova", COMPUTED, FOLDER, OLD)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "workers", COMPUTED))
    argv = [sys.executable, "-m", "bootimage_controller", "run", "--kubeconfig", str(kube_cluster.kubeconfig),
            "--once", "--no-leader-elect", "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
            "--vsphere-insecure", "--ova-cache-dir", str(world.cache), "--log-format", "json"]
    env = {**os.environ, "BOOTIMAGE_VSPHERE_TEST_CRASH_AT": "imported"}
    crashed = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert crashed.returncode == 70, crashed.stdout.decode()[-2000:]
    vms = inventory(world.sim)
    leftovers = [n for n in vms if n.startswith("bic-tmp-")]
    assert len(leftovers) == 1 and vms[COMPUTED][0] == old_moid, "killed after the import, before the swap"
    imported = vms[leftovers[0]][0]

    finished = subprocess.run(argv, capture_output=True, timeout=120)
    assert finished.returncode == 0, finished.stdout.decode()[-2000:]
    vms = inventory(world.sim)
    assert [n for n in vms if n == COMPUTED] == [COMPUTED] and vms[COMPUTED][0] == imported, "the import was reused"
    assert release_in(vms[COMPUTED][3]) == NEW
    assert not [n for n in vms if n.startswith("bic-")]
    assert world.ovas.gets("new.ova") == 1


async def test_a_checksum_mismatch_imports_nothing_and_fails_the_machineset(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    import_template(world.sim, world.ovas.directory / "old.ova", COMPUTED, FOLDER, OLD)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "workers", COMPUTED), sha="0" * 64)
    before = inventory(world.sim)
    assert await once(kube_cluster, world) == 1  # Degraded: the pass did not complete cleanly
    assert inventory(world.sim) == before
    assert list(world.cache.iterdir()) == []
    mc = await get_object(kube_api, machine_configuration())
    assert mc is not None
    degraded = next(c for c in mc["status"]["conditions"] if c["type"] == "BootImageUpdateDegraded")
    assert degraded["status"] == "True" and "OvaChecksumMismatch" in degraded["message"]


def plan_json(kube_cluster: TestCluster, *extra: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "plan", "--from-cluster", "--kubeconfig",
         str(kube_cluster.kubeconfig), "--cloud-verify", "--vsphere-insecure", "-o", "json", *extra],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return {row["name"]: row for row in json.loads(result.stdout)["machineSets"]}


async def test_plan_cloud_verify_says_what_the_daemon_would_do_for_each_case(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    import_template(world.sim, world.ovas.directory / "old.ova", COMPUTED, FOLDER, OLD)
    import_template(world.sim, world.ovas.directory / "old.ova", "customers-own", "/DC0/vm/elsewhere", OLD)
    await arrange(
        kube_api, world,
        vsphere_machineset(world.sim, "outdated", COMPUTED),
        vsphere_machineset(world.sim, "custom", "customers-own"),
        vsphere_machineset(world.sim, "nowhere", COMPUTED, datastore="/DC0/datastore/missing"),
    )
    rows = plan_json(kube_cluster)
    assert (rows["outdated"]["action"], rows["outdated"]["reason"]) == ("patch", "BootImageOutdated")
    assert rows["outdated"]["current"] == {"template": COMPUTED, "release": OLD}
    assert rows["outdated"]["target"] == {"template": COMPUTED, "release": NEW}
    assert (rows["custom"]["action"], rows["custom"]["reason"]) == ("skip", "CustomBootImage")
    assert "/DC0/vm/elsewhere" in rows["custom"]["message"]
    assert (rows["nowhere"]["action"], rows["nowhere"]["reason"]) == ("error", "FailureDomainNotFound")
    assert rows["nowhere"]["field"] == "spec.template.spec.providerSpec.value.workspace"
    assert inventory(world.sim)[COMPUTED][3].endswith(OLD), "plan only reads"

    # No credentials for this vCenter: said, and the target still shown.
    await kube_request_delete_secret(kube_api)
    rows = plan_json(kube_cluster)
    assert (rows["outdated"]["action"], rows["outdated"]["reason"]) == ("skip", "VCenterUnavailable")
    assert "vsphere-cloud-credentials" in rows["outdated"]["message"]

    # vCenter unreachable: a retry-later skip, no traceback.
    await apply(kube_api, credentials(world.sim.host))
    infra = vsphere_infrastructure(world.sim)
    unreachable = merge_patch(infra, {"spec": {"platformSpec": {"vsphere": {"vcenters": [
        {"server": world.sim.host, "port": 9, "datacenters": ["DC0"]}]}}}})
    await apply(kube_api, unreachable)
    rows = plan_json(kube_cluster)
    assert (rows["outdated"]["action"], rows["outdated"]["reason"]) == ("skip", "CloudUnavailable")
    assert ":9" in rows["outdated"]["message"]


async def kube_request_delete_secret(kube_api: Any) -> None:
    from harness.objects import kube_request

    await kube_request(kube_api, "DELETE", f"/api/v1/namespaces/{MAPI_NAMESPACE}/secrets/{VSPHERE_CREDENTIALS_SECRET}")


async def test_a_template_the_controller_built_is_replaced_release_after_release(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    """Issue 25: the first pass builds the missing template, and each new release replaces the one
    the controller built the time before (a rename moves no files: an import under a fixed temporary
    name collided with the last one's datastore folder, FileAlreadyExists, from the second release on).
    One template of the name at the end, nothing temporary left, and a settled pass writes nothing."""
    releases = ("9.6.20250101-0", "9.6.20251212-1", "9.8.20260403-0")
    shas = {r: make_ova(world.ovas.directory / f"r{i}.ova", r) for i, r in enumerate(releases)}
    si = connect(world.sim)  # the installer's folder, empty: the template is missing
    si.content.searchIndex.FindByInventoryPath("DC0").vmFolder.CreateFolder(INFRA)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "workers", COMPUTED))
    for i, release in enumerate(releases):
        cm = golden(world)
        stream = json.loads(cm["data"]["stream"])
        stream["architectures"]["x86_64"]["artifacts"]["vmware"] = {
            "release": release,
            "formats": {"ova": {"disk": {"location": f"{world.ovas.url}/r{i}.ova", "sha256": shas[release]}}},
        }
        cm["data"]["stream"] = json.dumps(stream)
        await apply(kube_api, cm)
        imports = templates_imported()
        assert await once(kube_cluster, world) == 0, f"release {release}"
        assert templates_imported() == imports + 1, f"release {release}"
        vms = inventory(world.sim)
        assert [n for n in vms if n == COMPUTED] == [COMPUTED]
        _, folder, is_template, annotation = vms[COMPUTED]
        assert (folder, is_template, release_in(annotation)) == (INFRA, True, release)
        assert not [n for n in vms if n.startswith("bic-")], f"a temporary VM is left after {release}"
    writes = _writes()
    assert await once(kube_cluster, world) == 0
    assert _writes() == writes and inventory(world.sim) == vms, "the settled pass changed nothing"


# ---- legacy clusters: no failure domains in the Infrastructure (issue 25, item 3) -----------------

LEGACY_NAME = f"{INFRA}-rhcos"  # what the installer of 4.12 and before named the template


def legacy_infrastructure() -> dict[str, Any]:
    """A cluster installed before failure domains: the Infrastructure names no vCenter at all (the
    vCenter is in the cloud provider config and the credentials Secret's keys). vcsim listens on a
    port of its own, which `--vsphere-port` gives (443 on a real vCenter)."""
    infra = infrastructure("VSphere", infrastructure_name=INFRA)
    infra["spec"]["platformSpec"] = {"type": "VSphere"}
    return infra


async def test_a_legacy_cluster_places_the_template_from_the_workspace(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    old_moid = import_template(world.sim, world.ovas.directory / "old.ova", LEGACY_NAME, FOLDER, OLD)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "workers", LEGACY_NAME))
    await apply(kube_api, legacy_infrastructure())
    before = await list_machinesets(kube_api)

    assert await once(kube_cluster, world, "--vsphere-port", str(world.sim.port)) == 0
    vms = inventory(world.sim)
    assert LEGACY_NAME in vms and vms[LEGACY_NAME][0] != old_moid, "replaced where the workspace says"
    _, folder, is_template, annotation = vms[LEGACY_NAME]
    assert (folder, is_template, release_in(annotation)) == ("infra1", True, NEW)
    assert not [n for n in vms if n.startswith("bic-")], "no temporary VM is left"
    after = await list_machinesets(kube_api)
    assert after["workers"]["metadata"]["resourceVersion"] == before["workers"]["metadata"]["resourceVersion"]


async def test_a_legacy_workspace_that_names_nothing_in_vcenter_is_an_error_naming_the_field(
    kube_cluster: TestCluster, kube_api: Any, world: World
) -> None:
    import_template(world.sim, world.ovas.directory / "old.ova", LEGACY_NAME, FOLDER, OLD)
    await arrange(kube_api, world, vsphere_machineset(world.sim, "lost", LEGACY_NAME, datacenter="DC9"))
    await apply(kube_api, legacy_infrastructure())

    assert await once(kube_cluster, world, "--vsphere-port", str(world.sim.port)) == 1, "Degraded: the pass did not complete cleanly"
    mc = await get_object(kube_api, machine_configuration())
    assert mc is not None
    degraded = next(c for c in mc["status"]["conditions"] if c["type"] == "BootImageUpdateDegraded")
    assert degraded["status"] == "True"
    assert "workspace.datacenter" in degraded["message"] and "DC9" in degraded["message"], degraded["message"]
    assert LEGACY_NAME in inventory(world.sim), "nothing in vCenter was touched"
