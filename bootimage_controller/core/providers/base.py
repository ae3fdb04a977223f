"""The one small interface every platform implements.

A platform's rules read a validated providerSpec, the stream's images for the MachineSet's
architecture and the cluster facts, and say one of three things:

* `Target`: here is the boot image field, its current value and the golden value; the planner
  compares them (rule 7) and the writer patches `changes`;
* `Skip`: leave this MachineSet alone, with a reason an administrator can read;
* `Failure`: the providerSpec is broken (rule 8): an `error` decision naming the field.

Rules are pure: cloud answers arrive already fetched in `ClusterFacts.cloud`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ...constants import Platform, Reason
from ..context import ClusterFacts
from ..golden import ArchBootImages, GoldenBootImages, GoldenStream
from ..model import FieldChange, JsonPath, MachineResource
from ..vsphere.topology import TemplateWork


@dataclass(frozen=True)
class RuleContext:
    resource: MachineResource
    spec: Mapping[str, Any]  # providerSpec.value, known to be an object
    arch: str
    stream: GoldenStream
    images: ArchBootImages
    golden: GoldenBootImages
    facts: ClusterFacts


@dataclass(frozen=True)
class Target:
    """The boot image field, what it holds and what the golden data says it should hold."""

    field: JsonPath  # from the object root, e.g. (..., "providerSpec", "value", "ami")
    current: Any
    target: Any
    changes: tuple[FieldChange, ...]
    target_release: str | None
    current_release: str | None = None
    current_release_source: str | None = None  # a skew.record.ReleaseSource value
    location: str | None = None
    template: TemplateWork | None = None  # vSphere: what to look up / build in vCenter
    current_deprecated: str | None = None  # the cloud says the current image is deprecated: why
    warning: str | None = None  # what the patch replaces that an administrator may not expect (the message says it)


@dataclass(frozen=True)
class Skip:
    reason: Reason
    message: str
    field: JsonPath | None = None
    current: Any = None
    current_release: str | None = None
    current_release_source: str | None = None
    target: Any = None
    target_release: str | None = None
    location: str | None = None
    template: TemplateWork | None = None
    current_deprecated: str | None = None
    # What only the cloud can tell, which decides whether this image is written, when it was not
    # asked (`nextWrite.when: unknown`, `because`).
    ask_cloud: str | None = None


@dataclass(frozen=True)
class Failure:
    reason: Reason
    message: str
    field: JsonPath | None = None


RuleOutcome = Target | Skip | Failure

# What a rule found about the boot image, carried alike by a Target, a Skip and the decision made of
# either (the field is a path in the first two, dotted in the decision).
IMAGE_FACTS = ("current", "target", "current_release", "target_release", "location", "current_release_source",
               "template", "current_deprecated")


def image_facts(outcome: Target | Skip) -> dict[str, Any]:
    """The boot image facts of a rule's outcome, by name: the one place they are copied."""
    return {name: getattr(outcome, name) for name in IMAGE_FACTS}


def invalid_golden(ctx: RuleContext, field: JsonPath | None, *keys: str) -> Failure | None:
    """`error BootImagesConfigMapInvalid` when the golden entry this MachineSet needs failed
    validation (golden.ArchBootImages.invalid): never a patch to what is not a boot image."""
    problem = ctx.images.problem(*keys)
    if problem is None:
        return None
    return Failure(Reason.BOOT_IMAGES_CONFIGMAP_INVALID,
                   f"{ctx.resource.display}: its boot image in stream {ctx.stream.name} is unusable: {problem}", field)


class PlatformRules(Protocol):
    platform: Platform

    def evaluate(self, ctx: RuleContext) -> RuleOutcome: ...
