"""vSphere rules: decisions about the template VM; nothing is ever patched offline."""

from __future__ import annotations

from bootimage_controller.cloud.facts import CloudFacts, CloudImage, ImageKey
from bootimage_controller.constants import Action, Reason

from .support import facts_with, machineset, plan

MS = "vsphere-x86_64-4.16.yaml"
TEMPLATE = "mycluster-l2vzr-rhcos-generated-region-generated-zone"
KEY = ImageKey("VSphere", "vcenter.example.com", TEMPLATE)
TARGET_RELEASE = "9.8.20260403-0"  # cm-4.22 x86_64 artifacts.vmware.release


def _vcenter(release: str | None = None, error: str | None = None) -> CloudFacts:
    images = {} if release is None else {KEY: CloudImage(KEY, exists=True, available=True, release=release)}
    return CloudFacts(images=images, errors={KEY: error} if error else {})


def test_without_vcenter_the_plan_still_shows_the_target() -> None:
    d = plan(machineset(MS))
    assert (d.action, d.reason) == (Action.SKIP, Reason.VCENTER_UNAVAILABLE)
    assert d.current == {"template": TEMPLATE, "release": None}
    assert d.target == {"template": TEMPLATE, "release": TARGET_RELEASE}
    assert (d.target_release, d.location) == (TARGET_RELEASE, "vcenter.example.com")
    assert "vCenter" in d.message and d.changes == ()


def test_vcenter_template_at_the_target_is_up_to_date() -> None:
    d = plan(machineset(MS), facts=facts_with(_vcenter(TARGET_RELEASE), vcenter_available=True))
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE)
    assert d.current_release_source == "Cloud"


def test_vcenter_template_behind_needs_a_refresh_not_a_patch() -> None:
    d = plan(machineset(MS), facts=facts_with(_vcenter("416.94.202405291527-0"), vcenter_available=True))
    assert (d.action, d.reason) == (Action.SKIP, Reason.TEMPLATE_REFRESH_REQUIRED)
    assert d.current == {"template": TEMPLATE, "release": "416.94.202405291527-0"}
    assert d.changes == ()
    assert "rhcos-9.8.20260403-0-vmware.x86_64.ova" in d.message


def test_vcenter_without_an_answer_or_with_an_error() -> None:
    d = plan(machineset(MS), facts=facts_with(_vcenter(), vcenter_available=True))
    assert (d.action, d.reason) == (Action.SKIP, Reason.VCENTER_UNAVAILABLE)
    d = plan(machineset(MS), facts=facts_with(_vcenter(error="login failed"), vcenter_available=True))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CLOUD_UNAVAILABLE)
    assert "login failed" in d.message


def test_missing_template_is_invalid() -> None:
    obj = machineset(MS)
    del obj["spec"]["template"]["spec"]["providerSpec"]["value"]["template"]
    d = plan(obj)
    assert (d.action, d.reason, d.field) == (
        Action.ERROR,
        Reason.INVALID_PROVIDER_SPEC,
        "spec.template.spec.providerSpec.value.template",
    )


def test_stream_without_a_vmware_ova() -> None:
    d = plan(machineset(MS), "cm-hs-5.0")
    assert (d.action, d.reason) == (Action.SKIP, Reason.IMAGE_NOT_IN_STREAM)
