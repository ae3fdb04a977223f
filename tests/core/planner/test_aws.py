"""AWS rules: the `ami` field, known RHCOS evidence, Marketplace AMIs (reference section 6)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import ANNOTATION_AUTOSCALER_LABELS, Action, Reason
from bootimage_controller.core.cloud.facts import CloudFacts, CloudImage, ImageKey, MarketplaceCandidates
from bootimage_controller.core.index import PublishedImageIndex

from .support import PSP, apply_changes, facts_with, machineset, plan, stream_doc, without

MS = "aws-x86_64-us-east-1a-4.16.yaml"
TARGET_422 = "ami-06a6b025350ff1e23"  # 4.22 rhel-9 us-east-1 (fixture header)
UNKNOWN_AMI = "ami-0123456789abcdef0"
RED_HAT = "531415883065"
MARKETPLACE = "679593333241"
PRODUCT = "59ead7de-2540-4653-a8b0-fa7926d5c845"
AMI_FIELD = "spec.template.spec.providerSpec.value.ami"


def _psp(obj: dict[str, Any]) -> dict[str, Any]:
    psp: dict[str, Any] = obj["spec"]["template"]["spec"]["providerSpec"]["value"]
    return psp


def _with_ami(ami: Any) -> dict[str, Any]:
    obj = machineset(MS)
    _psp(obj)["ami"] = ami
    return obj


def _key(ami: str, region: str = "us-east-1") -> ImageKey:
    return ImageKey("AWS", region, ami)


def _image(ami: str, owner: str, region: str = "us-east-1", **kw: Any) -> CloudImage:
    return CloudImage(_key(ami, region), exists=True, available=True, owner=owner, **kw)


# --- image references ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ami",
    [
        {"filters": [{"name": "tag:Name", "values": ["x-ami-us-east-1"]}]},
        {"arn": "arn:aws:ec2:us-east-1::image/ami-05483066c3caaccf5"},
        {"id": ""},
        None,
    ],
)
def test_no_ami_id_is_an_unsupported_reference(ami: Any) -> None:
    obj = _with_ami(ami)
    if ami is None:
        del _psp(obj)["ami"]
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNSUPPORTED_IMAGE_REFERENCE)
    assert d.field == AMI_FIELD and d.changes == ()


@pytest.mark.parametrize(("ami", "field"), [({"id": 42}, f"{AMI_FIELD}.id"), ("ami-123", AMI_FIELD)])
def test_mistyped_ami_is_invalid(ami: Any, field: str) -> None:
    d = plan(_with_ami(ami))
    assert (d.action, d.reason, d.field) == (Action.ERROR, Reason.INVALID_PROVIDER_SPEC, field)


def test_patch_replaces_the_whole_ami_object_and_nothing_else() -> None:
    obj = _with_ami({"id": "ami-05483066c3caaccf5", "arn": "stale"})
    _psp(obj)["someFutureField"] = {"keep": ["me"]}
    d = plan(obj)
    assert d.action is Action.PATCH
    assert d.current == {"id": "ami-05483066c3caaccf5", "arn": "stale"}
    (change,) = d.changes
    assert (change.path, change.new) == ((*PSP, "ami"), {"id": TARGET_422})
    patched = apply_changes(obj, d.changes)
    assert _psp(patched)["ami"] == {"id": TARGET_422}
    assert _psp(patched)["someFutureField"] == {"keep": ["me"]}
    assert without(patched, [change.path]) == without(obj, [change.path])


# --- stream side ------------------------------------------------------------------------------------


def test_stream_without_aws_images() -> None:
    obj = machineset(MS)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=ppc64le"
    d = plan(obj, "cm-4.22")
    assert (d.action, d.reason) == (Action.SKIP, Reason.IMAGE_NOT_IN_STREAM)
    assert "ppc64le" in d.message


def test_region_not_in_stream_keeps_what_is_known() -> None:
    d = plan(machineset("aws-x86_64-me-south-1a-4.21.yaml"), "cm-4.22")
    assert (d.action, d.reason) == (Action.SKIP, Reason.REGION_NOT_IN_STREAM)
    assert "me-south-1" in d.message
    assert d.current == {"id": "ami-0569abe19529c8b10"}
    assert (d.current_release, d.current_release_source) == ("9.6.20251212-1", "BundledIndex")
    assert d.location == "me-south-1"


# --- is the current AMI RHCOS? ------------------------------------------------------------------------


def test_known_from_the_golden_data_of_another_stream() -> None:
    obj = _with_ami({"id": "ami-04b3d999e39d62c5b"})  # rhel-10 us-east-1, in data.streams
    obj["metadata"]["labels"]["machineconfiguration.openshift.io/osstream"] = "rhel-9"
    d = plan(obj, "cm-4.22", facts_with(published=PublishedImageIndex()))
    assert d.action is Action.PATCH
    assert (d.current_release, d.current_release_source) == ("10.2.20260405-0", "GoldenData")


def test_known_from_the_bundled_index() -> None:
    d = plan(machineset(MS), "cm-4.22")
    assert (d.current_release, d.current_release_source) == ("416.94.202405291527-0", "BundledIndex")
    # The same AMI without the index (and without cloud answers) cannot be told apart offline.
    d = plan(machineset(MS), "cm-4.22", facts_with(published=PublishedImageIndex()))
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)


def test_unknown_ami_offline_says_how_to_resolve() -> None:
    d = plan(_with_ami({"id": UNKNOWN_AMI}))
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)
    assert "cloud verification" in d.message and UNKNOWN_AMI in d.message
    assert d.target == {"id": TARGET_422}  # still shows where it would go
    assert d.changes == ()


def test_red_hat_owned_ami_per_ec2_is_rhcos() -> None:
    cloud = CloudFacts(
        images={
            _key(UNKNOWN_AMI): _image(UNKNOWN_AMI, RED_HAT, name="rhcos-9.6.20250101-0-x86_64"),
            _key(TARGET_422): _image(TARGET_422, RED_HAT),
        }
    )
    d = plan(_with_ami({"id": UNKNOWN_AMI}), facts=facts_with(cloud, ["AWS"]))
    assert (d.action, d.target) == (Action.PATCH, {"id": TARGET_422})
    assert (d.current_release, d.current_release_source) == ("9.6.20250101-0", "Cloud")


def test_ami_of_another_owner_is_custom() -> None:
    cloud = CloudFacts(images={_key(UNKNOWN_AMI): _image(UNKNOWN_AMI, "123456789012")})
    d = plan(_with_ami({"id": UNKNOWN_AMI}), facts=facts_with(cloud, ["AWS"]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE)
    assert "123456789012" in d.message


def test_ami_missing_in_ec2_is_unknown() -> None:
    cloud = CloudFacts(images={_key(UNKNOWN_AMI): CloudImage(_key(UNKNOWN_AMI), exists=False)})
    d = plan(_with_ami({"id": UNKNOWN_AMI}), facts=facts_with(cloud, ["AWS"]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)
    assert "does not exist" in d.message


def test_failed_lookup_of_an_unknown_ami_retries_later() -> None:
    cloud = CloudFacts(errors={_key(UNKNOWN_AMI): "RequestLimitExceeded"})
    d = plan(_with_ami({"id": UNKNOWN_AMI}), facts=facts_with(cloud, ["AWS"]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CLOUD_UNAVAILABLE)
    assert "RequestLimitExceeded" in d.message


def test_windows_license_included_ami_is_left_alone() -> None:
    winli = stream_doc("installer-release-4.19-rhcos.json")["architectures"]["x86_64"]["rhel-coreos-extensions"][
        "aws-winli"
    ]["regions"]["us-east-1"]["image"]
    d = plan(_with_ami({"id": winli}))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE)
    assert "Windows License Included" in d.message


# --- AWS Marketplace -------------------------------------------------------------------------------


def _mp(ami: str, release: str, created: str, available: bool = True) -> CloudImage:
    return CloudImage(
        _key(ami),
        exists=True,
        available=available,
        owner=MARKETPLACE,
        name=f"rhcos-x86_64-{release}-{PRODUCT}",
        description=f"RHEL CoreOS {release[:3]} {release} x86_64",
        creation_date=created,
    )


CURRENT_MP = _mp("ami-0aaaaaaaaaaaaaaa0", "9.4.20240101-0", "2024-01-02T00:00:00.000Z")
CANDIDATES = (
    CURRENT_MP,
    _mp("ami-0bbbbbbbbbbbbbbb1", "9.6.20250101-0", "2025-01-02T00:00:00.000Z"),
    _mp("ami-0bbbbbbbbbbbbbbb2", "9.6.20250601-0", "2025-06-02T00:00:00.000Z"),
    _mp("ami-0bbbbbbbbbbbbbbb3", "9.8.20260101-0", "2026-01-02T00:00:00.000Z"),
    _mp("ami-0bbbbbbbbbbbbbbb4", "9.8.20260301-0", "2026-03-02T00:00:00.000Z", available=False),
    _mp("ami-0bbbbbbbbbbbbbbb5", "10.2.20260401-0", "2026-04-02T00:00:00.000Z"),
    _mp("ami-0bbbbbbbbbbbbbbb6", "418.94.202501010000-0", "2025-01-03T00:00:00.000Z"),
)


def _mp_facts(candidates: tuple[CloudImage, ...] | None = CANDIDATES, **extra: Any) -> Any:
    listing = {} if candidates is None else {("us-east-1", PRODUCT): MarketplaceCandidates("us-east-1", PRODUCT, candidates)}
    cloud = CloudFacts(images={CURRENT_MP.key: CURRENT_MP}, marketplace=listing, **extra)
    return facts_with(cloud, ["AWS"])


@pytest.mark.parametrize(
    ("golden_id", "expected", "release"),
    [
        # stream 9.8: the newest available 9.8 (a newer 9.8 is still pending)
        ("cm-4.22", "ami-0bbbbbbbbbbbbbbb3", "9.8.20260101-0"),
        # stream 9.6: two 9.6 candidates, the newer creation date wins
        ("4.21", "ami-0bbbbbbbbbbbbbbb2", "9.6.20250601-0"),
    ],
)
def test_marketplace_ami_resolves_within_its_product(golden_id: str, expected: str, release: str) -> None:
    d = plan(_with_ami({"id": CURRENT_MP.key.image}), golden_id, _mp_facts())
    assert (d.action, d.target) == (Action.PATCH, {"id": expected})
    assert (d.current_release, d.current_release_source, d.target_release) == ("9.4.20240101-0", "Cloud", release)


def test_marketplace_ami_keeps_its_rhel_major_without_a_label() -> None:
    d = plan(_with_ami({"id": CURRENT_MP.key.image}), "4.22-rhel-10", _mp_facts())
    assert (d.action, d.reason) == (Action.SKIP, Reason.STREAM_CHANGE_REQUIRES_LABEL)
    assert d.target == {"id": "ami-0bbbbbbbbbbbbbbb5"}


def test_marketplace_needs_no_stream_region() -> None:
    obj = machineset("aws-x86_64-me-south-1a-4.21.yaml")
    current = CloudImage(
        _key("ami-0aaaaaaaaaaaaaaa0", "me-south-1"), exists=True, available=True, owner=MARKETPLACE,
        name=f"rhcos-x86_64-9.4.20240101-0-{PRODUCT}",
    )
    newer = CloudImage(
        _key("ami-0ccccccccccccccc1", "me-south-1"), exists=True, available=True, owner=MARKETPLACE,
        description="RHEL CoreOS 9.8 9.8.20260101-0 x86_64", creation_date="2026-01-02",
    )
    _psp(obj)["ami"] = {"id": current.key.image}
    cloud = CloudFacts(
        images={current.key: current},
        marketplace={("me-south-1", PRODUCT): MarketplaceCandidates("me-south-1", PRODUCT, (current, newer))},
    )
    d = plan(obj, "cm-4.22", facts_with(cloud, ["AWS"]))
    assert (d.action, d.target, d.location) == (Action.PATCH, {"id": "ami-0ccccccccccccccc1"}, "me-south-1")


def test_marketplace_already_at_the_best_candidate_is_up_to_date() -> None:
    best = CANDIDATES[3]
    cloud = CloudFacts(
        images={best.key: best},
        marketplace={("us-east-1", PRODUCT): MarketplaceCandidates("us-east-1", PRODUCT, CANDIDATES)},
    )
    d = plan(_with_ami({"id": best.key.image}), "cm-4.22", facts_with(cloud, ["AWS"]))
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE)


def test_marketplace_without_a_qualifying_candidate() -> None:
    only_newer = (CANDIDATES[5], CANDIDATES[6])  # 10.2 and a pre-4.19 418.94 id: both above 9.6
    d = plan(_with_ami({"id": CURRENT_MP.key.image}), "4.21", _mp_facts(only_newer))
    assert (d.action, d.reason) == (Action.SKIP, Reason.MARKETPLACE_IMAGE_NOT_FOUND)
    assert PRODUCT in d.message


def test_marketplace_not_looked_up_is_unknown() -> None:
    d = plan(_with_ami({"id": CURRENT_MP.key.image}), "cm-4.22", _mp_facts(None))
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)
    assert "cloud verification" in d.message


def test_marketplace_lookup_failure_retries_later() -> None:
    facts = _mp_facts(None, marketplace_errors={("us-east-1", PRODUCT): "throttled"})
    d = plan(_with_ami({"id": CURRENT_MP.key.image}), "cm-4.22", facts)
    assert (d.action, d.reason) == (Action.SKIP, Reason.CLOUD_UNAVAILABLE)


def test_marketplace_name_without_product_id() -> None:
    current = CloudImage(_key("ami-0aaaaaaaaaaaaaaa0"), exists=True, available=True, owner=MARKETPLACE, name="rhcos")
    cloud = CloudFacts(images={current.key: current})
    d = plan(_with_ami({"id": current.key.image}), "cm-4.22", facts_with(cloud, ["AWS"]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)
    assert "product id" in d.message


def test_windows_license_included_ami_is_left_alone_even_when_red_hat_owns_it() -> None:
    winli = stream_doc("installer-release-4.22-coreos-rhel-9.json")["architectures"]["x86_64"][
        "rhel-coreos-extensions"
    ]["aws-winli"]["regions"]["us-east-1"]["image"]
    cloud = CloudFacts(images={_key(winli): _image(winli, RED_HAT), _key(TARGET_422): _image(TARGET_422, RED_HAT)})
    d = plan(_with_ami({"id": winli}), facts=facts_with(cloud, ["AWS"]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE)
