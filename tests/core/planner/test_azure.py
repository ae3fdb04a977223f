"""Azure rules: image set, Hyper-V generation, marketplace targets (reference section 6, Azure)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import ANNOTATION_AUTOSCALER_LABELS, Action, Reason

from .support import PSP, apply_changes, machineset, plan, without

LEGACY = "azure-x86_64-legacy-gallery-gen2-4.16.yaml"
NOPLAN = "azure-x86_64-marketplace-noplan-4.20.yaml"
IMAGE_FIELD = "spec.template.spec.providerSpec.value.image"
OLD_PAID = "4.17.2024100100"


def _psp(obj: dict[str, Any]) -> dict[str, Any]:
    psp: dict[str, Any] = obj["spec"]["template"]["spec"]["providerSpec"]["value"]
    return psp


def _with_image(image: Any, base: str = NOPLAN) -> dict[str, Any]:
    obj = machineset(base)
    _psp(obj)["image"] = image
    return obj


def _img(publisher: str, offer: str, sku: str, version: str, type_: str, resource_id: str = "") -> dict[str, str]:
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version, "resourceID": resource_id, "type": type_}


# Values from installer-release-4.22-marketplace-coreos-rhel-9.json (merged in cm-4.22).
NOPLAN_GEN1 = _img("azureopenshift", "aro4", "aro_420", "9.6.20251015", "MarketplaceNoPlan")
NOPLAN_GEN2 = _img("azureopenshift", "aro4", "420-v2", "9.6.20251015", "MarketplaceNoPlan")
NOPLAN_ARM = _img("azureopenshift", "aro4", "420-arm", "9.6.20251015", "MarketplaceNoPlan")


def _paid(publisher: str, product: str, gen1: bool, version: str = "4.18.2025031114") -> dict[str, str]:
    sku = f"rh-{product}-worker" + ("-gen1" if gen1 else "")
    return _img(publisher, f"rh-{product}-worker", sku, version, "MarketplaceWithPlan")


@pytest.mark.parametrize(
    ("current", "target"),
    [
        # Legacy uploaded images go to the unpaid image of the same generation.
        (_img("", "", "", "", "", "/resourceGroups/rg/providers/Microsoft.Compute/galleries/g/images/c-gen2/versions/latest"), NOPLAN_GEN2),
        (_img("", "", "", "", "", "/resourceGroups/rg/providers/Microsoft.Compute/images/c"), NOPLAN_GEN1),
        # "gen2" in the resource id is matched case-insensitively.
        (_img("", "", "", "", "", "/resourceGroups/rg/providers/Microsoft.Compute/images/c-Gen2"), NOPLAN_GEN2),
        # Unpaid images: "v2" in the SKU means Gen2.
        (_img("azureopenshift", "aro4", "aro_419", "9.6.20250101", "MarketplaceNoPlan"), NOPLAN_GEN1),
        (_img("azureopenshift", "aro4", "419-v2", "9.6.20250101", "MarketplaceNoPlan"), NOPLAN_GEN2),
        # Paid images keep their offer; "gen1" in the SKU means Gen1; redhat-limited is EMEA.
        (_paid("redhat", "ocp", gen1=False, version=OLD_PAID), _paid("redhat", "ocp", gen1=False)),
        (_paid("redhat", "opp", gen1=True, version=OLD_PAID), _paid("redhat", "opp", gen1=True)),
        (_paid("redhat", "oke", gen1=False, version=OLD_PAID), _paid("redhat", "oke", gen1=False)),
        (_paid("redhat-limited", "ocp", gen1=True, version=OLD_PAID), _paid("redhat-limited", "ocp", gen1=True)),
        (_paid("redhat-limited", "oke", gen1=False, version=OLD_PAID), _paid("redhat-limited", "oke", gen1=False)),
    ],
)
def test_image_set_and_generation(current: dict[str, str], target: dict[str, str]) -> None:
    obj = _with_image(current)
    d = plan(obj)
    assert (d.action, d.reason, d.target) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED, target)
    (change,) = d.changes
    assert (change.path, change.old, change.new) == ((*PSP, "image"), current, target)
    patched = apply_changes(obj, d.changes)
    assert without(patched, [change.path]) == without(obj, [change.path])
    again = plan(patched)
    assert (again.action, again.reason) == (Action.NOOP, Reason.UP_TO_DATE)


def test_aarch64_unpaid_image_is_gen2() -> None:
    obj = _with_image(_img("azureopenshift", "aro4", "419-arm", "9.6.20250101", "MarketplaceNoPlan"))
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=arm64"
    d = plan(obj)
    assert (d.action, d.target) == (Action.PATCH, NOPLAN_ARM)


def test_rhel10_gen2_sku_stays_gen2() -> None:
    # The RHEL 10 SKU `aro_5-0_x64_gen2` has no "v2": it must still read as Gen2.
    obj = _with_image(_img("azureopenshift", "aro4", "aro_5-0_x64_gen2", "10.2.20260423", "MarketplaceNoPlan"))
    obj["metadata"]["labels"]["machineconfiguration.openshift.io/osstream"] = "rhel-10"
    d = plan(obj, "4.22-rhel-10+mp")
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE)


def test_unknown_publisher_is_custom() -> None:
    d = plan(_with_image(_img("mycorp", "hardened-rhcos", "v1", "1.0.0", "")))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE)
    assert "mycorp" in d.message and d.changes == ()
    # redhat publisher with an offer that names no image set is custom too.
    d = plan(_with_image(_img("redhat", "rh-rhel", "rh-rhel9", "9.4.2024", "MarketplaceWithPlan")))
    assert d.reason == Reason.CUSTOM_BOOT_IMAGE


@pytest.mark.parametrize("arch", ["ppc64le", "s390x"])
def test_unsupported_architectures(arch: str) -> None:
    obj = machineset(NOPLAN)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = f"kubernetes.io/arch={arch}"
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNSUPPORTED_ARCHITECTURE)


@pytest.mark.parametrize("security_type", ["TrustedLaunch", "ConfidentialVM"])
def test_security_types_are_left_alone(security_type: str) -> None:
    obj = machineset(LEGACY)
    _psp(obj)["securityProfile"] = {"settings": {"securityType": security_type}}
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNSUPPORTED_SECURITY_TYPE)
    assert security_type in d.message


@pytest.mark.parametrize("profile", [{"settings": {}}, {"settings": {"securityType": ""}}, {}])
def test_empty_security_settings_are_fine(profile: Any) -> None:
    obj = machineset(LEGACY)
    _psp(obj)["securityProfile"] = profile
    assert plan(obj).action is Action.PATCH


def test_marketplace_data_missing_for_the_stream_variant_or_generation() -> None:
    d = plan(machineset(LEGACY), "cm-4.18")  # no marketplace block at all
    assert (d.action, d.reason) == (Action.SKIP, Reason.MARKETPLACE_DATA_MISSING)
    assert "marketplace" in d.message
    gen1 = _with_image(_img("", "", "", "", "", "/resourceGroups/rg/providers/Microsoft.Compute/images/c"))
    d = plan(gen1, "4.22-rhel-10+mp")  # main rhel-10 overlay: no-purchase-plan has Gen2 only
    assert (d.action, d.reason) == (Action.SKIP, Reason.MARKETPLACE_DATA_MISSING)
    assert "no-purchase-plan.hyperVGen1" in d.message
    paid = _with_image(_paid("redhat", "ocp", gen1=False, version=OLD_PAID))
    paid["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=arm64"
    d = plan(paid)  # aarch64 has no paid images
    assert (d.action, d.reason) == (Action.SKIP, Reason.MARKETPLACE_DATA_MISSING)


def test_noplan_fixture_is_up_to_date_against_marketplace_streams() -> None:
    for golden_id in ("4.21+mp", "4.22-rhel-9+mp", "cm-4.22", "cm-hs-5.0"):
        d = plan(machineset(NOPLAN), golden_id)
        assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE), golden_id
        assert d.current_release == "9.6.20251015"


def test_missing_resource_id_reads_as_empty() -> None:
    image = dict(NOPLAN_GEN2)
    del image["resourceID"]
    d = plan(_with_image(image))
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE)
    assert d.current == NOPLAN_GEN2  # shown as the API reads it


def test_missing_type_differs_from_the_target() -> None:
    image = dict(NOPLAN_GEN2)
    del image["type"]
    obj = _with_image(image)
    d = plan(obj)
    assert (d.action, d.target) == (Action.PATCH, NOPLAN_GEN2)
    (change,) = d.changes
    assert change.old == image  # the stored value, exactly, for a test-and-set patch


@pytest.mark.parametrize(
    ("image", "field"),
    [
        (None, IMAGE_FIELD),
        ("azureopenshift:aro4:420-v2:9.6.20251015", IMAGE_FIELD),
        ({**NOPLAN_GEN2, "sku": 420}, f"{IMAGE_FIELD}.sku"),
    ],
)
def test_malformed_image_names_the_field(image: Any, field: str) -> None:
    obj = _with_image(image)
    if image is None:
        del _psp(obj)["image"]
    d = plan(obj)
    assert (d.action, d.reason, d.field) == (Action.ERROR, Reason.INVALID_PROVIDER_SPEC, field)


def test_malformed_security_profile_names_the_field() -> None:
    obj = machineset(NOPLAN)
    _psp(obj)["securityProfile"] = {"settings": "TrustedLaunch"}
    d = plan(obj)
    assert (d.action, d.field) == (Action.ERROR, "spec.template.spec.providerSpec.value.securityProfile.settings")


def test_a_gallery_image_that_is_not_the_installers_upload_is_replaced_with_a_warning() -> None:
    """Issue 49: the MCO takes any resourceID for a legacy upload and replaces a customer's gallery
    image; so does this controller (to agree with it), and the decision says so with the fix."""
    from bootimage_controller.core.forecast import OPEN_GATE, Forecast

    installer = plan(machineset(LEGACY))
    assert installer.action is Action.PATCH and installer.warning is None
    custom = machineset(LEGACY)
    image = _psp(custom)["image"]
    image["resourceID"] = ("/subscriptions/0/resourceGroups/team/providers/Microsoft.Compute/galleries/team_gallery/"
                           "images/hardened-gen2/versions/1.0.0")
    d = plan(custom)
    assert d.action is Action.PATCH and d.warning is not None and "not the installer's upload" in d.warning
    assert "warning: image.resourceID" in d.message and "Partial machineResourceSelector" in d.message
    assert "not the installer's upload" in Forecast.build([d], OPEN_GATE).of(d).sentence()
