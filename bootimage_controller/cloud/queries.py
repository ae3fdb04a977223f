"""Which cloud lookups an offline plan needs (rule 9), for `plan --cloud-verify` and the daemon."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..constants import AWS_MARKETPLACE_OWNER, Platform
from ..core.cloud.facts import CloudFacts, ImageKey
from ..core.model import BootImageDecision


def image_queries(decisions: Iterable[BootImageDecision]) -> list[ImageKey]:
    """Every image an offline plan names on a cloud (current and target), at its location."""
    keys: list[ImageKey] = []
    for d in decisions:
        if d.platform not in CLOUD_PLATFORM_NAMES or not d.location:
            continue
        for value in (d.current, d.target):
            image = _image_ref(d.platform, value)
            if image:
                keys.append(ImageKey(d.platform, d.location, image))
    return list(dict.fromkeys(keys))


CLOUD_PLATFORM_NAMES = frozenset({str(Platform.AWS), str(Platform.GCP), str(Platform.AZURE)})


def _image_ref(platform: str, value: Any) -> str | None:
    """The `ImageKey.image` form of a boot image field value (`core.cloud.facts.image_key`)."""
    if isinstance(value, Mapping) and set(value) == {"template", "image"}:
        value = value["image"]  # a Cluster API decision: the template's name and its image
    if platform == Platform.GCP:
        return value if isinstance(value, str) and value else None
    if not isinstance(value, Mapping):
        return None
    if platform == Platform.AWS:
        ami = value.get("id")
        return ami if isinstance(ami, str) and ami else None
    from .azure import image_urn  # the Azure SDK loads only when asked

    parts = [value.get(k) for k in ("publisher", "offer", "sku", "version")]
    if value.get("resourceID") or not all(isinstance(p, str) and p for p in parts):
        return None  # a gallery or managed image: not a marketplace image the API can be asked about
    return image_urn(*[str(p) for p in parts])


def marketplace_queries(facts: CloudFacts) -> list[tuple[str, str]]:
    """(region, product id) for every current AMI EC2 says is an AWS Marketplace AMI."""
    from ..core.cloud.marketplace import marketplace_product_id  # boto3 loads only when asked

    out = []
    for key, image in facts.images.items():
        if key.platform == Platform.AWS and image.exists and image.owner == AWS_MARKETPLACE_OWNER:
            product = marketplace_product_id(image.name)
            if product:
                out.append((key.location, product))
    return list(dict.fromkeys(out))


async def verify_decisions(verifier: Any, decisions: Iterable[BootImageDecision]) -> CloudFacts:
    """Ask the clouds about every image the decisions name. Round 1: current and target images.
    Round 2, only when EC2 named Marketplace AMIs: their product listings (the product id is known
    only from the AMI name EC2 returned). `verifier` is a `cloud.verifier.CloudVerifier`."""
    keys = image_queries(decisions)
    facts: CloudFacts = await verifier.verify(keys)
    market = marketplace_queries(facts)
    if market:
        facts = await verifier.verify(keys, market)
    return facts
