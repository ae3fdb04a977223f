"""The daemon's informers (reconcile/store.py)."""

from __future__ import annotations

from kubernetes_asyncio.client import ApiClient, Configuration

from bootimage_controller.constants import CAPI_VERSIONS
from bootimage_controller.core.cluster import CLUSTER_READS
from bootimage_controller.reconcile.loop import KeyList
from bootimage_controller.reconcile.store import InformerStore, build_informers
from bootimage_controller.reconcile.triggers import Triggers


async def test_on_aws_one_template_informer_and_every_handler_attaches() -> None:
    api = ApiClient(Configuration(host="https://127.0.0.1:6443"))
    try:
        everything = build_informers(api, CAPI_VERSIONS[-1])
        aws = build_informers(api, CAPI_VERSIONS[-1], "AWS")
        assert set(everything) - set(aws) == {"GCPMachineTemplate", "AzureMachineTemplate", "VSphereMachineTemplate"}
        assert {r.role for r in CLUSTER_READS} <= set(everything)
        # The triggers attach to whatever template informers there are.
        Triggers(InformerStore(aws), None, {}, KeyList(), lambda: None).attach(aws)  # type: ignore[arg-type]
        assert aws["AWSMachineTemplate"]._handlers
    finally:
        await api.close()
