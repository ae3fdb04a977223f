"""Rule 9: with cloud answers, never patch to an image the cloud does not have where it is needed."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import Action, Reason
from bootimage_controller.core.cloud.facts import CloudFacts, CloudImage, ImageKey, image_key

from .support import facts_with, machineset, plan

# (fixture, key of its cm-4.22 target as the cloud lookup names it)
PLATFORMS = {
    "AWS": ("aws-x86_64-us-east-1a-4.16.yaml", ImageKey("AWS", "us-east-1", "ami-06a6b025350ff1e23")),
    "GCP": (
        "gcp-x86_64-us-central1-a-4.16.yaml",
        ImageKey("GCP", "us-central1-a", "projects/rhcos-cloud/global/images/rhcos-9-8-20260403-0-gcp-x86-64"),
    ),
    "Azure": (
        "azure-x86_64-legacy-gallery-gen2-4.16.yaml",
        ImageKey("Azure", "eastus", "azureopenshift:aro4:420-v2:9.6.20251015"),
    ),
}
ALL = list(PLATFORMS)


def _found(key: ImageKey, exists: bool = True, available: bool = True) -> CloudFacts:
    return CloudFacts(images={key: CloudImage(key, exists=exists, available=available)})


@pytest.mark.parametrize("platform", ALL)
def test_target_present_and_available_is_patched(platform: str) -> None:
    ms, key = PLATFORMS[platform]
    d = plan(machineset(ms), facts=facts_with(_found(key), [platform]))
    assert (d.action, d.reason) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)


@pytest.mark.parametrize("platform", ALL)
@pytest.mark.parametrize(
    ("cloud_of", "word"),
    [
        (lambda key: CloudFacts(), "does not exist"),
        (lambda key: _found(key, exists=False), "does not exist"),
        (lambda key: _found(key, available=False), "not available"),
    ],
)
def test_target_missing_or_unavailable_is_never_patched(platform: str, cloud_of: Any, word: str) -> None:
    ms, key = PLATFORMS[platform]
    d = plan(machineset(ms), facts=facts_with(cloud_of(key), [platform]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.TARGET_IMAGE_NOT_FOUND)
    assert word in d.message and key.image in d.message
    assert d.changes == ()
    assert d.target is not None and d.location == key.location


@pytest.mark.parametrize("platform", ALL)
def test_lookup_error_is_a_retry_later(platform: str) -> None:
    ms, key = PLATFORMS[platform]
    d = plan(machineset(ms), facts=facts_with(CloudFacts(errors={key: "throttled"}), [platform]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CLOUD_UNAVAILABLE)
    assert "throttled" in d.message


@pytest.mark.parametrize("platform", ALL)
def test_platform_not_verified_is_planned_offline(platform: str) -> None:
    ms, _key = PLATFORMS[platform]
    others = [p for p in ALL if p != platform]
    d = plan(machineset(ms), facts=facts_with(CloudFacts(), others))
    assert d.action is Action.PATCH


def test_up_to_date_needs_no_cloud_answer() -> None:
    d = plan(machineset("azure-x86_64-marketplace-noplan-4.20.yaml"), facts=facts_with(CloudFacts(), ["Azure"]))
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE)


def test_image_key_is_what_the_decision_names() -> None:
    # The cloud side builds its lookups from decisions with the same helper.
    for platform, (ms, key) in PLATFORMS.items():
        d = plan(machineset(ms))
        target = d.target
        image = (
            target["id"]
            if platform == "AWS"
            else target
            if platform == "GCP"
            else ":".join(target[k] for k in ("publisher", "offer", "sku", "version"))
        )
        assert image_key(platform, d.location, image) == key


def test_no_location_to_look_in_is_never_patched() -> None:
    obj = machineset("azure-x86_64-legacy-gallery-gen2-4.16.yaml")
    del obj["spec"]["template"]["spec"]["providerSpec"]["value"]["location"]
    _ms, key = PLATFORMS["Azure"]
    d = plan(obj, facts=facts_with(_found(key), ["Azure"]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.TARGET_IMAGE_NOT_FOUND)
    assert "no region, zone or location" in d.message
    # Offline the same MachineSet is planned as usual.
    assert plan(obj).action is Action.PATCH


CURRENT = {  # the fixtures' 4.16 images, as the lookup names them
    "AWS": ImageKey("AWS", "us-east-1", "ami-05483066c3caaccf5"),
}


@pytest.mark.parametrize("platform", ["AWS", "GCP"])
def test_a_deprecated_target_is_never_written(platform: str) -> None:
    ms, key = PLATFORMS[platform]
    facts = CloudFacts(images={key: CloudImage(key, exists=True, available=True, deprecated="deprecated since X")})
    d = plan(machineset(ms), facts=facts_with(facts, [platform]))
    assert (d.action, d.reason) == (Action.SKIP, Reason.TARGET_IMAGE_DEPRECATED)
    assert key.image in d.message and "deprecated since X" in d.message and not d.changes


def test_a_deprecated_current_image_is_named_and_still_replaced() -> None:
    ms, key = PLATFORMS["AWS"]
    current = CURRENT["AWS"]
    facts = CloudFacts(images={key: CloudImage(key, exists=True, available=True),
                               current: CloudImage(current, exists=True, available=True, deprecated="deprecated since Y")})
    d = plan(machineset(ms), facts=facts_with(facts, ["AWS"]))
    assert d.action is Action.PATCH
    assert d.current_deprecated == "ami-05483066c3caaccf5 is deprecated since Y"
    assert d.to_json()["currentDeprecated"] == d.current_deprecated
    both = CloudFacts(images={key: CloudImage(key, exists=True, available=True, deprecated="deprecated since Z"),
                              current: CloudImage(current, exists=True, available=True, deprecated="deprecated since Y")})
    skipped = plan(machineset(ms), facts=facts_with(both, ["AWS"]))
    assert skipped.reason == Reason.TARGET_IMAGE_DEPRECATED and skipped.current_deprecated is not None
