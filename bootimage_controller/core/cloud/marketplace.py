"""AWS Marketplace AMI resolution rules (pure; no SDK import), shared by the planner and the cloud layer.

A Marketplace AMI cannot be replaced by the stream's AMI (the product carries the subscription),
so its successor is the newest AMI of the same product whose RHEL major.minor is not above the
stream's AWS release (reference section 6, MCO main). Build id schemes never mix: OCP-encoded
tokens (`418.94`) compare above any RHEL-aligned one (`9.6`) numerically while being older, so a
RHEL-aligned target only accepts RHEL-aligned AMIs (as the MCO does) and a 4.18-era target only
OCP-encoded ones (where the MCO would wrongly accept a 9.x AMI as "lower").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .facts import CloudImage, MarketplaceCandidates
from .releases import release_in_text

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_TOKEN = re.compile(r"^(\d+)\.(\d+)")
# OCP-encoded build ids start with 4<OCP minor> (41..419); RHEL majors stay far below.
_OCP_ENCODED_MAJOR = 40


def marketplace_product_id(ami_name: str | None) -> str | None:
    """The product UUID that ends a Marketplace AMI name (its last five `-` groups), or None."""
    if not ami_name:
        return None
    tail = "-".join(ami_name.split("-")[-5:])
    return tail.lower() if _UUID.fullmatch(tail) else None


def version_token(release: str | None) -> tuple[int, int] | None:
    """`9.6.20260210-0` -> (9, 6); `418.94.202410090804-0` -> (418, 94)."""
    m = _TOKEN.match(release or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def image_release(image: CloudImage) -> str | None:
    return image.release or release_in_text(image.description) or release_in_text(image.name)


def _ocp_encoded(token: tuple[int, int]) -> bool:
    return token[0] >= _OCP_ENCODED_MAJOR


def pick_marketplace_image(
    candidates: MarketplaceCandidates | Iterable[CloudImage], target_release: str | None
) -> CloudImage | None:
    """Highest token of the target's scheme not above the target's, ties to the newest creation date."""
    images = candidates.images if isinstance(candidates, MarketplaceCandidates) else tuple(candidates)
    target = version_token(target_release)
    if target is None:
        return None
    best: CloudImage | None = None
    best_key: tuple[tuple[int, int], str] | None = None
    for image in images:
        if not (image.exists and image.available):
            continue
        token = version_token(image_release(image))
        if token is None or _ocp_encoded(token) != _ocp_encoded(target) or token > target:
            continue
        key = (token, image.creation_date or "")
        if best_key is None or key > best_key:
            best, best_key = image, key
    return best
