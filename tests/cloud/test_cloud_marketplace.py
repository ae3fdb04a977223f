"""Pure rules: Marketplace product ids and AMI choice, release ids in image names."""

from __future__ import annotations

import pytest

from bootimage_controller.core.cloud.facts import CloudImage, ImageKey, MarketplaceCandidates
from bootimage_controller.core.cloud.marketplace import (
    marketplace_product_id,
    pick_marketplace_image,
    version_token,
)
from bootimage_controller.core.cloud.releases import release_in_text

OCP = "59ead7de-2540-4653-a8b0-fa7926d5c845"


@pytest.mark.parametrize(
    ("name", "product"),
    [
        (f"RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-{OCP}", OCP),
        ("RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-aarch64-0-abc249f8-7440-45f7-a4b1-c026baff64c1",
         "abc249f8-7440-45f7-a4b1-c026baff64c1"),
        ("rhcos-419-94-202504151514-0-x86_64", None),
        ("rhcos-9.6.20250402-0-x86_64", None),
        ("RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-notauuid", None),
        ("short", None),
        ("", None),
        (None, None),
    ],
)
def test_marketplace_product_id(name: str | None, product: str | None) -> None:
    assert marketplace_product_id(name) == product


def ami(ami_id: str, release: str | None, created: str, available: bool = True) -> CloudImage:
    return CloudImage(ImageKey("AWS", "us-east-1", ami_id), exists=True, available=available,
                      owner="679593333241", release=release, creation_date=created)


def candidates(*images: CloudImage) -> MarketplaceCandidates:
    return MarketplaceCandidates("us-east-1", OCP, images)


def picked(c: MarketplaceCandidates, target: str) -> str | None:
    image = pick_marketplace_image(c, target)
    return image.key.image if image else None


def test_highest_token_not_above_target_wins() -> None:
    c = candidates(ami("a94", "9.4.20241001-0", "2024-10-03"), ami("a96", "9.6.20250402-0", "2025-04-05"),
                   ami("a98", "9.8.20260403-0", "2026-04-06"))
    assert picked(c, "9.6.20260112-0") == "a96"
    assert picked(c, "9.8.20260403-0") == "a98"
    assert picked(c, "9.2.20230101-0") is None


def test_ties_go_to_the_newest_creation_date() -> None:
    c = candidates(ami("old", "9.6.20250402-0", "2025-04-05T09:00:00.000Z"),
                   ami("new", "9.6.20260210-0", "2026-02-12T09:00:00.000Z"),
                   ami("mid", "9.6.20251001-0", "2025-10-01T09:00:00.000Z"))
    assert picked(c, "9.6.20260112-0") == "new"


def test_ocp_encoded_tokens_are_older_than_rhel_aligned_ones() -> None:
    c = candidates(ami("ocp418", "418.94.202501221327-0", "2025-01-24"), ami("rhel96", "9.6.20250402-0", "2025-04-05"))
    # 418 > 9 numerically, yet 418.94 predates 9.6: the RHEL-aligned AMI wins for a 9.x target...
    assert picked(c, "9.6.20260112-0") == "rhel96"
    # ...and a 4.18-era target never jumps to a RHEL-aligned AMI.
    assert picked(c, "418.94.202602022246-0") == "ocp418"


def test_unavailable_or_unversioned_amis_are_never_picked() -> None:
    c = candidates(ami("pending", "9.6.20260210-0", "2026-02-12", available=False),
                   ami("noversion", None, "2026-03-01"), ami("ok", "9.4.20241001-0", "2024-10-03"))
    assert picked(c, "9.6.20260112-0") == "ok"
    assert pick_marketplace_image(c, "not-a-release") is None
    assert pick_marketplace_image([], "9.6.20260112-0") is None


def test_version_token() -> None:
    assert version_token("9.6.20260210-0") == (9, 6)
    assert version_token("10.2.20260405-0") == (10, 2)
    assert version_token("418.94.202410090804-0") == (418, 94)
    assert version_token(None) is None


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("rhcos-418.94.202410090804-0-x86_64-hvm", "418.94.202410090804-0"),
        ("rhcos-9.6.20250402-0-x86_64", "9.6.20250402-0"),
        ("rhcos-9-6-20260112-0-gcp-x86-64", "9.6.20260112-0"),
        ("rhcos-418-94-202410090804-0-gcp-x86-64", "418.94.202410090804-0"),
        ("rhcos-10-2-20260405-0-gcp-aarch64", "10.2.20260405-0"),
        ("rhcos-410-8-20190520-0-gcp-x86-64", "410.8.20190520.0"),
        ("RHEL CoreOS 9.6 9.6.20260210-0 x86_64", "9.6.20260210-0"),
        (f"RHEL-9.4-RHCOS-9.6_HVM_GA-20260210-x86_64-0-{OCP}", None),
        ("acme-hardened-rhcos-2025-03", None),
        ("rhcos-9-6-2026011-0-gcp-x86-64", None),  # 7-digit date: no release
        (None, None),
    ],
)
def test_release_in_image_names(text: str | None, release: str | None) -> None:
    assert release_in_text(text) == release
