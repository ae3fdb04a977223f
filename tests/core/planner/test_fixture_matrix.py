"""Every MachineSet fixture against every stream fixture (SPEC section 2, offline planning).

Expected targets are copied from the fixture headers (`tests/fixtures/machinesets/*.yaml`) and, for
pairs the headers do not list, read by hand from the stream files; none is computed by the code
under test. Streams: the installer's stream files, the same merged with their marketplace overlay
(as the installer builds the ConfigMap), and the ConfigMap fixtures.
"""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import Action, Reason

from .support import ALL_GOLDEN, PSP, apply_changes, machineset, plan, without

PATCH, NOOP, SKIP = Action.PATCH, Action.NOOP, Action.SKIP
R = Reason

NO_MARKETPLACE = ("4.16-ga", "4.16", "4.18", "4.19", "4.21", "4.22-rhel-9", "4.22-rhel-10", "cm-4.18", "cm-hs-4.10")
WITH_MARKETPLACE_RHEL9 = ("4.21+mp", "4.22-rhel-9+mp", "cm-4.22", "cm-hs-5.0")
RHEL9_STREAMS = ("4.16-ga", "4.16", "4.18", "4.19", "4.21", "4.21+mp", "4.22-rhel-9", "4.22-rhel-9+mp")


def gcp_image(name: str) -> str:
    return f"projects/rhcos-cloud/global/images/{name}"


def azure_image(sku: str, version: str) -> dict[str, str]:
    return {
        "publisher": "azureopenshift",
        "offer": "aro4",
        "sku": sku,
        "version": version,
        "resourceID": "",
        "type": "MarketplaceNoPlan",
    }


NOPLAN_GEN2_96 = azure_image("420-v2", "9.6.20251015")  # azure-x86_64-marketplace-noplan-4.20.yaml header
NOPLAN_GEN2_102 = azure_image("aro_5-0_x64_gen2", "10.2.20260423")  # main marketplace/coreos-rhel-10.json
TEMPLATE = "mycluster-l2vzr-rhcos-generated-region-generated-zone"

# (action, reason, target as shown in plan -o json; None = not checked)
Expect = tuple[Action, str, Any]


def _aws(ami: str) -> dict[str, str]:
    return {"id": ami}


def _every(expect: Expect) -> dict[str, Expect]:
    return dict.fromkeys(ALL_GOLDEN, expect)


EXPECTED: dict[str, dict[str, Expect]] = {
    "aws-x86_64-us-east-1a-4.16.yaml": {
        "4.16-ga": (NOOP, R.UP_TO_DATE, _aws("ami-05483066c3caaccf5")),
        "4.16": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-009f29d08fb2f839b")),
        "4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-06ba758975c79332b")),
        "4.19": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0e0850e74100f0f31")),
        "4.21": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-04018496b0a1da2d2")),
        "4.21+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-04018496b0a1da2d2")),
        "4.22-rhel-9": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-06a6b025350ff1e23")),
        "4.22-rhel-9+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-06a6b025350ff1e23")),
        # A bare rhel-10 stream as the default: the RHEL 9 pool must not move implicitly.
        "4.22-rhel-10": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, _aws("ami-04b3d999e39d62c5b")),
        "4.22-rhel-10+mp": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, _aws("ami-04b3d999e39d62c5b")),
        "cm-4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-06ba758975c79332b")),
        "cm-4.22": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-06a6b025350ff1e23")),
        # RHEL 9 -> RHEL 8 golden data (4.10 payload): the golden data is the target, no ordering.
        "cm-hs-4.10": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0713d9bcf78401cd1")),
        "cm-hs-5.0": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-06a6b025350ff1e23")),
    },
    "aws-aarch64-us-east-2a-4.16.yaml": {
        "4.16-ga": (NOOP, R.UP_TO_DATE, _aws("ami-02f7e4a5dc66361bb")),
        "4.16": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0af1e6e1c328c940d")),
        "4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0f8d8bb2d4cc7681a")),
        "4.19": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-08066b4a2c0a88670")),
        "4.21": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0d08ccc7bcf77433d")),
        "4.21+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0d08ccc7bcf77433d")),
        "4.22-rhel-9": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0bd8dcdde4641811e")),
        "4.22-rhel-9+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0bd8dcdde4641811e")),
        "4.22-rhel-10": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, _aws("ami-0a3e0f0816d1ba247")),
        "4.22-rhel-10+mp": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, _aws("ami-0a3e0f0816d1ba247")),
        "cm-4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0f8d8bb2d4cc7681a")),
        "cm-4.22": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0bd8dcdde4641811e")),
        "cm-hs-4.10": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0b511d5d32d354b67")),
        "cm-hs-5.0": (SKIP, R.REGION_NOT_IN_STREAM, None),  # trimmed to us-east-1 and us-west-2
    },
    "aws-x86_64-me-south-1a-4.21.yaml": {
        "4.16-ga": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0f9c259bc4346599c")),
        "4.16": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-00454210850910a9a")),
        "4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0e629ecf0e9cdade1")),
        "4.19": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0bd9fd38420abcef7")),
        "4.21": (NOOP, R.UP_TO_DATE, _aws("ami-0569abe19529c8b10")),
        "4.21+mp": (NOOP, R.UP_TO_DATE, _aws("ami-0569abe19529c8b10")),
        "4.22-rhel-9": (SKIP, R.REGION_NOT_IN_STREAM, None),
        "4.22-rhel-9+mp": (SKIP, R.REGION_NOT_IN_STREAM, None),
        "4.22-rhel-10": (SKIP, R.REGION_NOT_IN_STREAM, None),
        "4.22-rhel-10+mp": (SKIP, R.REGION_NOT_IN_STREAM, None),
        "cm-4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-0e629ecf0e9cdade1")),
        "cm-4.22": (SKIP, R.REGION_NOT_IN_STREAM, None),
        "cm-hs-4.10": (PATCH, R.BOOT_IMAGE_OUTDATED, _aws("ami-018903dd2c601602e")),
        "cm-hs-5.0": (SKIP, R.REGION_NOT_IN_STREAM, None),
    },
    "aws-x86_64-ami-filters.yaml": _every((SKIP, R.UNSUPPORTED_IMAGE_REFERENCE, None)),
    "aws-x86_64-rhel-10-stream.yaml": {
        **dict.fromkeys(RHEL9_STREAMS, (SKIP, R.STREAM_NOT_AVAILABLE, None)),
        "4.22-rhel-10": (NOOP, R.UP_TO_DATE, _aws("ami-04b3d999e39d62c5b")),
        "4.22-rhel-10+mp": (NOOP, R.UP_TO_DATE, _aws("ami-04b3d999e39d62c5b")),
        "cm-4.18": (SKIP, R.STREAM_NOT_AVAILABLE, None),
        "cm-4.22": (NOOP, R.UP_TO_DATE, _aws("ami-04b3d999e39d62c5b")),
        "cm-hs-4.10": (SKIP, R.STREAM_NOT_AVAILABLE, None),
        "cm-hs-5.0": (NOOP, R.UP_TO_DATE, _aws("ami-04b3d999e39d62c5b")),
    },
    "gcp-x86_64-us-central1-a-4.16.yaml": {
        "4.16-ga": (NOOP, R.UP_TO_DATE, gcp_image("rhcos-416-94-202405291527-0-gcp-x86-64")),
        "4.16": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-416-94-202510081640-0-gcp-x86-64")),
        "4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-418-94-202602022246-0-gcp-x86-64")),
        "4.19": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-6-20260112-0-gcp-x86-64")),
        "4.21": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-6-20251212-1-gcp-x86-64")),
        "4.21+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-6-20251212-1-gcp-x86-64")),
        "4.22-rhel-9": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-8-20260403-0-gcp-x86-64")),
        "4.22-rhel-9+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-8-20260403-0-gcp-x86-64")),
        "4.22-rhel-10": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, gcp_image("rhcos-10-2-20260405-0-gcp-x86-64")),
        "4.22-rhel-10+mp": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, gcp_image("rhcos-10-2-20260405-0-gcp-x86-64")),
        "cm-4.18": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-418-94-202602022246-0-gcp-x86-64")),
        "cm-4.22": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-8-20260403-0-gcp-x86-64")),
        "cm-hs-4.10": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-410-84-202111111322-0-gcp-x86-64")),
        "cm-hs-5.0": (PATCH, R.BOOT_IMAGE_OUTDATED, gcp_image("rhcos-9-8-20260403-0-gcp-x86-64")),
    },
    "gcp-x86_64-custom-image.yaml": _every((SKIP, R.CUSTOM_BOOT_IMAGE, None)),
    "azure-x86_64-legacy-gallery-gen2-4.16.yaml": {
        **dict.fromkeys(NO_MARKETPLACE, (SKIP, R.MARKETPLACE_DATA_MISSING, None)),
        **dict.fromkeys(WITH_MARKETPLACE_RHEL9, (PATCH, R.BOOT_IMAGE_OUTDATED, NOPLAN_GEN2_96)),
        # The legacy image's release is unknown, so nothing stops the move to the default stream.
        "4.22-rhel-10+mp": (PATCH, R.BOOT_IMAGE_OUTDATED, NOPLAN_GEN2_102),
    },
    "azure-x86_64-marketplace-noplan-4.20.yaml": {
        **dict.fromkeys(NO_MARKETPLACE, (SKIP, R.MARKETPLACE_DATA_MISSING, None)),
        **dict.fromkeys(WITH_MARKETPLACE_RHEL9, (NOOP, R.UP_TO_DATE, NOPLAN_GEN2_96)),
        # The image is known RHEL 9.6 (bundled index); the default stream's is RHEL 10.2.
        "4.22-rhel-10+mp": (SKIP, R.STREAM_CHANGE_REQUIRES_LABEL, NOPLAN_GEN2_102),
    },
    "vsphere-x86_64-4.16.yaml": {
        "4.16-ga": (SKIP, R.VCENTER_UNAVAILABLE, "416.94.202405291527-0"),
        "4.16": (SKIP, R.VCENTER_UNAVAILABLE, "416.94.202510081640-0"),
        "4.18": (SKIP, R.VCENTER_UNAVAILABLE, "418.94.202602022246-0"),
        "4.19": (SKIP, R.VCENTER_UNAVAILABLE, "9.6.20260112-0"),
        "4.21": (SKIP, R.VCENTER_UNAVAILABLE, "9.6.20251212-1"),
        "4.21+mp": (SKIP, R.VCENTER_UNAVAILABLE, "9.6.20251212-1"),
        "4.22-rhel-9": (SKIP, R.VCENTER_UNAVAILABLE, "9.8.20260403-0"),
        "4.22-rhel-9+mp": (SKIP, R.VCENTER_UNAVAILABLE, "9.8.20260403-0"),
        "4.22-rhel-10": (SKIP, R.VCENTER_UNAVAILABLE, "10.2.20260405-0"),
        "4.22-rhel-10+mp": (SKIP, R.VCENTER_UNAVAILABLE, "10.2.20260405-0"),
        "cm-4.18": (SKIP, R.VCENTER_UNAVAILABLE, "418.94.202602022246-0"),
        "cm-4.22": (SKIP, R.VCENTER_UNAVAILABLE, "9.8.20260403-0"),
        "cm-hs-4.10": (SKIP, R.VCENTER_UNAVAILABLE, "410.84.202111111322-0"),
        "cm-hs-5.0": (SKIP, R.IMAGE_NOT_IN_STREAM, None),  # trimmed: no vmware artifact
    },
}

# Where each platform keeps its boot image (from the object root).
BOOT_FIELDS = {
    "AWS": [(*PSP, "ami")],
    "GCP": [(*PSP, "disks", 0, "image")],
    "Azure": [(*PSP, "image")],
    "VSphere": [(*PSP, "template")],
}

CASES = [(ms, g) for ms, by_stream in EXPECTED.items() for g in by_stream]


def test_the_table_covers_every_fixture_pair() -> None:
    from .support import MACHINESETS

    assert sorted(EXPECTED) == sorted(p.name for p in MACHINESETS.glob("*.yaml"))
    for ms, by_stream in EXPECTED.items():
        assert sorted(by_stream) == sorted(ALL_GOLDEN), ms


@pytest.mark.parametrize(("ms", "golden_id"), CASES)
def test_fixture_decision(ms: str, golden_id: str) -> None:
    obj = machineset(ms)
    d = plan(obj, golden_id)
    action, reason, target = EXPECTED[ms][golden_id]
    assert (d.action, d.reason) == (action, reason), d.message
    assert d.message
    if d.platform == "VSphere" and target is not None:
        assert d.target == {"template": TEMPLATE, "release": target}
        assert d.target_release == target
    elif target is not None:
        assert d.target == target
    if action is PATCH:
        _check_patch(obj, d.platform or "", d, golden_id)
    else:
        assert d.changes == ()


def _check_patch(obj: dict[str, Any], platform: str, d: Any, golden_id: str) -> None:
    fields = BOOT_FIELDS[platform]
    assert [c.path for c in d.changes] == fields
    assert d.field == ".".join(str(p) for p in fields[0]).replace(".0.", "[0].")
    patched = apply_changes(obj, d.changes)
    # Nothing but the boot image field changed: every other key, unknown ones included, survives.
    assert without(patched, fields) == without(obj, fields)
    assert patched != obj
    # Planning the patched object again finds it up to date (the patch converges, no hot loop).
    again = plan(patched, golden_id)
    assert (again.action, again.reason) == (NOOP, R.UP_TO_DATE), again.message


def test_json_shape_of_an_aws_patch() -> None:
    d = plan(machineset("aws-x86_64-us-east-1a-4.16.yaml"), "cm-4.22")
    out = d.to_json()
    assert out["field"] == "spec.template.spec.providerSpec.value.ami"
    assert out["current"] == {"id": "ami-05483066c3caaccf5"}
    assert out["target"] == {"id": "ami-06a6b025350ff1e23"}
    assert out["currentRelease"] == "416.94.202405291527-0"
    assert out["targetRelease"] == "9.8.20260403-0"
    assert (out["platform"], out["architecture"], out["stream"]) == ("AWS", "x86_64", "rhel-9")
    assert d.location == "us-east-1"
    assert d.current_release_source == "BundledIndex"


def test_json_shape_of_a_gcp_patch() -> None:
    d = plan(machineset("gcp-x86_64-us-central1-a-4.16.yaml"), "cm-4.22")
    out = d.to_json()
    assert out["field"] == "spec.template.spec.providerSpec.value.disks[0].image"
    assert out["current"] == gcp_image("rhcos-416-94-202405291527-0-gcp-x86-64")
    assert out["target"] == gcp_image("rhcos-9-8-20260403-0-gcp-x86-64")
    assert out["currentRelease"] == "416.94.202405291527-0"
    assert out["targetRelease"] == "9.8.20260403-0"
    assert d.location == "us-central1-a"


def test_json_shape_of_an_azure_patch() -> None:
    d = plan(machineset("azure-x86_64-legacy-gallery-gen2-4.16.yaml"), "cm-4.22")
    out = d.to_json()
    assert out["field"] == "spec.template.spec.providerSpec.value.image"
    assert out["current"]["resourceID"].endswith("/images/mycluster-9tq2n-gen2/versions/latest")
    assert out["target"] == NOPLAN_GEN2_96
    assert out["currentRelease"] is None
    assert out["targetRelease"] == "9.6.20251015"
    assert d.location == "eastus"


def test_json_shape_of_a_vsphere_skip() -> None:
    d = plan(machineset("vsphere-x86_64-4.16.yaml"), "cm-4.22")
    out = d.to_json()
    assert out["field"] == "spec.template.spec.providerSpec.value.template"
    assert out["current"] == {"template": TEMPLATE, "release": None}
    assert out["target"] == {"template": TEMPLATE, "release": "9.8.20260403-0"}
    assert out["targetRelease"] == "9.8.20260403-0"
