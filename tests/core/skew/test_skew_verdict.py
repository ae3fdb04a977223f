"""The skew verdict (SPEC section 5): limits, modes, the per-stream rule, precedence, JSON shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bootimage_controller.constants import LABEL_OSSTREAM, SKEW_DOCS_URL, SkewMode, SkewReason
from bootimage_controller.core.skew.policy import ManualMode, ManualSkew, SkewEnforcementStatus
from bootimage_controller.core.skew.record import BootImageRecord, BootImageRelease, ReleaseSource
from bootimage_controller.core.skew.verdict import (
    MachineSetSkewInput,
    SkewLimits,
    below_limit,
    evaluate_skew,
    judge,
)
from bootimage_controller.core.skew.versions import OcpVersion, RhelVersion
from bootimage_controller.errors import VersionError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aleph"
VERSIONS = json.loads((FIXTURES / "rhcos-versions.json").read_text())["versions"]
LIMITS = SkewLimits()
AUTOMATIC = SkewEnforcementStatus(SkewMode.AUTOMATIC, automatic=BootImageRecord(ocp_version="4.16.0"))
NONE = SkewEnforcementStatus(SkewMode.NONE)


def manual(mode: ManualMode, version: str) -> SkewEnforcementStatus:
    return SkewEnforcementStatus(SkewMode.MANUAL, manual=ManualSkew(mode, version))


def ms(
    name: str, value: str, source: ReleaseSource = ReleaseSource.GOLDEN_DATA, label: str | None = None
) -> MachineSetSkewInput:
    return MachineSetSkewInput(name, label, BootImageRelease.rhcos(value, source))


def verdict(
    status: SkewEnforcementStatus,
    *machinesets: MachineSetSkewInput,
    degraded: bool = False,
    minor: str | None = "4.18",
) -> Any:
    return evaluate_skew(status, list(machinesets), LIMITS, degraded, "1 Degraded MAPI MachineSets", minor)


def test_default_limits_are_the_mco_values() -> None:
    assert LIMITS.to_json() == {"ocpVersion": "4.13.0", "rhelVersion": "9.2"}
    assert SkewLimits.from_flags("4.14.0", "9.4") == SkewLimits(OcpVersion(4, 14, 0), RhelVersion(9, 4))
    with pytest.raises(VersionError, match="--skew-rhel-limit"):
        SkewLimits.from_flags(rhel="nine")


# Every real build id of the fixture table, judged by the RHEL version it implies (limit 9.2).
@pytest.mark.parametrize("row", VERSIONS, ids=[r["version"] for r in VERSIONS])
def test_every_real_build_id_is_judged_by_its_rhel_version(row: dict[str, Any]) -> None:
    release = BootImageRelease.rhcos(row["version"], ReleaseSource.GOLDEN_DATA)
    expected_below = RhelVersion.parse(row["rhel"]) < RhelVersion(9, 2)
    assert below_limit(release, LIMITS) is expected_below
    result = verdict(AUTOMATIC, ms("worker-a", row["version"]))
    assert result.upgradeable is not expected_below


@pytest.mark.parametrize(
    ("build_id", "held"),
    [
        ("413.92.202402131523-0", False),  # RHEL 9.2: exactly the limit
        ("411.86.202308081056-0", True),  # RHEL 8.6
        ("48.84.202208021106-0", True),  # RHEL 8.4
        ("9.0.20251023-0", True),  # RHEL-aligned 9.0
        ("9.6.20251212-1", False),
        ("10.2.20260405-0", False),
    ],
)
def test_rhcos_build_ids_against_the_rhel_limit(build_id: str, held: bool) -> None:
    result = verdict(AUTOMATIC, ms("worker-a", build_id))
    assert result.upgradeable is not held
    if held:
        assert result.reason is SkewReason.CLUSTER_BOOT_IMAGE_SKEW_ERROR
        rhel = judge(BootImageRelease.rhcos(build_id, ReleaseSource.GOLDEN_DATA), LIMITS).rhel
        assert f"RHCOS boot image version {build_id}(RHEL version: {rhel})" in result.message
        assert "below the minimum required RHEL version 9.2" in result.message
        assert SKEW_DOCS_URL.format(version="4.18") in result.message
        assert "update your boot images or disable boot image skew enforcement" in result.message
    else:
        assert result.reason is SkewReason.AS_EXPECTED


@pytest.mark.parametrize(("version", "held"), [("4.12.0", True), ("4.13.0", False), ("4.14.0", False)])
def test_manual_ocp_version_is_what_is_judged(version: str, held: bool) -> None:
    # The MachineSets boot a current image, but in Manual mode the administrator's value counts.
    result = verdict(manual(ManualMode.OCP_VERSION, version), ms("worker-a", "9.6.20251212-1"))
    assert result.upgradeable is not held
    assert result.cluster_boot_image == BootImageRelease.ocp(version, ReleaseSource.MANUAL)
    if held:
        assert result.reason is SkewReason.CLUSTER_BOOT_IMAGE_SKEW_ERROR
        assert (
            f"OCP boot image version {version}, which is below the minimum required version 4.13.0"
            in result.message
        )


def test_manual_rhcos_version_is_judged_by_rhel() -> None:
    result = verdict(manual(ManualMode.RHCOS_VERSION, "412.86.202402272018-0"))
    assert not result.upgradeable
    assert "(RHEL version: 8.6)" in result.message
    assert verdict(manual(ManualMode.RHCOS_VERSION, "414.92.202407091253-0")).upgradeable


@pytest.mark.parametrize("value", ["48.84.202208021106-0", "9.0.20251023-0", "410.8.20190520.0"])
def test_mode_none_never_holds(value: str) -> None:
    result = verdict(
        NONE, ms("worker-a", value), ms("worker-b", "9.6.20251212-1", label="rhel-10"), degraded=True
    )
    assert result.upgradeable
    assert result.reason is SkewReason.AS_EXPECTED
    assert result.mode is SkewMode.NONE
    # The stream mismatch is still reported, for the Warning event and for plan.
    assert result.offenders == ("worker-b",)
    assert "worker-b" in result.message


def test_rhel_10_label_on_a_rhel_9_image_holds_whatever_the_limits() -> None:
    result = verdict(
        AUTOMATIC,
        ms("openshift-machine-api/workers-rhel10", "9.6.20251212-1", label="rhel-10"),
        ms("openshift-machine-api/workers", "9.6.20251212-1", label="rhel-9"),
    )
    assert not result.upgradeable
    assert result.reason is SkewReason.CLUSTER_BOOT_IMAGE_SKEW_ERROR
    assert result.offenders == ("openshift-machine-api/workers-rhel10",)
    assert (
        f"MachineSet openshift-machine-api/workers-rhel10 is labelled {LABEL_OSSTREAM}=rhel-10"
        in result.message
    )
    assert "RHEL 9.6" in result.message
    assert "openshift-machine-api/workers is" not in result.message


def test_stream_rule_also_holds_in_manual_mode() -> None:
    result = verdict(manual(ManualMode.OCP_VERSION, "4.20.0"), ms("w10", "9.8.20260403-0", label="rhel-10"))
    assert not result.upgradeable
    assert result.offenders == ("w10",)


@pytest.mark.parametrize("source", [ReleaseSource.ALEPH, ReleaseSource.INSTALL_VERSION])
def test_cluster_wide_guesses_do_not_convict_a_machineset_of_a_stream_mismatch(source: ReleaseSource) -> None:
    # An aleph (the control plane's install image) says nothing about this MachineSet's image.
    result = verdict(AUTOMATIC, ms("w10", "9.6.20251212-1", source=source, label="rhel-10"))
    assert result.upgradeable
    assert result.offenders == ()


def test_rhel_10_image_under_rhel_10_label_is_fine_and_unlabelled_is_not_judged() -> None:
    result = verdict(AUTOMATIC, ms("w10", "10.2.20260405-0", label="rhel-10"), ms("w", "10.2.20260405-0"))
    assert result.upgradeable
    assert result.offenders == ()


def test_degraded_holds_in_automatic_but_the_skew_error_wins() -> None:
    degraded = verdict(AUTOMATIC, ms("w", "9.6.20251212-1"), degraded=True)
    assert not degraded.upgradeable
    assert degraded.reason is SkewReason.BOOT_IMAGE_UPDATE_DEGRADED
    assert degraded.message == (
        "Upgrades have been disabled due to boot image update failures: boot image controller is "
        "degraded: 1 Degraded MAPI MachineSets"
    )
    both = verdict(AUTOMATIC, ms("w", "411.86.202308081056-0"), degraded=True)
    assert both.reason is SkewReason.CLUSTER_BOOT_IMAGE_SKEW_ERROR
    # Degraded only matters in Automatic mode (the MCO's checkBootImageControllerReady).
    assert verdict(manual(ManualMode.OCP_VERSION, "4.16.0"), degraded=True).upgradeable


def test_cluster_boot_image_is_the_oldest_below_the_limit_else_the_oldest() -> None:
    result = verdict(
        AUTOMATIC,
        ms("a", "9.6.20251212-1", ReleaseSource.MACHINESET_RECORD),
        ms("b", "412.86.202402272018-0", ReleaseSource.CLOUD),
        ms("c", "48.84.202208021106-0", ReleaseSource.ALEPH),
        ms("d", "416.94.202405291527-0", ReleaseSource.BUNDLED_INDEX),
    )
    assert result.cluster_boot_image == BootImageRelease.rhcos("48.84.202208021106-0", ReleaseSource.ALEPH)
    assert result.below_limit == ("b", "c")
    assert "MachineSets below the limit: b, c" in result.message
    fine = verdict(
        AUTOMATIC,
        ms("a", "9.6.20251212-1", ReleaseSource.MACHINESET_RECORD),
        ms("d", "416.94.202405291527-0", ReleaseSource.BUNDLED_INDEX),
    )
    assert fine.cluster_boot_image == BootImageRelease.rhcos(
        "416.94.202405291527-0", ReleaseSource.BUNDLED_INDEX
    )
    assert fine.upgradeable


def test_install_version_fallback_is_judged_as_an_ocp_version() -> None:
    old = MachineSetSkewInput(
        "w", None, BootImageRelease.ocp(OcpVersion(4, 12, 0), ReleaseSource.INSTALL_VERSION)
    )
    result = verdict(AUTOMATIC, old, ms("x", "9.6.20251212-1"))
    assert not result.upgradeable
    assert result.cluster_boot_image == BootImageRelease.ocp("4.12.0", ReleaseSource.INSTALL_VERSION)
    assert "OCP boot image version 4.12.0" in result.message


def test_automatic_without_machinesets_judges_the_status_record() -> None:
    status = SkewEnforcementStatus(SkewMode.AUTOMATIC, automatic=BootImageRecord(ocp_version="4.12.3"))
    result = verdict(status)
    assert not result.upgradeable
    assert result.cluster_boot_image == BootImageRelease.ocp("4.12.3", ReleaseSource.AUTOMATIC)


def test_unparseable_value_is_held_not_silently_allowed() -> None:
    release = BootImageRelease.rhcos("99.99.202401010000-0", ReleaseSource.MANUAL)
    assert below_limit(release, LIMITS)
    result = verdict(manual(ManualMode.RHCOS_VERSION, "99.99.202401010000-0"))
    assert not result.upgradeable
    assert "cannot be judged" in result.message


def test_docs_url_uses_latest_when_the_cluster_version_is_unknown() -> None:
    result = verdict(AUTOMATIC, ms("w", "48.84.202208021106-0"), minor=None)
    assert SKEW_DOCS_URL.format(version="latest") in result.message
    assert (
        SKEW_DOCS_URL.format(version="4.16")
        in verdict(AUTOMATIC, ms("w", "48.84.202208021106-0"), minor="4.16.3").message
    )


def test_to_json_is_exactly_the_plan_skew_object() -> None:
    result = verdict(AUTOMATIC, ms("w", "9.6.20251212-1", ReleaseSource.MACHINESET_RECORD))
    out = result.to_json()
    assert list(out) == ["mode", "clusterBootImage", "limit", "upgradeable", "reason", "message"]
    assert out["mode"] == "Automatic"
    assert out["clusterBootImage"] == {
        "rhcosVersion": "9.6.20251212-1",
        "ocpVersion": None,
        "source": "MachineSetRecord",
    }
    assert out["limit"] == {"ocpVersion": "4.13.0", "rhelVersion": "9.2"}
    assert out["upgradeable"] is True
    assert out["reason"] == "AsExpected"
    assert isinstance(out["message"], str) and out["message"]
    json.dumps(out)  # plain JSON types only
    assert verdict(NONE).to_json()["clusterBootImage"] is None


def test_counted_skips_are_named_with_their_reason() -> None:
    left = MachineSetSkewInput("ns/cvm", None, BootImageRelease.rhcos("411.86.202308081056-0", ReleaseSource.ALEPH), "UnsupportedSecurityType")
    held = verdict(AUTOMATIC, left, ms("ns/ok", "9.6.20251212-1"))
    assert not held.upgradeable
    assert "MachineSets below the limit: ns/cvm (skipped: UnsupportedSecurityType)" in held.message
    fine = MachineSetSkewInput("ns/cvm", None, BootImageRelease.rhcos("9.6.20251212-1", ReleaseSource.ALEPH), "MarketplaceDataMissing")
    allowed = verdict(AUTOMATIC, fine)
    assert allowed.upgradeable
    assert allowed.skipped == ("ns/cvm (skipped: MarketplaceDataMissing)",)
    assert "ns/cvm (skipped: MarketplaceDataMissing)" in allowed.message
    # Manual mode judges the administrator's value, not MachineSets: no list.
    assert verdict(manual(ManualMode.RHCOS_VERSION, "9.6.20251212-1"), fine).skipped == ()
