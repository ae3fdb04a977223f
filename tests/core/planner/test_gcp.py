"""GCP rules: every boot disk's image, RHCOS images only (reference section 6)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import ANNOTATION_AUTOSCALER_LABELS, Action, Reason
from bootimage_controller.core.index import PublishedImageIndex

from .support import PSP, apply_changes, facts_with, machineset, plan, without

MS = "gcp-x86_64-us-central1-a-4.16.yaml"
CUSTOM = "gcp-x86_64-custom-image.yaml"
RHCOS = "projects/rhcos-cloud/global/images/"
CURRENT = RHCOS + "rhcos-416-94-202405291527-0-gcp-x86-64"
TARGET = RHCOS + "rhcos-9-8-20260403-0-gcp-x86-64"  # 4.22 rhel-9 (fixture header)
DISKS = "spec.template.spec.providerSpec.value.disks"


def _disks(obj: dict[str, Any]) -> list[Any]:
    disks: list[Any] = obj["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"]
    return disks


def _boot(image: str, **extra: Any) -> dict[str, Any]:
    return {"autoDelete": True, "boot": True, "image": image, "sizeGb": 128, **extra}


def test_every_boot_disk_is_updated_and_data_disks_are_not() -> None:
    obj = machineset(MS)
    _disks(obj).extend([{"boot": False, "image": CURRENT, "sizeGb": 10}, _boot(CURRENT, type="pd-ssd")])
    d = plan(obj)
    assert d.action is Action.PATCH
    paths = [(*PSP, "disks", 0, "image"), (*PSP, "disks", 2, "image")]
    assert [c.path for c in d.changes] == paths
    assert all((c.old, c.new) == (CURRENT, TARGET) for c in d.changes)
    patched = apply_changes(obj, d.changes)
    assert _disks(patched)[1] == {"boot": False, "image": CURRENT, "sizeGb": 10}  # not a boot disk
    assert without(patched, paths) == without(obj, paths)


def test_only_outdated_boot_disks_change() -> None:
    obj = machineset(MS)
    _disks(obj).insert(0, _boot(TARGET))
    d = plan(obj)
    assert d.action is Action.PATCH
    assert [c.path for c in d.changes] == [(*PSP, "disks", 1, "image")]
    assert (d.field, d.current) == (f"{DISKS}[1].image", CURRENT)


def test_custom_boot_image_blocks_the_whole_machineset() -> None:
    d = plan(machineset(CUSTOM))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE)
    assert "my-hardened-rhcos-416" in d.message
    # One custom boot disk next to an RHCOS one: still hands off.
    obj = machineset(MS)
    _disks(obj).append(_boot("projects/redhat-marketplace-public/global/images/redhat-coreos-ocp-413-x86-64"))
    d = plan(obj)
    assert (d.action, d.reason, d.field) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE, f"{DISKS}[1].image")


def test_boot_disk_on_the_target_is_up_to_date() -> None:
    obj = machineset(MS)
    _disks(obj)[0]["image"] = TARGET
    assert plan(obj).action is Action.NOOP


@pytest.mark.parametrize("disks", [[], [{"boot": False, "image": CURRENT}], [{"boot": True, "image": ""}], None])
def test_no_boot_disk_is_an_unsupported_reference(disks: Any) -> None:
    obj = machineset(MS)
    if disks is None:
        del obj["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"]
    else:
        obj["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"] = disks
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNSUPPORTED_IMAGE_REFERENCE)


@pytest.mark.parametrize(
    ("disks", "field"),
    [
        ({"boot": True, "image": CURRENT}, DISKS),
        ("pd-ssd", DISKS),
        ([_boot(CURRENT), "second"], f"{DISKS}[1]"),
        ([{"boot": "true", "image": CURRENT}], f"{DISKS}[0].boot"),
        ([{"boot": True, "image": {"name": "x"}}], f"{DISKS}[0].image"),
    ],
)
def test_malformed_disks_name_the_field(disks: Any, field: str) -> None:
    obj = machineset(MS)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"] = disks
    d = plan(obj)
    assert (d.action, d.reason, d.field) == (Action.ERROR, Reason.INVALID_PROVIDER_SPEC, field)


def test_stream_without_gcp_image() -> None:
    obj = machineset(MS)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=ppc64le"
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.IMAGE_NOT_IN_STREAM)


def test_aarch64_target() -> None:
    obj = machineset(MS)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=arm64"
    d = plan(obj)
    assert d.target == RHCOS + "rhcos-9-8-20260403-0-gcp-aarch64"


def test_current_release_evidence() -> None:
    d = plan(machineset(MS))
    assert (d.current_release, d.current_release_source, d.location) == (
        "416.94.202405291527-0",
        "BundledIndex",
        "us-central1-a",
    )
    # An RHCOS image no stream file lists: its name spells the build id.
    obj = machineset(MS)
    _disks(obj)[0]["image"] = RHCOS + "rhcos-9-6-20250101-0-gcp-x86-64"
    d = plan(obj, facts=facts_with(published=PublishedImageIndex()))
    assert (d.action, d.current_release, d.current_release_source) == (Action.PATCH, "9.6.20250101-0", "Cloud")
