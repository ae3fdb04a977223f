"""The skew setting (API validation) and the mode in effect (SPEC section 5, reference 11.2)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import SkewMode
from bootimage_controller.core.skew.policy import (
    ManualMode,
    ManualSkew,
    SkewEnforcementStatus,
    SkewSetting,
    cluster_version_minor,
    effective_skew_mode,
    install_version_from_cluster_version,
    previous_status_of,
)
from bootimage_controller.core.skew.record import BootImageRecord
from bootimage_controller.core.skew.versions import OcpVersion
from bootimage_controller.errors import InputError

OCP_MSG = "ocpVersion must match the OCP semver compatible format of x.y.z"
RHCOS_MSG = (
    "rhcosVersion must match format [major].[minor].[datestamp(YYYYMMDD)]-[buildnumber] or must match "
    "legacy format [major].[minor].[timestamp(YYYYMMDDHHmm)]-[buildnumber]"
)
FIELD = "spec.bootImageSkewEnforcement"
INSTALL = OcpVersion(4, 12, 0)


# --- the setting ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, {}])
def test_unset_setting(value: Any) -> None:
    setting = SkewSetting.from_spec(value)
    assert not setting.is_set
    assert SkewSetting.from_machine_configuration({"spec": {"managedBootImages": {}}}) == SkewSetting()
    assert SkewSetting.from_machine_configuration(None) == SkewSetting()


def test_manual_and_none_settings() -> None:
    ocp = SkewSetting.from_spec({"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}})
    assert ocp == SkewSetting(SkewMode.MANUAL, ManualSkew(ManualMode.OCP_VERSION, "4.12.0"))
    rhcos = SkewSetting.from_machine_configuration(
        {
            "spec": {
                "bootImageSkewEnforcement": {
                    "mode": "Manual",
                    "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20251212-1"},
                }
            }
        }
    )
    assert rhcos.manual == ManualSkew(ManualMode.RHCOS_VERSION, "9.6.20251212-1")
    assert SkewSetting.from_spec({"mode": "None"}) == SkewSetting(SkewMode.NONE)


@pytest.mark.parametrize(
    ("value", "field", "problem"),
    [
        # pattern and length, with the OpenShift API's messages
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.13"}},
            f"{FIELD}.manual.ocpVersion",
            OCP_MSG,
        ),
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.13"}},
            f"{FIELD}.manual.ocpVersion",
            "should be at least 5 chars long",
        ),
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "v4.13.0"}},
            f"{FIELD}.manual.ocpVersion",
            OCP_MSG,
        ),
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.13.0-rc.1"}},
            f"{FIELD}.manual.ocpVersion",
            "may not be longer than 10",
        ),
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.13.0\n"}},
            f"{FIELD}.manual.ocpVersion",
            OCP_MSG,
        ),
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": 4.13}},
            f"{FIELD}.manual.ocpVersion",
            "must be of type string",
        ),
        (
            {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.2025121-1"}},
            f"{FIELD}.manual.rhcosVersion",
            RHCOS_MSG,
        ),
        (
            {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "43.82.202008010953.0"}},
            f"{FIELD}.manual.rhcosVersion",
            RHCOS_MSG,
        ),
        (
            {
                "mode": "Manual",
                "manual": {"mode": "RHCOSVersion", "rhcosVersion": "418.94.202410090804-0000"},
            },
            f"{FIELD}.manual.rhcosVersion",
            "may not be longer than 21",
        ),
        # the union rules
        ({"mode": "Manual"}, FIELD, "manual is required when mode is Manual, and forbidden otherwise"),
        (
            {"mode": "None", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}},
            FIELD,
            "manual is required when mode is Manual, and forbidden otherwise",
        ),
        (
            {"mode": "Manual", "manual": {"mode": "OCPVersion"}},
            f"{FIELD}.manual",
            "ocpVersion is required when mode is OCPVersion, and forbidden otherwise",
        ),
        (
            {
                "mode": "Manual",
                "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0", "rhcosVersion": "9.6.20251212-1"},
            },
            f"{FIELD}.manual",
            "rhcosVersion is required when mode is RHCOSVersion, and forbidden otherwise",
        ),
        (
            {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "ocpVersion": "4.12.0"}},
            f"{FIELD}.manual",
            "ocpVersion is required when mode is OCPVersion, and forbidden otherwise",
        ),
        # enums and shapes
        (
            {"mode": "Automatic"},
            f"{FIELD}.mode",
            'Unsupported value: \'Automatic\': supported values: "Manual", "None"',
        ),
        ({"manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}}, f"{FIELD}.mode", "Required value"),
        (
            {"mode": "Manual", "manual": {"mode": "OCP", "ocpVersion": "4.12.0"}},
            f"{FIELD}.manual.mode",
            "supported values",
        ),
        ({"mode": "Manual", "manual": "4.12.0"}, f"{FIELD}.manual", "expected an object"),
        ("Manual", FIELD, "expected an object"),
    ],
)
def test_invalid_settings_are_rejected_naming_object_and_field(value: Any, field: str, problem: str) -> None:
    with pytest.raises(InputError) as info:
        SkewSetting.from_spec(value)
    assert info.value.obj == "MachineConfiguration cluster"
    assert info.value.field == field
    assert problem in info.value.problem
    assert str(info.value).startswith(f"MachineConfiguration cluster: {field}: ")


# --- the mode in effect: every row of SPEC section 5 ------------------------------------------

UNSET = SkewSetting()
MANUAL_SPEC = SkewSetting(SkewMode.MANUAL, ManualSkew(ManualMode.RHCOS_VERSION, "9.6.20251212-1"))


@pytest.mark.parametrize(
    ("setting", "platform", "topology", "enrolled", "expected"),
    [
        (UNSET, "AWS", "HighlyAvailable", True, {"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}}),
        (UNSET, "GCP", "HighlyAvailable", True, {"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}}),
        (
            UNSET,
            "Azure",
            "HighlyAvailable",
            True,
            {"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}},
        ),
        (
            UNSET,
            "VSphere",
            "HighlyAvailable",
            True,
            {"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}},
        ),
        # Partial (or None) enrollment on a supported platform
        (
            UNSET,
            "AWS",
            "HighlyAvailable",
            False,
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}},
        ),
        # unsupported platforms
        (
            UNSET,
            "OpenStack",
            "HighlyAvailable",
            True,
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}},
        ),
        (
            UNSET,
            None,
            None,
            True,
            {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}},
        ),
        # single-node and bare metal
        (UNSET, "AWS", "SingleReplica", True, {"mode": "None"}),
        (UNSET, "BareMetal", "HighlyAvailable", False, {"mode": "None"}),
        # spec set: wins over everything
        (
            MANUAL_SPEC,
            "AWS",
            "HighlyAvailable",
            True,
            {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20251212-1"}},
        ),
        (
            MANUAL_SPEC,
            "BareMetal",
            "SingleReplica",
            False,
            {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": "9.6.20251212-1"}},
        ),
        (SkewSetting(SkewMode.NONE), "AWS", "HighlyAvailable", True, {"mode": "None"}),
    ],
)
def test_mode_derivation(
    setting: SkewSetting, platform: str | None, topology: str | None, enrolled: bool, expected: dict[str, Any]
) -> None:
    status = effective_skew_mode(
        setting,
        platform=platform,
        control_plane_topology=topology,
        all_machinesets_enrolled=enrolled,
        install_version=INSTALL,
        previous_status=None,
    )
    assert status.to_status() == expected
    assert status.explanation


def test_automatic_keeps_the_record_it_already_has() -> None:
    previous = SkewEnforcementStatus(
        SkewMode.AUTOMATIC, automatic=BootImageRecord(rhcos_version="9.6.20251212-1")
    )
    status = effective_skew_mode(
        UNSET,
        platform="AWS",
        control_plane_topology=None,
        all_machinesets_enrolled=True,
        install_version=INSTALL,
        previous_status=previous,
    )
    assert status.automatic == BootImageRecord(rhcos_version="9.6.20251212-1")
    # Coming from Manual, the record is seeded afresh from the install version.
    was_manual = SkewEnforcementStatus(SkewMode.MANUAL, manual=ManualSkew(ManualMode.OCP_VERSION, "4.18.0"))
    status = effective_skew_mode(
        UNSET,
        platform="AWS",
        control_plane_topology=None,
        all_machinesets_enrolled=True,
        install_version=INSTALL,
        previous_status=was_manual,
    )
    assert status.automatic == BootImageRecord(ocp_version="4.12.0")


def test_status_round_trips_and_invalid_status_is_ignored() -> None:
    mc = {
        "status": {
            "bootImageSkewEnforcementStatus": {
                "mode": "Automatic",
                "automatic": {"rhcosVersion": "9.6.20251212-1"},
            }
        }
    }
    previous = previous_status_of(mc)
    assert previous is not None and previous.to_status() == mc["status"]["bootImageSkewEnforcementStatus"]
    assert (
        previous_status_of(
            {"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {}}}}
        )
        is None
    )
    assert previous_status_of({"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic"}}}) is None
    assert previous_status_of({"status": {}}) is None
    with pytest.raises(InputError, match="at least one of ocpVersion or rhcosVersion is required"):
        SkewEnforcementStatus.from_status({"mode": "Automatic", "automatic": {}})


def test_merge_patch_drops_the_replaced_record_key() -> None:
    new = SkewEnforcementStatus(SkewMode.AUTOMATIC, automatic=BootImageRecord(rhcos_version="9.6.20251212-1"))
    patch = new.to_merge_patch({"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}})
    assert patch == {"mode": "Automatic", "automatic": {"rhcosVersion": "9.6.20251212-1", "ocpVersion": None}}
    to_none = SkewEnforcementStatus(SkewMode.NONE).to_merge_patch(
        {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.12.0"}}
    )
    assert to_none == {"mode": "None", "manual": None}


def test_after_pass_moves_only_the_automatic_record() -> None:
    auto = SkewEnforcementStatus(SkewMode.AUTOMATIC, automatic=BootImageRecord(ocp_version="4.12.0"))
    moved = auto.after_pass(
        skipped=0,
        errors=0,
        target_releases=["9.6.20251212-1"],
        configmap_release_version="4.21.0",
        install_version=INSTALL,
    )
    assert moved.automatic == BootImageRecord(rhcos_version="9.6.20251212-1")
    manual = SkewEnforcementStatus(SkewMode.MANUAL, manual=ManualSkew(ManualMode.OCP_VERSION, "4.12.0"))
    assert (
        manual.after_pass(
            skipped=0,
            errors=0,
            target_releases=["9.6.20251212-1"],
            configmap_release_version="4.21.0",
            install_version=INSTALL,
        )
        is manual
    )


# --- install version ----------------------------------------------------------------------------


def cv(*entries: tuple[str, Any]) -> dict[str, Any]:
    return {"status": {"history": [{"state": state, "version": version} for state, version in entries]}}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # newest first; the oldest Completed entry is the install version
        (
            cv(
                ("Completed", "4.16.3"),
                ("Partial", "4.15.9"),
                ("Completed", "4.14.2"),
                ("Completed", "4.12.10"),
            ),
            OcpVersion(4, 12, 10),
        ),
        (cv(("Partial", "4.16.3"), ("Completed", "4.13.4"), ("Partial", "4.12.0")), OcpVersion(4, 13, 4)),
        # none Completed: the oldest entry
        (cv(("Partial", "4.16.3"), ("Partial", "4.15.0-rc.2")), OcpVersion(4, 15, 0)),
        # nothing usable: unknown, never an invented 0.0.0
        (cv(), None),
        (cv(("Completed", "garbage")), None),
        (cv(("Completed", None)), None),
        ({"status": {"history": "nope"}}, None),
        (None, None),
    ],
)
def test_install_version(value: Any, expected: OcpVersion | None) -> None:
    assert install_version_from_cluster_version(value) == expected


def test_cluster_version_minor() -> None:
    assert cluster_version_minor(cv(("Partial", "4.18.3"), ("Completed", "4.17.1"))) == "4.18"
    assert cluster_version_minor(None) is None
    assert cluster_version_minor(cv(("Completed", "x"))) is None
