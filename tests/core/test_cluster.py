"""What the daemon reads from a cluster (core/cluster.py)."""

from __future__ import annotations

import pytest

from bootimage_controller.constants import INFRA_TEMPLATES
from bootimage_controller.core.cluster import CLUSTER_READS, TEMPLATE_READS, VERIFICATION_READS, daemon_reads


@pytest.mark.parametrize(("platform", "kinds"), [
    ("AWS", {"AWSMachineTemplate"}),
    ("GCP", {"GCPMachineTemplate"}),
    ("Azure", {"AzureMachineTemplate"}),
    ("VSphere", {"VSphereMachineTemplate"}),
    ("BareMetal", set()),
    ("None", set()),
    (None, set(INFRA_TEMPLATES)),  # the Infrastructure could not be read: every kind, as before
])
def test_the_daemon_watches_the_template_kind_of_its_platform_only(platform: str | None, kinds: set[str]) -> None:
    reads = daemon_reads(platform)
    assert {r.kind for r in reads if r in TEMPLATE_READS} == kinds
    # Everything `plan --from-cluster` reads, and the Machines and Nodes boot verification judges from.
    assert [r for r in reads if r not in TEMPLATE_READS] == [
        *(r for r in CLUSTER_READS if r not in TEMPLATE_READS), *VERIFICATION_READS]
