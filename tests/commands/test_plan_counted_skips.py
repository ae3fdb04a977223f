"""Issue 34 item 6, Azure parity with MCO #6404: a stream without the Gen1 image and confidential VMs
are skips the skew verdict counts, each named with its reason.

The cluster: Azure, Automatic skew (every MachineSet enrolled), golden data = the 4.22 rhel-10 stream
with the main branch's rhel-10 marketplace overlay (no-purchase-plan has Gen2 images only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bootimage_controller.core.golden import merge_marketplace

from .conftest import (
    PROVIDER_SPEC,
    STREAMS,
    Run,
    by_name,
    cluster_version,
    infrastructure,
    machine_configuration,
    machineset,
    node,
    write_yaml,
)

LEGACY_GEN1 = "/resourceGroups/rg/providers/Microsoft.Compute/images/mycluster-rhcos"
PAID_OCP = {  # a published paid image the bundled index knows (4.18 marketplace data)
    "publisher": "redhat", "offer": "rh-ocp-worker", "sku": "rh-ocp-worker",
    "version": "4.18.2025031114", "resourceID": "", "type": "MarketplaceWithPlan",
}
OLD_ALEPH = "411.86.202308081056-0"  # RHEL 8.6: below the default RHEL 9.2 limit


def _azure(name: str, image: dict[str, str], security_type: str | None = None) -> dict[str, Any]:
    obj = machineset(name, "azure-x86_64-legacy-gallery-gen2-4.16.yaml")
    psp: dict[str, Any] = obj
    for key in PROVIDER_SPEC:
        psp = psp[key]
    psp["image"] = image
    if security_type:
        psp["securityProfile"] = {"settings": {"securityType": security_type}}
    return obj


def _stream(file: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((STREAMS / file).read_text())
    return doc


def _cluster(tmp_path: Path, aleph: str) -> Path:
    doc = merge_marketplace(_stream("installer-release-4.22-coreos-rhel-10.json"),
                            _stream("openshift-installer-main-marketplace-coreos-rhel-10.json"))
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "coreos-bootimages", "namespace": "openshift-machine-config-operator"},
          "data": {"releaseVersion": "4.22.0", "stream": json.dumps(doc)}}
    d = tmp_path / "cluster"
    write_yaml(d / "cluster.yaml", infrastructure("Azure"), cluster_version("4.22.0", "4.16.0"),
               machine_configuration(), cm, node("master-0", aleph=aleph))
    gen1 = {"publisher": "", "offer": "", "sku": "", "version": "", "resourceID": LEGACY_GEN1, "type": ""}
    write_yaml(d / "machinesets.yaml",
               _azure("gen1-legacy", gen1),
               _azure("confidential", PAID_OCP, "ConfidentialVM"))
    return d


def test_gen1_missing_and_confidential_vms_are_skips_the_verdict_names(run: Run, tmp_path: Path) -> None:
    result = run("plan", _cluster(tmp_path, OLD_ALEPH), "-o", "json")
    assert result.code == 0, result.err
    plan = result.json()
    rows = by_name(plan)
    assert (rows["gen1-legacy"]["action"], rows["gen1-legacy"]["reason"]) == ("skip", "MarketplaceDataMissing")
    assert "hyperVGen1" in rows["gen1-legacy"]["message"]
    assert (rows["confidential"]["action"], rows["confidential"]["reason"]) == ("skip", "UnsupportedSecurityType")
    # The confidential MachineSet's image is still identified: the skew check judges what it keeps.
    assert rows["confidential"]["currentRelease"] == "4.18.2025031114"
    skew = plan["skew"]
    assert (skew["mode"], skew["upgradeable"], skew["reason"]) == ("Automatic", False, "ClusterBootImageSkewError")
    # The Gen1 MachineSet boots the install image (only the aleph says what): held, with its reason.
    assert "gen1-legacy (skipped: MarketplaceDataMissing)" in skew["message"]


def test_counted_skips_are_named_when_upgrades_are_allowed(run: Run, tmp_path: Path) -> None:
    plan = run("plan", _cluster(tmp_path, "9.6.20251015-0"), "-o", "json").json()
    skew = plan["skew"]
    assert skew["upgradeable"] is True, skew["message"]
    assert "left at the boot image they have" in skew["message"]
    assert "confidential (skipped: UnsupportedSecurityType)" in skew["message"]
    assert "gen1-legacy (skipped: MarketplaceDataMissing)" in skew["message"]
