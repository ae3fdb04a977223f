"""Where a MachineSet's boot image release comes from, the aleph minimum, the Automatic record."""

from __future__ import annotations

import io

import pytest

from bootimage_controller.constants import ANNOTATION_ALEPH_VERSION, ANNOTATION_RELEASE
from bootimage_controller.core.skew.record import (
    BootImageRecord,
    BootImageRelease,
    ReleaseSource,
    automatic_record_after_pass,
    machineset_boot_image,
    min_aleph,
    pick_cluster_boot_image,
    summarize_alephs,
)
from bootimage_controller.core.skew.verdict import SkewLimits, below_limit
from bootimage_controller.core.skew.versions import OcpVersion

INSTALL = OcpVersion(4, 12, 0)


def test_release_source_values_are_the_plan_json_names() -> None:
    assert [s.value for s in ReleaseSource] == [
        "MachineSetRecord",
        "GoldenData",
        "BundledIndex",
        "Cloud",
        "Aleph",
        "InstallVersion",
        "Manual",
        "Automatic",
    ]


# --- the order of sources (SPEC section 5) ----------------------------------------------------


def test_our_annotation_comes_first() -> None:
    got = machineset_boot_image(
        {ANNOTATION_RELEASE: "9.6.20251212-1"},
        "416.94.202405291527-0",
        "GoldenData",
        "413.92.202402131523-0",
        INSTALL,
    )
    assert got == BootImageRelease.rhcos("9.6.20251212-1", ReleaseSource.MACHINESET_RECORD)


@pytest.mark.parametrize("source", ["GoldenData", "BundledIndex", "Cloud"])
def test_then_the_identified_current_image(source: str) -> None:
    got = machineset_boot_image({}, "416.94.202405291527-0", source, "413.92.202402131523-0", INSTALL)
    assert got == BootImageRelease.rhcos("416.94.202405291527-0", ReleaseSource(source))


@pytest.mark.parametrize("source", [None, "Aleph", "Manual", "SomethingElse"])
def test_a_current_release_of_another_source_is_not_used(source: str | None) -> None:
    got = machineset_boot_image({}, "416.94.202405291527-0", source, "413.92.202402131523-0", INSTALL)
    assert got == BootImageRelease.rhcos("413.92.202402131523-0", ReleaseSource.ALEPH)


def test_then_the_aleph_then_the_install_version() -> None:
    assert (
        machineset_boot_image({}, None, None, "413.92.202402131523-0", INSTALL).source is ReleaseSource.ALEPH
    )
    got = machineset_boot_image({}, None, None, None, INSTALL)
    assert got == BootImageRelease.ocp("4.12.0", ReleaseSource.INSTALL_VERSION)
    assert got.to_json() == {"rhcosVersion": None, "ocpVersion": "4.12.0", "source": "InstallVersion"}


def test_values_that_are_not_rhcos_build_ids_fall_through() -> None:
    got = machineset_boot_image(
        {ANNOTATION_RELEASE: "garbage"}, "rhcos-custom", "Cloud", "32.20201002.dev.2", INSTALL
    )
    assert got == BootImageRelease.ocp("4.12.0", ReleaseSource.INSTALL_VERSION)


# --- control-plane alephs ---------------------------------------------------------------------


def nodes(*values: str | None) -> list[dict[str, str]]:
    return [{ANNOTATION_ALEPH_VERSION: v} if v is not None else {} for v in values]


def test_oldest_of_several_alephs_counts() -> None:
    assert (
        min_aleph(nodes("418.94.202410090804-0", "413.92.202402131523-0", "9.6.20251212-1"))
        == "413.92.202402131523-0"
    )
    # RHEL version first, then build order: 4.12's RHEL 8.6 is older than anything RHEL 9.
    assert (
        min_aleph(nodes("9.6.20250402-0", "412.86.202402272018-0", "48.84.202208021106-0"))
        == "48.84.202208021106-0"
    )
    # Same RHEL: the earlier build wins.
    assert min_aleph(nodes("9.6.20260112-0", "9.6.20251212-1", "9.6.20260217-1")) == "9.6.20251212-1"
    assert min_aleph(nodes("9.6.20251212-1", "9.6.20251212-0")) == "9.6.20251212-0"


def test_unparseable_alephs_are_ignored_with_a_reason() -> None:
    summary = summarize_alephs(nodes("32.20201002.dev.2", None, "9.6.20251212-1", "   "))
    assert summary.minimum == "9.6.20251212-1"
    assert [i.value for i in summary.ignored] == ["32.20201002.dev.2", "   "]
    assert all("not an RHCOS build id" in i.problem for i in summary.ignored)
    assert min_aleph(nodes("43.20260301.20.dev1")) is None
    assert min_aleph([]) is None


# --- clusterBootImage --------------------------------------------------------------------------


def test_cluster_boot_image_prefers_the_oldest_below_the_limit() -> None:
    limits = SkewLimits()
    releases = [
        BootImageRelease.rhcos("9.6.20251212-1", ReleaseSource.MACHINESET_RECORD),
        BootImageRelease.ocp("4.12.0", ReleaseSource.INSTALL_VERSION),
        BootImageRelease.rhcos("412.86.202402272018-0", ReleaseSource.CLOUD),
    ]
    # Both 4.12 values are below; the OCP version sorts before the RHCOS id of the same era.
    assert pick_cluster_boot_image(releases, lambda r: below_limit(r, limits)) == releases[1]
    ok = [releases[0], BootImageRelease.rhcos("416.94.202405291527-0", ReleaseSource.GOLDEN_DATA)]
    assert pick_cluster_boot_image(ok, lambda r: below_limit(r, limits)) == ok[1]
    assert pick_cluster_boot_image([], lambda r: True) is None


# --- the Automatic record after a pass (reference section 11.3) ------------------------------

CURRENT = BootImageRecord(ocp_version="4.14.0")


def after(
    skipped: int,
    errors: int,
    targets: list[str],
    release_version: str | None = "4.21.0-0.nightly-2025-12-01-000000",
) -> BootImageRecord | None:
    return automatic_record_after_pass(
        CURRENT,
        skipped=skipped,
        errors=errors,
        target_releases=targets,
        configmap_release_version=release_version,
        install_version=INSTALL,
    )


def test_clean_pass_records_the_oldest_target_release() -> None:
    assert after(0, 0, ["9.8.20260403-0", "9.6.20251212-1", "10.2.20260405-0"]) == BootImageRecord(
        rhcos_version="9.6.20251212-1"
    )


def test_clean_pass_without_rhcos_targets_records_the_configmap_release_version() -> None:
    assert after(0, 0, []) == BootImageRecord(ocp_version="4.21.0")
    # Build ids the API would refuse are not recorded (dot before the serial).
    assert after(0, 0, ["43.82.202008010953.0"]) == BootImageRecord(ocp_version="4.21.0")


@pytest.mark.parametrize("release_version", [None, "", "0.0.1-snapshot", "not-a-version"])
def test_clean_pass_without_a_usable_release_version_leaves_the_record(release_version: str | None) -> None:
    assert after(0, 0, [], release_version) == CURRENT


def test_skips_fall_back_to_the_install_version() -> None:
    assert after(1, 0, ["9.6.20251212-1"]) == BootImageRecord(ocp_version="4.12.0")


def test_errors_leave_the_record_untouched() -> None:
    assert after(1, 2, ["9.6.20251212-1"]) == CURRENT
    assert after(0, 1, ["9.6.20251212-1"]) == CURRENT


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # The unpaid marketplace image's version is the RHEL-aligned build's date: RHEL 9.6.
        ("9.6.20251015", BootImageRelease.rhcos("9.6.20251015", ReleaseSource.BUNDLED_INDEX)),
        # A paid image's version names its OCP minor: judged as OCP 4.18 (the MCO: major.minor only).
        ("4.18.2025031114", BootImageRelease.ocp("4.18.0", ReleaseSource.BUNDLED_INDEX)),
    ],
)
def test_azure_marketplace_versions_are_judged(version: str, expected: BootImageRelease) -> None:
    assert machineset_boot_image({}, version, "BundledIndex", "411.86.202308081056-0", INSTALL) == expected


def test_a_passed_over_value_comes_back_as_a_note_and_is_logged_once() -> None:
    """core/ logs nothing: a hand-edited annotation is passed over with a note its caller logs, once
    (status is recomputed every few seconds)."""
    from bootimage_controller.core.model import InputNote
    from bootimage_controller.observability import configure_logging, log_input_notes

    notes: list[InputNote] = []
    got = machineset_boot_image({ANNOTATION_RELEASE: "not-a-build"}, None, None, "413.92.202402131523-0", INSTALL,
                                notes)
    assert got is not None and got.source is ReleaseSource.ALEPH
    assert [n.event for n in notes] == [
        "the boot-image-release annotation is not an RHCOS build id; judged by the next evidence"]
    assert dict(notes[0].fields) == {"value": "not-a-build", "annotation": ANNOTATION_RELEASE}
    out = io.StringIO()
    configure_logging("json", stream=out)
    log_input_notes(notes)
    log_input_notes(notes)
    assert out.getvalue().count("not-a-build") == 1, out.getvalue()
