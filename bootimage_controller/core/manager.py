"""Who updates a MachineSet's boot image: the Machine Config Operator, Hive, GitOps or us (SPEC rule 2b).

Pure. `MachineConfigOperator` is what the cluster says about the MCO (its ClusterOperator's version,
the FeatureGate status of that version); `McoRelease` is what the MCO's own boot image controller of
that release covers (reference/mco-boot-image-controller.md sections 1, 5, 13 and 15, condensed in
the table below); `decide_manager` applies the SPEC's precedence to one object:

1. claimed by us (our owner reference), or annotated `boot-image-manager: bootimage-controller`: ours;
2. labelled by Hive's MachinePool controller: `hive`;
3. tracked by Argo CD or Flux: `gitops` (Git is the source of truth, even where the MCO would act);
4. another writer keeps the boot image field (metadata.managedFields): `external`, e.g. an ACM
   configuration policy (`config-policy-controller`); the decision names the field manager;
5. covered by the MCO's own controller: `mco`;
6. else ours.

Which field managers make a MachineSet `external` (where the SPEC says "none of the above", written
down here and in docs/install.md): one that owns the boot image field, is none of the known writers
(`KNOWN_FIELD_MANAGERS`: ours, the MCO's, Argo CD's, Flux's, Hive's) and is not a person's tool
(`kubectl`, `oc`, the console), and wrote it by server-side apply (a declarative writer applies
again) or is a policy engine that keeps fields with plain updates (`POLICY_FIELD_MANAGER_PREFIXES`).
A plain update by any other manager, such as the installer that created the MachineSet or a one-off
script, does not: it does not come back.

A `hive` or `gitops` MachineSet that the MCO covers too is written by the MCO all the same: the real
MCO reads no Hive, Argo CD or Flux mark (measured beside the MCO at 7ff337a). Its verdict says
so in `also_written_by` (SPEC section 3, writer conflicts).

The planning rules decide the same for every manager, so `plan` shows what each MachineSet needs;
the daemon writes only where the manager is ours.

Choices where the sources are silent, written down here and in docs/install.md:
- A `machine-config` ClusterOperator whose version cannot be read is taken to run the newest
  controller (the widest coverage): when unsure, we leave the MachineSet to the MCO rather than race it.
- Without a FeatureGate status for the MCO's version, each release's default gates apply
  (`default_gates` below).
- The `boot-image-manager` annotation names only `bootimage-controller`; any other value is ignored
  and said so. `bootimage-controller hand-over` writes it with our claim in one patch, `hand-back`
  removes both (handover.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_MANAGER,
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINESET,
    CPMS_KIND,
    CPMS_PLATFORMS,
    FLUX_LABELS,
    HUMAN_FIELD_MANAGER_PREFIXES,
    KNOWN_FIELD_MANAGERS,
    LABEL_HIVE_MACHINE_POOL,
    LABEL_OS_ID,
    LABEL_OSSTREAM,
    MACHINESET_KIND,
    MCO_OPERATOR_VERSION_NAME,
    OS_ID_WINDOWS,
    POLICY_FIELD_MANAGER_PREFIXES,
    Manager,
    Platform,
)
from ..errors import InputError
from .enrollment import Enrollable
from .model import OwnerReference, get_path, is_mapping
from .skew.versions import OcpVersion

# (apiVersion, kind, name) of an owner reference -> whether it is our claim (planner.is_our_owner_reference).
IsOurs = Callable[[str, str, str], bool]

# Feature gates of openshift/api that switched the MCO's boot image controller on, per platform.
GATE_GCP = "ManagedBootImages"
GATE_AWS = "ManagedBootImagesAWS"
GATE_VSPHERE = "ManagedBootImagesvSphere"
GATE_AZURE = "ManagedBootImagesAzure"
GATE_CPMS = "ManagedBootImagesCPMS"
GATE_SKEW = "BootImageSkewEnforcement"
# openshift/api #2990: the MCO updates Cluster API MachineSets and MachineDeployments on AWS (MCO #6447,
# TechPreviewNoUpgrade and DevPreviewNoUpgrade at first), where managedBootImages lists them.
GATE_AWS_CAPI = "ManagedBootImagesAWSCAPI"
# The MCO starts its Cluster API informers only where the Cluster API manages machines at all
# (#6447, boot_image_controller.go `Run()`): without this gate it never writes a CAPI pool, whatever
# GATE_AWS_CAPI and managedBootImages say (the bundled example lists it disabled, as 4.22's Default set).
GATE_CAPI_MACHINE_MANAGEMENT = "ClusterAPIMachineManagement"
SUPPORTED_MCO_STREAM = "rhel-9"
AZURE_STACK_CLOUD = "AzureStackCloud"


@dataclass(frozen=True)
class McoRelease:
    """What the MCO's boot image controller of one release line covers."""

    line: str  # "4.19", "4.22+"
    # Platform -> the feature gate its MachineSets need (None: none, always on).
    platforms: Mapping[str, str | None]
    # Platforms whose MachineSets are enrolled without a `machinesets` entry in the spec (from 4.19);
    # the others need the admin's explicit entry.
    default_on: frozenset[str]
    # Gates on by default in this release (used when the FeatureGate status does not say).
    default_gates: frozenset[str]
    stream_label: bool = False  # skips MachineSets labelled with another stream than rhel-9 (4.22+)
    cpms: bool = False  # reconciles the ControlPlaneMachineSet when GATE_CPMS is on (4.21+)
    skew: bool = False  # has skew enforcement, when GATE_SKEW is on (4.22+)


_MBI: dict[str, str | None] = {Platform.GCP: GATE_GCP}
_MBI_AWS: dict[str, str | None] = {**_MBI, Platform.AWS: GATE_AWS}
_FOUR = frozenset({Platform.AWS, Platform.GCP, Platform.AZURE, Platform.VSPHERE})
# The release lines of the reference's section 15. Before 4.16 there is no boot image controller.
MCO_RELEASES: Mapping[int, McoRelease] = {
    16: McoRelease("4.16", _MBI, frozenset(), frozenset()),
    17: McoRelease("4.17", _MBI_AWS, frozenset(), frozenset({GATE_GCP})),
    18: McoRelease("4.18", _MBI_AWS, frozenset(), frozenset({GATE_GCP, GATE_AWS})),
    19: McoRelease("4.19", _MBI_AWS, frozenset({Platform.GCP, Platform.AWS}), frozenset({GATE_GCP, GATE_AWS})),
    20: McoRelease("4.20", {**_MBI_AWS, Platform.VSPHERE: GATE_VSPHERE}, frozenset({Platform.GCP, Platform.AWS}),
                   frozenset({GATE_GCP, GATE_AWS})),
    21: McoRelease("4.21", {**_MBI_AWS, Platform.VSPHERE: GATE_VSPHERE, Platform.AZURE: GATE_AZURE},
                   frozenset({Platform.GCP, Platform.AWS}), frozenset({GATE_GCP, GATE_AWS}), cpms=True),
}
# 4.22 and every later line (5.x included): all four platforms on by default, no per-platform gates.
LATEST_MCO_RELEASE = McoRelease("4.22+", dict.fromkeys(_FOUR), _FOUR, frozenset({GATE_CPMS, GATE_SKEW}),
                                stream_label=True, cpms=True, skew=True)


def mco_release(version: OcpVersion | None) -> McoRelease | None:
    """The release line of an MCO version; None before 4.16 (no boot image controller)."""
    if version is None or version.major > 4 or (version.major == 4 and version.minor >= 22):
        return LATEST_MCO_RELEASE
    if version.major < 4:
        return None
    return MCO_RELEASES.get(version.minor)


@dataclass(frozen=True)
class MachineConfigOperator:
    """The Machine Config Operator as the cluster shows it. None of it: no MCO runs."""

    version_text: str | None  # ClusterOperator machine-config status.versions[name=operator]
    version: OcpVersion | None  # parsed; None: unreadable (the newest line is assumed, see above)
    # Enabled gates from FeatureGate cluster for that version; None: not known (release defaults).
    enabled_gates: frozenset[str] | None = None
    azure_stack: bool = False  # Infrastructure status.platformStatus.azure.cloudName AzureStackCloud

    @property
    def release(self) -> McoRelease | None:
        return mco_release(self.version)

    def gate_on(self, gate: str) -> bool:
        release = self.release
        if release is None:
            return False
        gates = self.enabled_gates if self.enabled_gates is not None else release.default_gates
        return gate in gates

    @property
    def runs_skew_enforcement(self) -> bool:
        """The MCO owns `status.bootImageSkewEnforcementStatus` (SPEC section 3, companion rules)."""
        release = self.release
        return release is not None and release.skew and self.gate_on(GATE_SKEW)

    def writes_conditions(self, platform: str | None) -> bool:
        """Its boot image controller runs here and keeps the MachineConfiguration's
        BootImageUpdateProgressing/Degraded conditions (from 4.17, on the platforms it covers)."""
        release = self.release
        return release is not None and release.line != "4.16" and platform in self.covered_platforms()

    def covered_platforms(self) -> frozenset[str]:
        """The platforms whose MachineSets the MCO's controller reconciles at this version and gates."""
        release = self.release
        if release is None:
            return frozenset()
        return frozenset(
            p for p, gate in release.platforms.items()
            if (gate is None or self.gate_on(gate)) and not (p == Platform.AZURE and self.azure_stack)
        )

    def describe(self) -> str:
        version = self.version_text or "of unknown version (taken as the newest)"
        release = self.release
        if release is None:
            return f"Machine Config Operator {version}: no boot image controller before 4.16"
        covered = ", ".join(sorted(self.covered_platforms())) or "no platform"
        gates = "FeatureGate status" if self.enabled_gates is not None else f"the {release.line} default gates"
        return f"Machine Config Operator {version}: its boot image controller covers {covered} ({gates})"

    @classmethod
    def from_objects(
        cls,
        cluster_operator: Mapping[str, Any] | None,
        feature_gate: Mapping[str, Any] | None,
        infrastructure: Mapping[str, Any] | None,
    ) -> MachineConfigOperator | None:
        """None when there is no `machine-config` ClusterOperator: no MCO, never `mco` (SPEC rule 2b)."""
        if not is_mapping(cluster_operator):
            return None
        text = _operator_version(cluster_operator)
        try:
            version = OcpVersion.parse(text, "ClusterOperator machine-config status.versions") if text else None
        except InputError:
            version = None
        cloud = get_path(infrastructure, ("status", "platformStatus", "azure", "cloudName"))
        return cls(text, version, _enabled_gates(feature_gate, text), cloud == AZURE_STACK_CLOUD)


def _operator_version(cluster_operator: Mapping[str, Any]) -> str | None:
    versions = get_path(cluster_operator, ("status", "versions"))
    for entry in versions if isinstance(versions, list) else ():
        if is_mapping(entry) and entry.get("name") == MCO_OPERATOR_VERSION_NAME:
            value = entry.get("version")
            return value if isinstance(value, str) and value else None
    return None


def _enabled_gates(feature_gate: Mapping[str, Any] | None, version: str | None) -> frozenset[str] | None:
    """`status.featureGates[]` entry of the MCO's version (the only entry when versions are not
    known); None when the FeatureGate says nothing usable."""
    entries = get_path(feature_gate, ("status", "featureGates"))
    usable = [e for e in entries if is_mapping(e)] if isinstance(entries, list) else []
    chosen = next((e for e in usable if version and e.get("version") == version), None)
    if chosen is None and len(usable) == 1:
        chosen = usable[0]
    if chosen is None:
        return None
    enabled = chosen.get("enabled")
    names = [g.get("name") for g in enabled if is_mapping(g)] if isinstance(enabled, list) else []
    return frozenset(n for n in names if isinstance(n, str))


@dataclass(frozen=True)
class ManagerFacts:
    """What decides managers besides the object itself."""

    mco: MachineConfigOperator | None = None  # None: no machine-config ClusterOperator
    # Labels that mark a GitOps-applied object besides Flux's (Argo CD label tracking, named by the
    # admin: `--gitops-label app.kubernetes.io/instance`).
    gitops_labels: tuple[str, ...] = ()


class Managed(Enrollable, Protocol):
    """What the manager rules read of an object (`MachineResource`, `capi.resources.CapiObject`)."""

    @property
    def owner_references(self) -> tuple[OwnerReference, ...]: ...
    @property
    def template_labels(self) -> Mapping[str, str]: ...


class Selection(Protocol):
    """What the MCO's enrollment needs of ours: it reads the same `spec.managedBootImages`."""

    def mco_selects(self, kind: str, labels: Mapping[str, str], default_on: bool) -> bool: ...


@dataclass(frozen=True)
class ManagerVerdict:
    manager: Manager
    why: str
    # The MCO's controller would manage it but for our claim or the hand-over annotation: claiming
    # it makes the MCO skip it, which its skew enforcement counts (SPEC section 3, companion rules).
    taken_from_mco: bool = False
    # Writers besides `manager` that will change this boot image (the MCO, for a Hive or GitOps
    # MachineSet it covers): a writer conflict.
    also_written_by: tuple[Manager, ...] = ()
    # Who exactly, where `manager` is a kind of writer: the field manager (`external`), the Hive
    # MachinePool (`hive`); `plan -o json` names it (SPEC rule 2b: "the decision names it").
    named: str | None = None


OURS_BY_DEFAULT = ManagerVerdict(Manager.OURS, "no other manager covers it")


def decide_manager(
    obj: Managed,
    platform: str | None,
    facts: ManagerFacts,
    selection: Selection,
    *,
    is_ours: IsOurs,
    coverage: tuple[bool, str],
) -> ManagerVerdict:
    """SPEC rule 2b's precedence for one object. `is_ours(api_version, kind, name)` tells our claim;
    `coverage` is whether our enrollment covers it and why not (`Enrollment.covers`), which the
    planner reads anyway."""
    mco_why = mco_manages(obj, platform, facts.mco, selection, ignore_ours=is_ours)
    claimed = any(is_ours(o.api_version, o.kind, o.name) for o in obj.owner_references)
    handed = obj.annotations.get(ANNOTATION_BOOT_IMAGE_MANAGER)
    if claimed or handed == Manager.OURS:
        how = "claimed by this controller (owner reference)" if claimed else \
            f"handed over by annotation {ANNOTATION_BOOT_IMAGE_MANAGER}={Manager.OURS}"
        if mco_why is not None:
            how += f"; the Machine Config Operator would otherwise manage it ({mco_why})"
        return ManagerVerdict(Manager.OURS, how, taken_from_mco=mco_why is not None)
    ignored = (f"; annotation {ANNOTATION_BOOT_IMAGE_MANAGER}={handed!r} ignored (only {Manager.OURS} is "
               "recognised)") if handed is not None else ""
    also = (Manager.MCO,) if mco_why is not None else ()
    pool = obj.labels.get(LABEL_HIVE_MACHINE_POOL)
    if pool is not None:
        return ManagerVerdict(Manager.HIVE, f"Hive MachinePool {pool} (label {LABEL_HIVE_MACHINE_POOL}){ignored}",
                              also_written_by=also, named=pool)
    gitops = gitops_marker(obj, facts.gitops_labels)
    if gitops is not None:
        return ManagerVerdict(Manager.GITOPS, f"applied from Git ({gitops}){ignored}", also_written_by=also)
    external = external_writer(obj, platform)
    if external is not None:
        return ManagerVerdict(Manager.EXTERNAL, f"{external[1]}{ignored}", also_written_by=also, named=external[0])
    if mco_why is not None:
        return ManagerVerdict(Manager.MCO, mco_why + ignored)
    enrolled, why = coverage
    if not enrolled:
        return ManagerVerdict(Manager.NOBODY, f"not enrolled ({why}): nobody updates its boot image{ignored}")
    return ManagerVerdict(Manager.OURS, OURS_BY_DEFAULT.why + ignored) if ignored else OURS_BY_DEFAULT


def _mco_manages_capi(obj: Managed, platform: str | None, mco: MachineConfigOperator, selection: Selection) -> str | None:
    """The MCO on Cluster API (MCO #6447, as its pull request describes it; not released yet): AWS
    only, behind both `ClusterAPIMachineManagement` (its CAPI informers start only then) and
    `ManagedBootImagesAWSCAPI` in the FeatureGate status, for the objects `managedBootImages` lists
    (apiGroup cluster.x-k8s.io); a MachineSet a MachineDeployment owns is its MachineDeployment's.
    Our claim is taken to stop it as it stops the Machine API path (the pull request says nothing of
    other owners): when unsure, we do not race it."""
    if platform != Platform.AWS or mco.release is None:
        return None
    if not (mco.gate_on(GATE_AWS_CAPI) and mco.gate_on(GATE_CAPI_MACHINE_MANAGEMENT)):
        return None
    if any(o.kind == "MachineDeployment" for o in obj.owner_references):
        return None
    if not selection.mco_selects(obj.kind, obj.labels, False):
        return None
    what = "MachineDeployments" if obj.kind == CAPI_MACHINEDEPLOYMENT else "MachineSets"
    return (f"the Machine Config Operator {mco.version_text or 'of unknown version'} updates AWS Cluster API {what} "
            f"itself (FeatureGates {GATE_CAPI_MACHINE_MANAGEMENT} and {GATE_AWS_CAPI})")


# The boot image field under providerSpec.value, per platform (SPEC rule 6).
BOOT_IMAGE_KEYS: Mapping[str, str] = {Platform.AWS: "ami", Platform.GCP: "disks", Platform.AZURE: "image", Platform.VSPHERE: "template"}


def other_writer_entries(entries: Any) -> list[Mapping[str, Any]]:
    """The managedFields entries that can make an object `external`: an unknown writer, not a person,
    that applied the object server-side or is a policy engine (see the module's docstring). Usually
    none: the informer cache keeps just these and drops the rest of managedFields."""
    out = []
    for entry in entries if isinstance(entries, list) else ():
        if not is_mapping(entry):
            continue
        manager, operation = str(entry.get("manager") or ""), str(entry.get("operation") or "")
        if not manager or manager.startswith((*KNOWN_FIELD_MANAGERS, *HUMAN_FIELD_MANAGER_PREFIXES)):
            continue
        if operation == "Apply" or manager.startswith(POLICY_FIELD_MANAGER_PREFIXES):
            out.append(entry)
    return out


def external_writer(obj: Managed, platform: str | None) -> tuple[str, str] | None:
    """(the field manager, a sentence naming it) of another writer that keeps the boot image field
    (see the module's docstring for which field managers count), or None."""
    raw = getattr(obj, "raw", None)
    spec_path = getattr(obj, "provider_spec_path", None)
    if not is_mapping(raw) or not spec_path:
        return None  # Cluster API objects: the boot image is in a template, replaced, not kept
    key = BOOT_IMAGE_KEYS.get(platform or "")
    keys = [key] if key is not None else list(BOOT_IMAGE_KEYS.values())
    for entry in other_writer_entries(get_path(raw, ("metadata", "managedFields"))):
        fields = get_path(entry.get("fieldsV1"), tuple(f"f:{p}" for p in spec_path if isinstance(p, str)))
        owned = next((k for k in keys if is_mapping(fields) and f"f:{k}" in fields), None)
        if owned is not None:
            operation = "server-side apply" if entry.get("operation") == "Apply" else "update"
            manager = str(entry.get("manager"))
            return manager, (f"kept by field manager {manager} ({operation} of providerSpec.value.{owned}, "
                             "metadata.managedFields); this controller proposes and never writes it")
    return None


def gitops_marker(obj: Managed, extra_labels: Sequence[str] = ()) -> str | None:
    """The annotation or label saying Argo CD or Flux applies this object, as `key=value`."""
    tracking = obj.annotations.get(ANNOTATION_ARGOCD_TRACKING_ID)
    if tracking is not None:
        return f"Argo CD, annotation {ANNOTATION_ARGOCD_TRACKING_ID}={tracking}"
    for label in (*FLUX_LABELS, *extra_labels):
        value = obj.labels.get(label)
        if value is not None:
            who = "Flux" if label in FLUX_LABELS else "GitOps"
            return f"{who}, label {label}={value}"
    return None


def mco_manages(
    obj: Managed,
    platform: str | None,
    mco: MachineConfigOperator | None,
    selection: Selection,
    *,
    ignore_ours: IsOurs | None = None,
) -> str | None:
    """Why the MCO's own controller reconciles this object, or None when it does not.

    Its skips (reference section 5): any owner reference (ours aside, when `ignore_ours` names it:
    the question is then whether it would manage the object without our claim), a stream label
    other than rhel-9 (4.22+), Windows; and what it never reconciles: Cluster API kinds, platforms
    or kinds its release and gates do not cover, objects its enrollment does not select.
    """
    if mco is None:
        return None
    if obj.kind in (CAPI_MACHINESET, CAPI_MACHINEDEPLOYMENT):
        return _mco_manages_capi(obj, platform, mco, selection)
    if obj.kind not in (MACHINESET_KIND, CPMS_KIND):
        return None
    release = mco.release
    if release is None or platform not in mco.covered_platforms():
        return None
    if obj.kind == CPMS_KIND and not (release.cpms and mco.gate_on(GATE_CPMS) and platform in CPMS_PLATFORMS):
        return None
    owners = [o for o in obj.owner_references if ignore_ours is None or not ignore_ours(o.api_version, o.kind, o.name)]
    if owners:
        return None
    stream = obj.labels.get(LABEL_OSSTREAM)
    if release.stream_label and stream is not None and stream != SUPPORTED_MCO_STREAM:
        return None
    if obj.template_labels.get(LABEL_OS_ID) == OS_ID_WINDOWS:
        return None
    if not selection.mco_selects(obj.kind, obj.labels, platform in release.default_on):
        return None
    version = mco.version_text or "of unknown version"
    what = "ControlPlaneMachineSets" if obj.kind == CPMS_KIND else "MachineSets"
    return f"the Machine Config Operator {version} updates {platform} {what} itself"


__all__ = [
    "LATEST_MCO_RELEASE",
    "MachineConfigOperator",
    "ManagerFacts",
    "ManagerVerdict",
    "McoRelease",
    "decide_manager",
    "external_writer",
    "gitops_marker",
    "mco_manages",
    "mco_release",
    "other_writer_entries",
]
