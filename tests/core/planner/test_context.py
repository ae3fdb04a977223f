"""The planner's context on partial input: what is inferred, and what is left unknown (issue 13, item 5)."""

from __future__ import annotations

from typing import Any

from harness.objects import (
    bootimages_configmap,
    control_plane_node,
    infrastructure,
    machineset_from_fixture,
)

from bootimage_controller.core.cluster import ClusterObjects
from bootimage_controller.core.context import control_plane_arch_fact, planning_context, platform_fact
from bootimage_controller.core.enrollment import SelectionMode
from bootimage_controller.core.skew.policy import (
    SkewEnforcementStatus,
    SkewMode,
    SkewSetting,
    effective_skew_mode,
)
from bootimage_controller.core.skew.record import machineset_boot_image
from bootimage_controller.data import bundled_index

AWS = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "aws")
GCP = machineset_from_fixture("gcp-x86_64-us-central1-a-4.16.yaml", "gcp")


def objects(**kw: Any) -> ClusterObjects:
    return ClusterObjects(bootimages=bootimages_configmap(), **kw)


def test_infrastructure_names_the_platform_whatever_the_machinesets_say() -> None:
    fact = platform_fact(objects(infrastructure=infrastructure("GCP"), machines=(AWS,)))
    assert fact.value == "GCP"


def test_without_infrastructure_the_one_platform_of_the_providerspecs_is_used() -> None:
    ctx = planning_context(objects(machines=(AWS, AWS)), published=bundled_index())
    assert ctx.facts.platform == "AWS"
    assert ctx.platform_from_machines
    assert ctx.enrollment.machinesets.mode is SelectionMode.ALL  # AWS's default, not "no platform"
    assert "taken from the MachineSets' providerSpec kind" in ctx.explanation[1]


def test_several_platforms_without_infrastructure_is_unknown_and_says_which() -> None:
    fact = platform_fact(objects(machines=(AWS, GCP)))
    assert fact.value is None
    assert "AWS, GCP" in fact.origin


def test_control_plane_arch_is_the_most_common_whatever_the_order() -> None:
    nodes = [control_plane_node("c", "arm64"), control_plane_node("a", "amd64"), control_plane_node("b", "arm64")]
    for order in (nodes, list(reversed(nodes))):
        fact = control_plane_arch_fact(objects(nodes=tuple(order)))
        assert fact.value == "aarch64"
        assert "other control-plane Nodes report x86_64" in fact.origin


def test_control_plane_arch_default_says_it_is_a_default() -> None:
    fact = control_plane_arch_fact(objects())
    assert (fact.value, fact.origin.startswith("default")) == ("x86_64", True)


def test_unknown_install_version_invents_no_boot_image() -> None:
    assert machineset_boot_image({}, None, None, None, None) is None


def test_unknown_install_version_writes_no_invented_skew_record() -> None:
    for platform, mode in (("AWS", SkewMode.AUTOMATIC), ("OpenStack", SkewMode.MANUAL)):
        status = effective_skew_mode(
            SkewSetting(),
            platform=platform,
            control_plane_topology=None,
            all_machinesets_enrolled=True,
            install_version=None,
            previous_status=None,
        )
        assert status.mode is mode
        assert not status.complete
        assert status.to_merge_patch(None) is None  # the API would refuse it; nothing is invented
    kept = SkewEnforcementStatus.from_status({"mode": "Automatic", "automatic": {"ocpVersion": "4.16.3"}})
    status = effective_skew_mode(
        SkewSetting(), platform="AWS", control_plane_topology=None, all_machinesets_enrolled=True,
        install_version=None, previous_status=kept,
    )
    assert status.to_merge_patch(None) == {"mode": "Automatic", "automatic": {"ocpVersion": "4.16.3"}}
