"""No vCenter write is sent once this replica may not write (issue 15, SPEC section 3): the guard
is asked before every one, and a refusal stops the refresh between steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bootimage_controller.core.cloud.facts import TemplateVm
from bootimage_controller.core.vsphere.topology import (
    OvaSource,
    TemplatePlacement,
    TemplateRefresh,
    leftover_names,
)
from bootimage_controller.kube.fence import NotLeader
from bootimage_controller.vsphere.ova import OvaCache
from bootimage_controller.vsphere.template_refresh import TemplateRefresher, VCenterClient

NAME = "infra-rhcos-fd"
TMP, OLD = leftover_names(NAME, "9.6.2")  # the release WORK imports
PLACEMENT = TemplatePlacement("vc", 443, "DC", "/DC/vm/infra", "/DC/datastore/ds", "/DC/host/c/Resources", "fd", NAME)
WORK = TemplateRefresh(PLACEMENT, NAME, OvaSource("http://127.0.0.1:9/x.ova", "0" * 64, "9.6.2"), "infra")


class FakeSession:
    """A vCenter holding `vms` (name -> release); records every call that would change it."""

    def __init__(self, vms: dict[str, tuple[str, bool]]) -> None:
        self.vms = vms
        self.writes: list[str] = []

    def find(self, _dc: str, folder: str, names: tuple[str, ...]) -> dict[str, Any]:
        return {n: (f"vm-{n}", TemplateVm(n, True, folder, self.vms[n][1], self.vms[n][0], "record"))
                if n in self.vms else None for n in names}

    def __getattr__(self, name: str) -> Any:
        if name in ("destroy", "rename", "import_ova", "finish_template", "attach_tag"):
            return lambda *args, **kw: self.writes.append(name)
        raise AttributeError(name)

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    "vms",
    [
        {NAME: ("9.6.1", True), OLD: ("9.6.0", True)},  # an interrupted swap to finish: first a delete
        {NAME: ("9.6.1", True), TMP: ("9.6.2", True)},  # a complete import to swap in: first a rename
    ],
    ids=["recover", "swap"],
)
async def test_a_refused_guard_sends_nothing_to_vcenter(tmp_path: Path, vms: dict[str, tuple[str, bool]]) -> None:
    session = FakeSession(vms)
    asked: list[str] = []

    def guard() -> None:
        asked.append("guard")
        raise NotLeader("lost the Lease")

    refresher = TemplateRefresher(OvaCache(tmp_path))
    with pytest.raises(NotLeader):
        await refresher.refresh(VCenterClient(session), WORK, guard)  # type: ignore[arg-type]
    assert asked == ["guard"] and session.writes == []


async def test_with_the_guard_open_the_same_steps_are_sent(tmp_path: Path) -> None:
    session = FakeSession({NAME: ("9.6.1", True), TMP: ("9.6.2", True)})
    refresher = TemplateRefresher(OvaCache(tmp_path))
    outcome = await refresher.refresh(VCenterClient(session), WORK, lambda: None)  # type: ignore[arg-type]
    assert outcome.result == "replaced" and session.writes == ["rename", "rename", "destroy"]
