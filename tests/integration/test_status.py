"""Status reporting on a real API server: MachineConfiguration conditions, the ClusterOperator, Events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness.objects import apply, get_object, machine_configuration, machineset_from_fixture
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import (
    CLUSTEROPERATOR_PLURAL,
    CO_AVAILABLE,
    CO_DEGRADED,
    CO_UPGRADEABLE,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    CONFIG_GROUP,
    CONFIG_VERSION,
    DEFAULT_CLUSTER_OPERATOR,
    EVENT_HOT_LOOP,
    EVENT_TYPE_WARNING,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MAPI_NAMESPACE,
    OPERATOR_GROUP,
    OPERATOR_VERSION,
    ConditionReason,
)
from bootimage_controller.core.model import MachineResource
from bootimage_controller.core.status import (
    ClusterOperatorStatus,
    Outcome,
    PassSummary,
    Result,
    degraded_condition,
    progressing_condition,
)
from bootimage_controller.reconcile.event_lane import EventRecorder
from bootimage_controller.reconcile.status_writer import StatusWriter

pytestmark = pytest.mark.integration

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
FOREIGN = {
    "type": "MachineConfigurationManagedBootImagesDegraded",  # written by someone else
    "status": "False",
    "reason": "AsExpected",
    "message": "not ours",
    "lastTransitionTime": "2025-06-01T00:00:00Z",
}


def summary(*results: Result) -> PassSummary:
    return PassSummary.from_outcomes(
        Outcome("MachineSet", MAPI_NAMESPACE, f"ms-{i}", r, "boom" if r is Result.ERRORED else "")
        for i, r in enumerate(results)
    )


def mc_conditions(s: PassSummary) -> list[Any]:
    return [progressing_condition(s, NOW, None), degraded_condition(s, NOW, None)]


async def read_mc(api: k8s_client.ApiClient) -> dict[str, Any]:
    live = await get_object(api, machine_configuration())
    assert live is not None
    return live


def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in conditions}


class ConcurrentWriter:
    """CustomObjectsApi whose first status patch is preceded by another client's status write."""

    def __init__(self, api: k8s_client.ApiClient) -> None:
        self._custom: Any = k8s_client.CustomObjectsApi(api)
        self._raw = api
        self.armed = True

    async def get_cluster_custom_object(self, *args: Any, **kw: Any) -> Any:
        return await self._custom.get_cluster_custom_object(*args, **kw)

    async def create_cluster_custom_object(self, *args: Any, **kw: Any) -> Any:
        return await self._custom.create_cluster_custom_object(*args, **kw)

    async def patch_cluster_custom_object_status(self, *args: Any, **kw: Any) -> Any:
        if self.armed:
            self.armed = False
            live = await read_mc(self._raw)
            added = {**FOREIGN, "type": "AddedMeanwhile", "message": "written between our read and write"}
            live["status"]["conditions"].append(added)
            await self._custom.replace_cluster_custom_object_status(
                OPERATOR_GROUP, OPERATOR_VERSION, MACHINECONFIGURATION_PLURAL, MACHINECONFIGURATION_NAME, live
            )
        return await self._custom.patch_cluster_custom_object_status(*args, **kw)


async def test_conditions_land_next_to_foreign_ones(kube_api: k8s_client.ApiClient) -> None:
    await apply(kube_api, machine_configuration(status={"conditions": [FOREIGN]}))
    writer = StatusWriter(k8s_client.CustomObjectsApi(kube_api), cluster_operator="")
    automatic = {"mode": "Automatic", "automatic": {"ocpVersion": "4.16.0"}}
    writer.set_machineconfiguration(mc_conditions(summary(Result.RECONCILED, Result.SKIPPED)), automatic)
    await writer.flush()

    status = (await read_mc(kube_api))["status"]
    conds = by_type(status["conditions"])
    assert conds[FOREIGN["type"]] == FOREIGN
    assert conds[CONDITION_PROGRESSING]["message"] == (
        "Reconciled 1 of 2 MAPI MachineSets (1 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets"
    )
    assert conds[CONDITION_DEGRADED]["status"] == "False"
    assert status["bootImageSkewEnforcementStatus"] == automatic

    # the skew record is replaced whole: no stale ocpVersion next to the new rhcosVersion
    rhcos = {"mode": "Automatic", "automatic": {"rhcosVersion": "9.6.20251212-1"}}
    writer.set_machineconfiguration(mc_conditions(summary(Result.ERRORED, Result.SKIPPED)), rhcos)
    await writer.flush()
    status = (await read_mc(kube_api))["status"]
    conds = by_type(status["conditions"])
    assert conds[CONDITION_DEGRADED]["status"] == "True"
    assert conds[CONDITION_DEGRADED]["reason"] == ConditionReason.MACHINE_SET_ERRORS
    assert conds[FOREIGN["type"]] == FOREIGN
    assert status["bootImageSkewEnforcementStatus"] == rhcos

    # steady state: the same desired state again writes nothing
    writes, rv = writer.writes, (await read_mc(kube_api))["metadata"]["resourceVersion"]
    for _ in range(5):
        writer.set_machineconfiguration(mc_conditions(summary(Result.ERRORED, Result.SKIPPED)), rhcos)
    await writer.flush()
    assert writer.writes == writes
    assert (await read_mc(kube_api))["metadata"]["resourceVersion"] == rv


async def test_a_conflict_keeps_the_other_writers_condition(kube_api: k8s_client.ApiClient) -> None:
    await apply(kube_api, machine_configuration(status={"conditions": [FOREIGN]}))
    api = ConcurrentWriter(kube_api)
    writer = StatusWriter(api, cluster_operator="")
    writer.set_machineconfiguration(mc_conditions(summary(Result.RECONCILED)), None)
    await writer.flush()
    assert not api.armed
    types = [c["type"] for c in (await read_mc(kube_api))["status"]["conditions"]]
    assert types == [FOREIGN["type"], "AddedMeanwhile", CONDITION_PROGRESSING, CONDITION_DEGRADED]
    assert writer.writes == 2  # the 409, then the write on a fresh read


async def test_status_waits_for_a_missing_machineconfiguration(kube_api: k8s_client.ApiClient) -> None:
    writer = StatusWriter(k8s_client.CustomObjectsApi(kube_api), cluster_operator="")
    conditions = mc_conditions(summary(Result.RECONCILED))
    writer.set_machineconfiguration(conditions, None)
    await writer.flush()  # no error
    assert writer.writes == 0
    await apply(kube_api, machine_configuration())
    writer.set_machineconfiguration(conditions, None)  # the controller calls again when it appears
    await writer.flush()
    conds = by_type((await read_mc(kube_api))["status"]["conditions"])
    assert conds[CONDITION_PROGRESSING]["reason"] == ConditionReason.RECONCILED


async def test_cluster_operator_is_created_and_updated(kube_api: k8s_client.ApiClient) -> None:
    custom: Any = k8s_client.CustomObjectsApi(kube_api)
    writer = StatusWriter(custom)

    def co_status(synced: bool, degraded: bool) -> ClusterOperatorStatus:
        s = summary(Result.ERRORED if degraded else Result.RECONCILED)
        return ClusterOperatorStatus.build(
            synced=synced,
            progressing=progressing_condition(s, NOW, None),
            degraded=degraded_condition(s, NOW, None),
            verdict=None,
            now=NOW,
        )

    writer.set_cluster_operator(co_status(synced=False, degraded=False))
    await writer.flush()
    co = await custom.get_cluster_custom_object(
        CONFIG_GROUP, CONFIG_VERSION, CLUSTEROPERATOR_PLURAL, DEFAULT_CLUSTER_OPERATOR
    )
    conds = by_type(co["status"]["conditions"])
    assert set(conds) == {CO_AVAILABLE, "Progressing", CO_DEGRADED, CO_UPGRADEABLE}
    assert conds[CO_AVAILABLE]["status"] == "False"
    assert co["status"]["versions"][0]["name"] == "operator"
    assert {"group": "operator.openshift.io", "resource": "machineconfigurations", "name": "cluster"} in co[
        "status"
    ]["relatedObjects"]

    writer.set_cluster_operator(co_status(synced=True, degraded=True))
    await writer.flush()
    co = await custom.get_cluster_custom_object(
        CONFIG_GROUP, CONFIG_VERSION, CLUSTEROPERATOR_PLURAL, DEFAULT_CLUSTER_OPERATOR
    )
    conds = by_type(co["status"]["conditions"])
    assert conds[CO_AVAILABLE]["status"] == "True"
    assert (conds[CO_DEGRADED]["status"], conds[CO_DEGRADED]["reason"]) == ("True", "MachineSetErrors")
    assert writer.writes_by_object == {
        f"{CLUSTEROPERATOR_PLURAL}/{DEFAULT_CLUSTER_OPERATOR}": 1,
        f"{CLUSTEROPERATOR_PLURAL}/{DEFAULT_CLUSTER_OPERATOR}/status": 2,
    }


async def test_events_are_created_and_aggregated(kube_api: k8s_client.ApiClient) -> None:
    stored = await apply(
        kube_api, machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", name="worker-ev")
    )
    ms = MachineResource.from_object(stored)
    core: Any = k8s_client.CoreV1Api(kube_api)
    recorder = EventRecorder(core, host="test-pod")
    for _ in range(3):
        await recorder.emit(ms, EVENT_TYPE_WARNING, EVENT_HOT_LOOP, "reverted by someone 4 times")
    await recorder.emit(ms, EVENT_TYPE_WARNING, EVENT_HOT_LOOP, "a different message")

    events = await core.list_namespaced_event(MAPI_NAMESPACE, field_selector="involvedObject.name=worker-ev")
    by_message = {e.message: e for e in events.items}
    assert set(by_message) == {"reverted by someone 4 times", "a different message"}
    repeated = by_message["reverted by someone 4 times"]
    assert repeated.count == 3
    assert (repeated.type, repeated.reason) == ("Warning", EVENT_HOT_LOOP)
    assert repeated.involved_object.uid == ms.uid
    assert repeated.involved_object.kind == "MachineSet"
    assert repeated.source.component == "bootimage-controller"
    assert (recorder.created, recorder.aggregated, recorder.dropped) == (2, 2, 0)
