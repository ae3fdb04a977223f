"""A small stand-in for the Machine Config Operator's boot image controller (4.22, AWS), for tests.

It follows the reference's rules (mco-boot-image-controller.md sections 5 and 11.3), nothing more:
every pass lists the Machine API MachineSets, skips (and counts) any with an owner reference, leaves
alone (uncounted) any labelled with another stream than rhel-9 and Windows ones, and merge-patches
`ami` of the others to the default stream's AMI for their region, where `managedBootImages` selects
them (as the operator copies it to status: the spec's, else All). Like the real one (measured,
../shared/tools/mco), it reads no Argo CD, Flux or Hive mark. Then it reports its pass on the
MachineConfiguration (BootImageUpdateProgressing/Degraded) and keeps its skew record: a pass with
skips resets `status.bootImageSkewEnforcementStatus.automatic` to the install version, a clean one
moves it to the ConfigMap's release. It writes as `machine-config-controller` (its field manager),
so a test can tell its writes from the daemon's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness.objects import api_client_for, kube_request

from bootimage_controller.constants import LABEL_OSSTREAM, MAPI_NAMESPACE, MERGE_PATCH

MANAGER = "machine-config-controller"
MS = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"
CM = "/api/v1/namespaces/openshift-machine-config-operator/configmaps/coreos-bootimages"
MC = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"
MC_STATUS = f"{MC}/status"
ALL_MACHINESETS = [{"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]
NOW = "2026-11-25T00:00:00Z"


class StandInMco:
    def __init__(self, api: Any, install_version: str) -> None:
        self.api = api
        self.install_version = install_version
        self.writes: Counter[str] = Counter()  # MachineSet name -> boot image patches sent
        self.passes = 0
        self.skew_setting: dict[str, Any] | None = None  # spec.bootImageSkewEnforcement, as last read

    async def sync(self) -> None:
        cm = await kube_request(self.api, "GET", CM)
        stream = json.loads(cm["data"]["stream"])
        items = (await kube_request(self.api, "GET", MS))["items"]
        managers = await self._managers()
        skipped = 0
        for ms in items:
            meta = ms["metadata"]
            if not selects(managers, meta.get("labels") or {}):
                continue
            if meta.get("ownerReferences"):
                skipped += 1
                continue
            if meta.get("labels", {}).get(LABEL_OSSTREAM, "rhel-9") != "rhel-9":
                continue
            value = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
            region = value["placement"]["region"]
            target = stream["architectures"]["x86_64"]["images"]["aws"]["regions"][region]["image"]
            if value.get("ami", {}).get("id") != target:
                # As the real one sends it (../shared/tools/mco, measured): its typed round trip adds
                # these two fields to the AWS providerSpec.
                value = {"ami": {"id": target}, "capacityReservationId": "", "metadata": {"creationTimestamp": None}}
                body = {"spec": {"template": {"spec": {"providerSpec": {"value": value}}}}}
                await kube_request(self.api, "PATCH", f"{MS}/{meta['name']}", body, content_type=MERGE_PATCH)
                self.writes[meta["name"]] += 1
        await self._report(len(items), skipped, cm["data"].get("releaseVersion", ""), managers)
        self.passes += 1

    async def _managers(self) -> list[dict[str, Any]]:
        """The enrollment as the operator validates and copies it: the spec's, else All."""
        mc = await kube_request(self.api, "GET", MC)
        spec = mc.get("spec") or {}
        self.skew_setting = spec.get("bootImageSkewEnforcement")
        managers = (spec.get("managedBootImages") or {}).get("machineManagers")
        return managers if isinstance(managers, list) else ALL_MACHINESETS

    async def _report(self, total: int, skipped: int, release: str, managers: list[dict[str, Any]]) -> None:
        text = f"Reconciled {total - skipped} of {total} MAPI MachineSets" + (f" ({skipped} skipped)" if skipped else "")
        record = self.install_version if skipped else ".".join((release.split("-")[0].split(".") + ["0"] * 3)[:3])
        status = {
            "conditions": [
                {"type": "BootImageUpdateProgressing", "status": "False", "reason": "MAPIMachineSetUpdated",
                 "message": text, "lastTransitionTime": NOW},
                {"type": "BootImageUpdateDegraded", "status": "False", "reason": "MAPIMachineSetUpdated",
                 "message": "0 Degraded MAPI MachineSets", "lastTransitionTime": NOW},
            ],
            # The operator's copy of the skew setting: Manual as the admin set it, else Automatic.
            "bootImageSkewEnforcementStatus": (
                {"mode": "Manual", "manual": self.skew_setting["manual"], "automatic": None}
                if (self.skew_setting or {}).get("mode") == "Manual"
                else {"mode": "Automatic", "automatic": {"ocpVersion": record}}),
            # The operator's validated copy of the enrollment; OpenShift refuses Automatic without one.
            "managedBootImagesStatus": {"machineManagers": managers},
        }
        await kube_request(self.api, "PATCH", MC_STATUS, {"status": status}, content_type=MERGE_PATCH)

    async def run(self, period: float = 0.5) -> None:
        while True:
            await self.sync()
            await asyncio.sleep(period)


def selects(managers: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """The MCO's enrollment of one MachineSet: its `machinesets` entry, a Partial selector on the
    MachineSet's own labels (matchLabels and In/NotIn/Exists/DoesNotExist)."""
    entry = next((m for m in managers if m.get("resource") == "machinesets"
                  and m.get("apiGroup") == "machine.openshift.io"), None)
    mode = (entry or {}).get("selection", {}).get("mode")
    if mode != "Partial":
        return mode == "All"
    selector = entry["selection"]["partial"]["machineResourceSelector"]  # type: ignore[index]
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req["key"], req["operator"], req.get("values") or []
        if (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values):
            return False
    return True


@contextlib.asynccontextmanager
async def running_mco(kubeconfig: Path, install_version: str) -> AsyncIterator[StandInMco]:
    """The stand-in, writing through its own client (field manager `machine-config-controller`)."""
    async with await api_client_for(kubeconfig) as api:
        api.user_agent = f"{MANAGER}/standin"
        mco = StandInMco(api, install_version)
        task = asyncio.create_task(mco.run())
        try:
            yield mco
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
