"""Helpers every platform's rules share.

* `SpecReader`: typed reads from the providerSpec that raise `ProviderSpecError` naming the field
  by its dotted path from the object root (`spec.template.spec.providerSpec.value.placement.region`),
  which the planner turns into `error InvalidProviderSpec` (SPEC section 2 rule 8).
* `verify_target`: rule 9, one place for every platform: with cloud answers, never patch to an image
  the cloud does not have at the MachineSet's location.
* `image_key` (from `core.cloud.facts`, where the cloud side takes it too): how a decision's target
  becomes an `ImageKey`, so both sides build the same key.
* `release_rhel_major`: the RHEL major of a boot image release, marketplace versions included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...constants import Platform, Reason
from ...errors import ProviderSpecError
from ..cloud.facts import image_key
from ..model import JsonPath, dotted, is_mapping
from ..skew.record import ReleaseSource
from ..skew.versions import rhel_major_of
from .base import RuleContext, Skip, Target, image_facts

__all__ = [
    "ReleaseSource",
    "SpecReader",
    "image_key",
    "release_rhel_major",
    "skip_from",
    "verify_target",
]


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


class SpecReader:
    """Typed reads from one providerSpec; every failure names the field from the object root."""

    def __init__(self, ctx: RuleContext) -> None:
        self.root: JsonPath = ctx.resource.provider_spec_path
        self.obj = ctx.resource.display
        self.spec = ctx.spec

    def path(self, *rel: str | int) -> JsonPath:
        return self.root + rel

    def field(self, *rel: str | int) -> str:
        return dotted(self.path(*rel))

    def error(self, rel: JsonPath, problem: str) -> ProviderSpecError:
        return ProviderSpecError(self.obj, dotted(self.root + rel), problem)

    def value(self, *rel: str | int) -> Any:
        """The value at `rel`, None when missing; a step through a non-container is an error."""
        cur: Any = self.spec
        for i, part in enumerate(rel):
            if isinstance(part, int):
                if not isinstance(cur, list):
                    raise self.error(rel[:i], f"expected a list, got {_type_name(cur)}")
                if part >= len(cur):
                    return None
                cur = cur[part]
            elif type(cur) is dict:  # parsed JSON: the common case, first
                cur = cur.get(part)
            elif cur is None:
                return None
            elif is_mapping(cur):
                cur = cur.get(part)
            else:
                raise self.error(rel[:i], f"expected an object, got {_type_name(cur)}")
        return cur

    def string(self, *rel: str | int, required: bool = False) -> str | None:
        value = self.value(*rel)
        if value is None and not required:
            return None
        if not isinstance(value, str):
            problem = "missing" if value is None else f"expected a string, got {_type_name(value)}"
            raise self.error(rel, problem)
        return value

    def mapping(self, *rel: str | int) -> Mapping[str, Any] | None:
        value = self.value(*rel)
        if value is not None and not is_mapping(value):
            raise self.error(rel, f"expected an object, got {_type_name(value)}")
        return value

    def items(self, *rel: str | int) -> list[Any] | None:
        value = self.value(*rel)
        if value is not None and not isinstance(value, list):
            raise self.error(rel, f"expected a list, got {_type_name(value)}")
        return value

    def boolean(self, *rel: str | int) -> bool | None:
        value = self.value(*rel)
        if value is not None and not isinstance(value, bool):
            raise self.error(rel, f"expected true or false, got {_type_name(value)}")
        return value


# --- rule 9: cloud verification --------------------------------------------------------------


def skip_from(target: Target, reason: Reason, message: str) -> Skip:
    """A skip that still shows what the boot image is and what it would have become."""
    # No template work: a skip builds nothing in vCenter.
    return Skip(reason, message, field=target.field, **{**image_facts(target), "template": None})


def verify_target(
    ctx: RuleContext, platform: Platform, target: Target, image: str, current_image: str | None = None
) -> Target | Skip:
    """SPEC rule 9: the target must exist, be available and not be deprecated where the MachineSet
    runs; and what the cloud says of the current image (`current_image`): deprecated or not.

    Checked only when the cloud was asked about this platform and the decision would otherwise be
    a patch (an up-to-date MachineSet needs nothing from the cloud). A lookup that failed is a
    retry-later skip, never a patch.
    """
    facts = ctx.facts
    if facts.cloud is None or platform not in facts.cloud_platforms or target.current == target.target:
        return target
    current = facts.cloud.image(image_key(platform, target.location, current_image)) if current_image else None
    if current is not None and current.deprecated:
        target = replace(target, current_deprecated=f"{current_image} is {current.deprecated}")
    if not target.location:
        return skip_from(
            target,
            Reason.TARGET_IMAGE_NOT_FOUND,
            f"{ctx.resource.display}: cannot check target image {image}: the providerSpec names no "
            "region, zone or location to look in; not patching to an image not known to be there",
        )
    key = image_key(platform, target.location, image)
    where = f"in {target.location}"
    error = facts.cloud.error(key)
    if error is not None:
        return skip_from(
            target,
            Reason.CLOUD_UNAVAILABLE,
            f"{ctx.resource.display}: could not check target image {image} {where}: {error}; will retry",
        )
    found = facts.cloud.image(key)
    if found is None or not found.exists:
        return skip_from(
            target,
            Reason.TARGET_IMAGE_NOT_FOUND,
            f"{ctx.resource.display}: target image {image} does not exist {where}; not patching to an "
            "image the cloud does not have",
        )
    if not found.available:
        return skip_from(
            target,
            Reason.TARGET_IMAGE_NOT_FOUND,
            f"{ctx.resource.display}: target image {image} exists {where} but is not available yet; "
            "not patching until it is",
        )
    if found.deprecated:
        return skip_from(
            target,
            Reason.TARGET_IMAGE_DEPRECATED,
            f"{ctx.resource.display}: target image {image} {where} is {found.deprecated}; not patching to a "
            "deprecated image (new machines could fail to launch from it): a release with a current image fixes it",
        )
    return target


# --- releases --------------------------------------------------------------------------------

# Azure marketplace versions: `9.6.20251015`, `10.2.20260423` (RHEL-aligned, a date) and the paid
# images' `9.6.2026030314` / `4.18.2025031114` (a date and hour). The first field is a RHEL major
# from 8 on; `4.x` is an OpenShift version and implies no RHEL major on its own.
_MARKETPLACE_VERSION = re.compile(r"(\d{1,3})\.(\d{1,3})\.\d{8,10}", re.ASCII)
_FIRST_RHCOS_RHEL_MAJOR = 8


def release_rhel_major(release: str | None) -> int | None:
    """The RHEL major a boot image release implies: RHCOS build ids and Azure marketplace versions."""
    if not release:
        return None
    major = rhel_major_of(release)
    if major is not None:
        return major
    m = _MARKETPLACE_VERSION.fullmatch(release.strip())
    if m and int(m.group(1)) >= _FIRST_RHCOS_RHEL_MAJOR:
        return int(m.group(1))
    return None
