"""The parts of OpenShift that cannot run here, for boot verification tests (SPEC section 3b): a
cloud's machine controller and the kubelet, and nothing else.

`MachineProvider` watches (polls) the Machines of openshift-machine-api and, for each new one, does
what a real provider and kubelet would for the image in its own providerSpec, by a table:
- `GOOD`: the instance starts (`Provisioned`, an instance id), its Node joins and is Ready, the
  Machine goes `Running` with a `nodeRef`, and the Node says which Machine it is;
- `NEVER_JOINS`: the instance starts and no Node ever joins (the image cannot pivot: MCO #6435);
- `REFUSED`: the cloud refuses the image (`Failed`, `InvalidConfiguration`, `InvalidAMIID.NotFound`);
- a Machine labelled `CAPACITY_LABEL`, whatever its image: `Failed` for capacity, not the image.
`scale_up` creates a Machine from a MachineSet's template as its MachineSet controller does on a
scale-up (owner reference, template labels and spec); canary Machines come from the daemon and
`verify-boot`. A deleted Machine's Node is deleted, as the machine controller does.

The Cluster API the same way (`capi=True`): `capi_scale_up` clones the MachineSet's AWSMachineTemplate
into an AWSMachine and creates the Machine naming it, as CAPI's MachineSet controller does; the
provider then plays CAPA and the kubelet: `GOOD` sets the instance on the AWSMachine and the
Machine `Running` with a `nodeRef` and a Ready Node, `NEVER_JOINS` stops at `Provisioned`,
`REFUSED` sets the failure CAPA reports on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bootimage_controller.constants import CAPI_NAMESPACE, MAPI_NAMESPACE

from .background import running
from .objects import MERGE_PATCH, kube_request

MACHINES_PATH = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machines"
CAPI_MACHINES_PATH = f"/apis/cluster.x-k8s.io/v1beta1/namespaces/{CAPI_NAMESPACE}/machines"
AWS_MACHINES_PATH = f"/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NAMESPACE}/awsmachines"
AWS_TEMPLATES_PATH = f"/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NAMESPACE}/awsmachinetemplates"
CAPACITY_LABEL = "test.bootimage-controller/capacity-error"
# How a Node names its Machine (the machine-api-operator's nodelink controller sets it).
MACHINE_NODE_ANNOTATION = "machine.openshift.io/machine"


class Boot(Enum):
    GOOD = "good"
    NEVER_JOINS = "never-joins"
    REFUSED = "refused"


@dataclass
class MachineProvider:
    """What boots, by image (`Boot`); an image not in the table boots like `GOOD`."""

    api: ApiClient
    images: Mapping[str, Boot]
    handled: set[str] = field(default_factory=set)
    created: list[str] = field(default_factory=list)  # every Machine seen, in order
    hold: bool = False  # True: the cloud does nothing yet (Machines wait for an instance)
    nodes: list[str] = field(default_factory=list)
    capi: bool = False  # also the Cluster API's Machines (openshift-cluster-api)

    async def step(self) -> None:
        if self.hold:
            return
        if self.capi:
            await self._capi_step()
        machines = (await kube_request(self.api, "GET", MACHINES_PATH))["items"]
        for machine in machines:
            name = machine["metadata"]["name"]
            if name in self.handled or machine["metadata"].get("deletionTimestamp"):
                continue
            self.handled.add(name)
            self.created.append(name)
            await self._boot(machine)
        # A Machine deleted: its instance and Node go with it (the machine controller's drain and delete).
        present = {m["metadata"]["name"] for m in machines}
        for node in [n for n in self.nodes if n not in present]:
            self.nodes.remove(node)
            await kube_request(self.api, "DELETE", f"/api/v1/nodes/{node}")

    async def _boot(self, machine: dict[str, Any]) -> None:
        name = machine["metadata"]["name"]
        image = machine_image(machine)
        if (machine["metadata"].get("labels") or {}).get(CAPACITY_LABEL):
            await self._status(name, {"phase": "Failed", "errorReason": "InsufficientResources",
                                      "errorMessage": "error launching instance: InsufficientInstanceCapacity: We "
                                                      "currently do not have sufficient m6i.xlarge capacity in the "
                                                      "Availability Zone you requested"})
            return
        boot = self.images.get(image or "", Boot.GOOD)
        if boot is Boot.REFUSED:
            await self._status(name, {"phase": "Failed", "errorReason": "InvalidConfiguration",
                                      "errorMessage": f"error launching instance: InvalidAMIID.NotFound: The image id "
                                                      f"'[{image}]' does not exist"})
            return
        await self._status(name, {"phase": "Provisioned", "providerStatus": {"instanceId": f"i-{name}"}})
        if boot is Boot.NEVER_JOINS:
            return
        await kube_request(self.api, "POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {MACHINE_NODE_ANNOTATION: f"{MAPI_NAMESPACE}/{name}"},
                         "labels": {"node-role.kubernetes.io/worker": ""}},
        })
        await kube_request(self.api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]}}, content_type=MERGE_PATCH)
        self.nodes.append(name)
        await self._status(name, {"phase": "Running", "nodeRef": {"kind": "Node", "name": name}})

    async def _status(self, name: str, status: dict[str, Any]) -> None:
        await kube_request(self.api, "PATCH", f"{MACHINES_PATH}/{name}/status", {"status": status},
                           content_type=MERGE_PATCH)

    async def _capi_step(self) -> None:
        machines = (await kube_request(self.api, "GET", CAPI_MACHINES_PATH))["items"]
        for machine in machines:
            name = machine["metadata"]["name"]
            if f"capi/{name}" in self.handled or machine["metadata"].get("deletionTimestamp"):
                continue
            self.handled.add(f"capi/{name}")
            self.created.append(name)
            await self._capi_boot(machine)

    async def _capi_boot(self, machine: dict[str, Any]) -> None:
        name = machine["metadata"]["name"]
        infra_name = machine["spec"]["infrastructureRef"]["name"]
        infra = await kube_request(self.api, "GET", f"{AWS_MACHINES_PATH}/{infra_name}")
        image = (infra["spec"].get("ami") or {}).get("id")
        boot = self.images.get(image or "", Boot.GOOD)
        if boot is Boot.REFUSED:
            failure = {"failureReason": "InvalidConfiguration",
                       "failureMessage": f"failed to create AWSMachine instance: InvalidAMIID.NotFound: The image id "
                                         f"'[{image}]' does not exist"}
            await self._capi_patch(f"{AWS_MACHINES_PATH}/{infra_name}/status", {"status": failure})
            await self._capi_patch(f"{CAPI_MACHINES_PATH}/{name}/status", {"status": {"phase": "Failed", **failure}})
            return
        provider_id = f"aws:///us-east-1a/i-{name}"
        await self._capi_patch(f"{AWS_MACHINES_PATH}/{infra_name}", {"spec": {"instanceID": f"i-{name}",
                                                                              "providerID": provider_id}})
        await self._capi_patch(f"{CAPI_MACHINES_PATH}/{name}", {"spec": {"providerID": provider_id}})
        await self._capi_patch(f"{CAPI_MACHINES_PATH}/{name}/status", {"status": {"phase": "Provisioned"}})
        if boot is Boot.NEVER_JOINS:
            return
        await self._join(name)
        await self._capi_patch(f"{CAPI_MACHINES_PATH}/{name}/status",
                               {"status": {"phase": "Running", "nodeRef": {"kind": "Node", "name": name}}})

    async def _join(self, name: str) -> None:
        """The Node of an instance that booted, pivoted and joined: Ready."""
        await kube_request(self.api, "POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
        })
        await kube_request(self.api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]}}, content_type=MERGE_PATCH)
        self.nodes.append(name)

    async def _capi_patch(self, path: str, body: dict[str, Any]) -> None:
        await kube_request(self.api, "PATCH", path, body, content_type=MERGE_PATCH)


@contextlib.asynccontextmanager
async def machine_provider(api: ApiClient, images: Mapping[str, Boot], every: float = 0.2,
                           hold: bool = False, capi: bool = False) -> AsyncIterator[MachineProvider]:
    provider = MachineProvider(api, images, hold=hold, capi=capi)

    async def loop() -> None:
        while True:
            await provider.step()
            await asyncio.sleep(every)

    async with running(loop()):
        yield provider


async def scale_up(api: ApiClient, machine_set: Mapping[str, Any], name: str,
                   extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One Machine from the MachineSet's template, owned by it, as its controller makes on a scale-up."""
    template = copy.deepcopy(machine_set["spec"]["template"])
    meta = machine_set["metadata"]
    labels = {**(template.get("metadata") or {}).get("labels", {}), **(extra_labels or {})}
    body = {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                     "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": template["spec"],
    }
    created: dict[str, Any] = await kube_request(api, "POST", MACHINES_PATH, body)
    return created


async def capi_scale_up(api: ApiClient, machine_set: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One CAPI Machine of the MachineSet, as its controller makes it: the AWSMachine cloned from the
    template the MachineSet names now (annotated with it), then the Machine owned by the MachineSet,
    labelled with its name, naming the AWSMachine."""
    meta, spec = machine_set["metadata"], machine_set["spec"]["template"]["spec"]
    template_name = spec["infrastructureRef"]["name"]
    template = await kube_request(api, "GET", f"{AWS_TEMPLATES_PATH}/{template_name}")
    await kube_request(api, "POST", AWS_MACHINES_PATH, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachine",
        "metadata": {"name": name, "namespace": CAPI_NAMESPACE,
                     "annotations": {"cluster.x-k8s.io/cloned-from-name": template_name}},
        "spec": copy.deepcopy(template["spec"]["template"]["spec"]),
    })
    labels = {**(machine_set["spec"]["template"].get("metadata") or {}).get("labels", {}),
              "cluster.x-k8s.io/set-name": meta["name"]}
    body = {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": CAPI_NAMESPACE, "labels": labels,
                     "ownerReferences": [{"apiVersion": machine_set["apiVersion"], "kind": "MachineSet",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {**copy.deepcopy(spec), "infrastructureRef": {
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachine", "name": name}},
    }
    created: dict[str, Any] = await kube_request(api, "POST", CAPI_MACHINES_PATH, body)
    return created


def machine_image(machine: Mapping[str, Any]) -> str | None:
    value = ((machine.get("spec") or {}).get("providerSpec") or {}).get("value") or {}
    ami = value.get("ami")
    return str(ami.get("id")) if isinstance(ami, dict) and ami.get("id") else None


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
