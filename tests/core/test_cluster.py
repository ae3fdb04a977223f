"""What the daemon reads from a cluster (core/cluster.py)."""

from __future__ import annotations

import pytest

from bootimage_controller.constants import INFRA_TEMPLATES
from bootimage_controller.core.cluster import (
    CAPI_MACHINE_READ,
    CAPI_VERIFICATION_READS,
    CLUSTER_READS,
    INFRA_MACHINE_READS,
    TEMPLATE_READS,
    VERIFICATION_READS,
    daemon_reads,
)


@pytest.mark.parametrize(("platform", "kinds", "infra_machines"), [
    ("AWS", {"AWSMachineTemplate"}, {"AWSMachine"}),
    ("GCP", {"GCPMachineTemplate"}, {"GCPMachine"}),
    ("Azure", {"AzureMachineTemplate"}, {"AzureMachine"}),
    ("VSphere", {"VSphereMachineTemplate"}, set()),  # CAPI vSphere pools are not judged
    ("BareMetal", set(), set()),
    ("None", set(), set()),
    # The Infrastructure could not be read: every kind, as before.
    (None, set(INFRA_TEMPLATES), {"AWSMachine", "GCPMachine", "AzureMachine"}),
])
def test_the_daemon_watches_the_template_kind_of_its_platform_only(platform: str | None, kinds: set[str],
                                                                    infra_machines: set[str]) -> None:
    reads = daemon_reads(platform)
    assert {r.kind for r in reads if r in TEMPLATE_READS} == kinds
    assert {r.kind for r in reads if r in INFRA_MACHINE_READS} == infra_machines
    # CAPI Machines only where their infrastructure machines are read too: nothing to judge else.
    assert (CAPI_MACHINE_READ in reads) is bool(infra_machines)
    # Everything `plan --from-cluster` reads, and the Machines and Nodes boot verification judges from.
    assert [r for r in reads if r not in (*TEMPLATE_READS, *CAPI_VERIFICATION_READS)] == [
        *(r for r in CLUSTER_READS if r not in TEMPLATE_READS), *VERIFICATION_READS]
