"""Which MachineSets the controller may touch (SPEC section 2 rule 1).

Read from `MachineConfiguration.spec.managedBootImages` directly: unlike the Machine Config
Operator we do not wait for the operator to copy the spec into status, so an opt-out takes effect
on the next event, not after the operator's next sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from ..constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    BOOT_IMAGE_UPDATES_DISABLED,
    CAPI_GROUP,
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINEDEPLOYMENT_PLURAL,
    CAPI_MACHINESET,
    CPMS_KIND,
    CPMS_PLURAL,
    DEFAULT_ENROLLED_PLATFORMS,
    MACHINE_API_GROUP,
    MACHINESET_PLURAL,
)
from ..errors import SelectorError

WHERE = "MachineConfiguration cluster"


class SelectionMode(StrEnum):
    ALL = "All"
    PARTIAL = "Partial"
    NONE = "None"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # NotIn


@dataclass(frozen=True)
class LabelSelector:
    """A parsed metav1.LabelSelector (matchLabels + matchExpressions, ANDed)."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @classmethod
    def parse(cls, value: Any, field: str) -> LabelSelector:
        if value is None:
            # An empty selector matches everything, as in metav1.LabelSelectorAsSelector.
            return cls(())
        if not isinstance(value, Mapping):
            raise SelectorError(WHERE, field, "expected a label selector object")
        reqs: list[Requirement] = []
        match_labels = value.get("matchLabels") or {}
        if not isinstance(match_labels, Mapping):
            raise SelectorError(WHERE, f"{field}.matchLabels", "expected a map of strings")
        for k, v in match_labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SelectorError(WHERE, f"{field}.matchLabels", f"{k!r}: keys and values must be strings")
            reqs.append(Requirement(k, "In", frozenset({v})))
        exprs = value.get("matchExpressions") or []
        if not isinstance(exprs, list):
            raise SelectorError(WHERE, f"{field}.matchExpressions", "expected a list")
        for i, expr in enumerate(exprs):
            reqs.append(_requirement(expr, f"{field}.matchExpressions[{i}]"))
        return cls(tuple(reqs))


def _requirement(expr: Any, field: str) -> Requirement:
    if not isinstance(expr, Mapping):
        raise SelectorError(WHERE, field, "expected an object")
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or not key:
        raise SelectorError(WHERE, f"{field}.key", "missing")
    if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
        raise SelectorError(WHERE, f"{field}.operator", f"{op!r} is not In, NotIn, Exists or DoesNotExist")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SelectorError(WHERE, f"{field}.values", "expected a list of strings")
    if op in ("In", "NotIn") and not values:
        raise SelectorError(WHERE, f"{field}.values", f"must be non-empty for {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise SelectorError(WHERE, f"{field}.values", f"must be empty for {op}")
    return Requirement(key, op, frozenset(values))


@dataclass(frozen=True)
class ResourceSelection:
    mode: SelectionMode
    selector: LabelSelector | None = None  # only for Partial

    def selects(self, labels: Mapping[str, str]) -> bool:
        if self.mode is SelectionMode.ALL:
            return True
        if self.mode is SelectionMode.NONE:
            return False
        assert self.selector is not None
        return self.selector.matches(labels)


class Enrollable(Protocol):
    """What enrollment reads of an object (a `MachineResource` or a `capi.resources.CapiObject`)."""

    @property
    def kind(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...


_NONE = ResourceSelection(SelectionMode.NONE)


@dataclass(frozen=True)
class Enrollment:
    machinesets: ResourceSelection
    cpms: ResourceSelection
    source: str  # how it was decided, for messages
    # Cluster API (`apiGroup: cluster.x-k8s.io`): opt-in only, never a platform default.
    capi_machinesets: ResourceSelection = _NONE
    capi_machinedeployments: ResourceSelection = _NONE
    # The MachineSets' selection came from the spec (an entry, or the empty list), not a default.
    machinesets_explicit: bool = False

    @classmethod
    def everything(cls) -> Enrollment:
        everything = ResourceSelection(SelectionMode.ALL)
        return cls(everything, everything, "everything", everything, everything)

    @classmethod
    def from_machine_configuration(cls, mc: Mapping[str, Any] | None, platform: str | None) -> Enrollment:
        """Raises SelectorError naming the field when the configuration does not parse."""
        default = SelectionMode.ALL if platform in DEFAULT_ENROLLED_PLATFORMS else SelectionMode.NONE
        spec = (mc or {}).get("spec") or {}
        managed = spec.get("managedBootImages") if isinstance(spec, Mapping) else None
        managers = managed.get("machineManagers") if isinstance(managed, Mapping) else None
        if managers is not None and not isinstance(managers, list):
            raise SelectorError(WHERE, "spec.managedBootImages.machineManagers", "expected a list")
        if managers == []:
            # Present and empty: the legacy full opt-out, as in the Machine Config Operator.
            none = ResourceSelection(SelectionMode.NONE)
            return cls(none, none, "spec.managedBootImages.machineManagers is empty (opted out)",
                       machinesets_explicit=True)
        ms = _selection(managers or [], MACHINESET_PLURAL)
        cp = _selection(managers or [], CPMS_PLURAL)
        capi_ms = _selection(managers or [], MACHINESET_PLURAL, CAPI_GROUP)
        capi_md = _selection(managers or [], CAPI_MACHINEDEPLOYMENT_PLURAL, CAPI_GROUP)
        source = "spec.managedBootImages" if ms else f"platform default for {platform or 'unknown platform'}"
        return cls(
            ms or ResourceSelection(default),
            cp or _NONE,  # CPMS is opt-in only
            source,
            capi_ms or _NONE,  # so is the Cluster API
            capi_md or _NONE,
            machinesets_explicit=ms is not None,
        )

    def selection_for(self, kind: str) -> ResourceSelection:
        return {
            CPMS_KIND: self.cpms,
            CAPI_MACHINESET: self.capi_machinesets,
            CAPI_MACHINEDEPLOYMENT: self.capi_machinedeployments,
        }.get(kind, self.machinesets)

    def mco_selects(self, kind: str, labels: Mapping[str, str], default_on: bool) -> bool:
        """Whether the Machine Config Operator's enrollment selects an object: the same spec, but
        without a `machinesets` entry it enrolls only where its release turns the platform on by
        default (`default_on`), and it knows nothing of our per-MachineSet opt-out annotation."""
        if kind in (CPMS_KIND, CAPI_MACHINESET, CAPI_MACHINEDEPLOYMENT):
            return self.selection_for(kind).selects(labels)  # listed only: never a default
        if not self.machinesets_explicit:
            return default_on
        return self.machinesets.selects(labels)

    def covers(self, resource: Enrollable) -> tuple[bool, str]:
        """Whether `resource` is enrolled, and a sentence saying why not."""
        if self.source == "everything":
            return True, ""
        if resource.annotations.get(ANNOTATION_BOOT_IMAGE_UPDATES) == BOOT_IMAGE_UPDATES_DISABLED:
            return False, f"annotation {ANNOTATION_BOOT_IMAGE_UPDATES}={BOOT_IMAGE_UPDATES_DISABLED} opts it out"
        selection = self.selection_for(resource.kind)
        if selection.selects(resource.labels):
            return True, ""
        if selection.mode is SelectionMode.PARTIAL:
            return False, "its labels do not match the Partial machineResourceSelector"
        return False, f"boot image management is {selection.mode} for {_plural(resource.kind)} ({self.source})"


def _plural(kind: str) -> str:
    """A kind as a sentence names its objects (`MachineSet.cluster.x-k8s.io` is no word to pluralise)."""
    return {CAPI_MACHINESET: "Cluster API MachineSets", CAPI_MACHINEDEPLOYMENT: "Cluster API MachineDeployments"}.get(
        kind, f"{kind}s")


def _selection(managers: list[Any], resource: str, group: str = MACHINE_API_GROUP) -> ResourceSelection | None:
    for i, m in enumerate(managers):
        field = f"spec.managedBootImages.machineManagers[{i}]"
        if not isinstance(m, Mapping):
            raise SelectorError(WHERE, field, "expected an object")
        if m.get("resource") != resource or m.get("apiGroup") != group:
            continue
        selection = m.get("selection")
        if not isinstance(selection, Mapping):
            raise SelectorError(WHERE, f"{field}.selection", "missing or not an object")
        mode = selection.get("mode")
        if mode not in (SelectionMode.ALL, SelectionMode.PARTIAL, SelectionMode.NONE):
            raise SelectorError(WHERE, f"{field}.selection.mode", f"{mode!r} is not All, Partial or None")
        if mode != SelectionMode.PARTIAL:
            return ResourceSelection(SelectionMode(mode))
        partial = selection.get("partial")
        if not isinstance(partial, Mapping):
            raise SelectorError(WHERE, f"{field}.selection.partial", "required when mode is Partial")
        selector = LabelSelector.parse(
            partial.get("machineResourceSelector"), f"{field}.selection.partial.machineResourceSelector"
        )
        return ResourceSelection(SelectionMode.PARTIAL, selector)
    return None
