"""One vCenter inventory read serves every MachineSet of a template for a while (issue 15)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from bootimage_controller.core.cloud.facts import TemplateVm
from bootimage_controller.core.vsphere.topology import TemplatePlacement, TemplateWork
from bootimage_controller.vsphere.template_checks import VSphereChecks, VSphereOptions
from bootimage_controller.vsphere.vcenter import VCenterSession

PLACEMENT = TemplatePlacement("vc.example.com", 443, "DC1", "/DC1/vm/infra", "/DC1/datastore/ds", "/DC1/host/c/Resources",
                              "fd", "infra-rhcos-fd")


async def test_lookups_share_one_inventory_read_until_it_ages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[tuple[str, ...]] = []

    def find(_self: Any, _dc: str, _folder: str, names: tuple[str, ...]) -> dict[str, Any]:
        reads.append(names)
        return {n: ("vm-1", TemplateVm(n, True, "/DC1/vm/infra", True, "9.6.1", "record")) for n in names}

    monkeypatch.setattr(VCenterSession, "find", find)

    async def secret(_ns: str, _name: str) -> dict[str, Any]:
        b64 = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
        return {"metadata": {"name": "vsphere-cloud-credentials"},
                "data": {"vc.example.com.username": b64("u"), "vc.example.com.password": b64("p-0123456789")}}

    checks = VSphereChecks(VSphereOptions(ova_cache_dir=tmp_path), secret)
    work = TemplateWork(PLACEMENT, ("infra-rhcos-fd",))
    first = await checks.lookup(work, "9.6.1")
    second = await checks.lookup(work, "9.6.1")
    assert first == second and len(reads) == 1
    checks.forget_lookups()  # what a refresh does, and what the TTL does in time
    await checks.lookup(work, "9.6.1")
    assert len(reads) == 2
    checks.close()
