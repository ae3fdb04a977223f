"""A small stand-in for the Machine Config Operator's boot image controller (4.22, AWS), for tests.

It follows the reference's rules (mco-boot-image-controller.md sections 5 and 11.3), nothing more:
every pass lists the Machine API MachineSets, skips (and counts) any with an owner reference, leaves
alone (uncounted) any labelled with another stream than rhel-9 and Windows ones, and merge-patches
`ami` of the others to the default stream's AMI for their region. Then it reports its pass on the
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
MC_STATUS = "/apis/operator.openshift.io/v1/machineconfigurations/cluster/status"
NOW = "2026-11-25T00:00:00Z"


class StandInMco:
    def __init__(self, api: Any, install_version: str) -> None:
        self.api = api
        self.install_version = install_version
        self.writes: Counter[str] = Counter()  # MachineSet name -> boot image patches sent
        self.passes = 0

    async def sync(self) -> None:
        cm = await kube_request(self.api, "GET", CM)
        stream = json.loads(cm["data"]["stream"])
        items = (await kube_request(self.api, "GET", MS))["items"]
        skipped = 0
        for ms in items:
            meta = ms["metadata"]
            if meta.get("ownerReferences"):
                skipped += 1
                continue
            if meta.get("labels", {}).get(LABEL_OSSTREAM, "rhel-9") != "rhel-9":
                continue
            value = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
            region = value["placement"]["region"]
            target = stream["architectures"]["x86_64"]["images"]["aws"]["regions"][region]["image"]
            if value.get("ami", {}).get("id") != target:
                body = {"spec": {"template": {"spec": {"providerSpec": {"value": {"ami": {"id": target}}}}}}}
                await kube_request(self.api, "PATCH", f"{MS}/{meta['name']}", body, content_type=MERGE_PATCH)
                self.writes[meta["name"]] += 1
        await self._report(len(items), skipped, cm["data"].get("releaseVersion", ""))
        self.passes += 1

    async def _report(self, total: int, skipped: int, release: str) -> None:
        text = f"Reconciled {total - skipped} of {total} MAPI MachineSets" + (f" ({skipped} skipped)" if skipped else "")
        record = self.install_version if skipped else ".".join((release.split("-")[0].split(".") + ["0"] * 3)[:3])
        status = {
            "conditions": [
                {"type": "BootImageUpdateProgressing", "status": "False", "reason": "MAPIMachineSetUpdated",
                 "message": text, "lastTransitionTime": NOW},
                {"type": "BootImageUpdateDegraded", "status": "False", "reason": "MAPIMachineSetUpdated",
                 "message": "0 Degraded MAPI MachineSets", "lastTransitionTime": NOW},
            ],
            "bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {"ocpVersion": record}},
            # The operator's validated copy of the enrollment; OpenShift refuses Automatic without one.
            "managedBootImagesStatus": {"machineManagers": [
                {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]},
        }
        await kube_request(self.api, "PATCH", MC_STATUS, {"status": status}, content_type=MERGE_PATCH)

    async def run(self, period: float = 0.5) -> None:
        while True:
            await self.sync()
            await asyncio.sleep(period)


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
