"""Every name the controller shares with the cluster, in one place.

These strings are interfaces (SPEC sections 1-6): annotation keys, label keys, object names,
condition types, reasons and metric names are read by administrators, dashboards and the Machine
Config Operator. Change none of them without changing SPEC.md first.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

# --- namespaces and well-known objects -------------------------------------------------------
MCO_NAMESPACE: Final = "openshift-machine-config-operator"
MAPI_NAMESPACE: Final = "openshift-machine-api"

BOOTIMAGES_CONFIGMAP: Final = "coreos-bootimages"
CM_KEY_STREAM: Final = "stream"
CM_KEY_STREAMS: Final = "streams"
CM_KEY_RELEASE_VERSION: Final = "releaseVersion"
# The installer writes this placeholder; `oc adm release new` substitutes it (OCPBUGS-19824).
UNKNOWN_RELEASE_VERSION: Final = "0.0.1-snapshot"

MACHINE_API_GROUP: Final = "machine.openshift.io"
MACHINESET_VERSION: Final = "v1beta1"
MACHINESET_PLURAL: Final = "machinesets"
MACHINESET_KIND: Final = "MachineSet"
CPMS_VERSION: Final = "v1"
CPMS_PLURAL: Final = "controlplanemachinesets"
CPMS_KIND: Final = "ControlPlaneMachineSet"
CPMS_NAME: Final = "cluster"
# Machines (boot verification, SPEC section 3b): what a MachineSet creates.
MACHINE_VERSION: Final = "v1beta1"
MACHINE_PLURAL: Final = "machines"
MACHINE_KIND: Final = "Machine"

# Cluster API (issue 16, docs/capi.md). CAPI kinds share names with the Machine API's, so inside the
# controller (informer roles, decision `kind`, keys) they go by `Kind.group`, as kubectl spells them.
CAPI_GROUP: Final = "cluster.x-k8s.io"
CAPI_NAMESPACE: Final = "openshift-cluster-api"
CAPI_VERSIONS: Final = ("v1beta2", "v1beta1")  # served by the controller, newest first
CAPI_MACHINESET: Final = "MachineSet.cluster.x-k8s.io"
CAPI_MACHINEDEPLOYMENT: Final = "MachineDeployment.cluster.x-k8s.io"
CAPI_MACHINEDEPLOYMENT_PLURAL: Final = "machinedeployments"
CAPI_KINDS: Final = {CAPI_MACHINESET: MACHINESET_PLURAL, CAPI_MACHINEDEPLOYMENT: CAPI_MACHINEDEPLOYMENT_PLURAL}
CAPI_CLUSTER_KIND: Final = "Cluster"
INFRASTRUCTURE_GROUP: Final = "infrastructure.cluster.x-k8s.io"
# The providers' infrastructure machine templates: kind -> (version, plural).
INFRA_TEMPLATES: Final = {
    "AWSMachineTemplate": ("v1beta2", "awsmachinetemplates"),
    "GCPMachineTemplate": ("v1beta1", "gcpmachinetemplates"),
    "AzureMachineTemplate": ("v1beta1", "azuremachinetemplates"),
    "VSphereMachineTemplate": ("v1beta1", "vspheremachinetemplates"),
}
# The infrastructure machines a template's Machines are cloned into (template kind -> (version,
# plural)), and the annotation CAPI writes on each naming the template it was cloned from: a template
# a machine was cloned from is in use until that machine is gone (docs/capi.md, "Where the boot image is, and what is written").
INFRA_MACHINES: Final = {
    "AWSMachineTemplate": ("v1beta2", "awsmachines"),
    "GCPMachineTemplate": ("v1beta1", "gcpmachines"),
    "AzureMachineTemplate": ("v1beta1", "azuremachines"),
    "VSphereMachineTemplate": ("v1beta1", "vspheremachines"),
}
ANNOTATION_CLONED_FROM_NAME: Final = "cluster.x-k8s.io/cloned-from-name"
# The labels CAPI puts on a Machine naming its MachineSet and MachineDeployment (boot verification
# counts a Machine for both; a name over 63 characters is hashed by CAPI, and then only the owner
# reference finds the MachineSet).
# The Hive MachinePool field that sets a pool's boot image, per platform, and the key of the
# MachineSet's boot image value it takes (hive #2935: AWS only).
# The reason of a reconcile that got no answer from the API server once its retries ran out (the
# `reason` label of bootimage_controller_reconcile_errors_total, and the log line's).
RECONCILE_REASON_UNREACHABLE: Final = "APIServerUnreachable"
HIVE_BOOT_IMAGE_FIELDS: Final = {"AWS": ("spec.platform.aws.amiID", "id")}
LABEL_CAPI_SET_NAME: Final = "cluster.x-k8s.io/set-name"
LABEL_CAPI_DEPLOYMENT_NAME: Final = "cluster.x-k8s.io/deployment-name"
CAPI_MACHINE_KIND: Final = "Machine"
CAPI_MACHINE_PLURAL: Final = "machines"
# Machine API MachineSet status.authoritativeAPI (the MachineAPIMigration feature).
AUTHORITATIVE_MACHINE_API: Final = "MachineAPI"
NON_AUTHORITATIVE: Final = frozenset({"ClusterAPI", "Migrating"})

OPERATOR_GROUP: Final = "operator.openshift.io"
OPERATOR_VERSION: Final = "v1"
MACHINECONFIGURATION_PLURAL: Final = "machineconfigurations"
MACHINECONFIGURATION_KIND: Final = "MachineConfiguration"
MACHINECONFIGURATION_NAME: Final = "cluster"

CONFIG_GROUP: Final = "config.openshift.io"
CONFIG_VERSION: Final = "v1"
INFRASTRUCTURE_PLURAL: Final = "infrastructures"
INFRASTRUCTURE_NAME: Final = "cluster"
# Infrastructure status.controlPlaneTopology of a single-node cluster (skew policy, Lease timings).
SINGLE_REPLICA_TOPOLOGY: Final = "SingleReplica"
CLUSTERVERSION_PLURAL: Final = "clusterversions"
CLUSTERVERSION_NAME: Final = "version"
CLUSTEROPERATOR_PLURAL: Final = "clusteroperators"
# The Machine Config Operator's own ClusterOperator (its version: `status.versions[name=operator]`)
# and the cluster's FeatureGate (`status.featureGates[].enabled`), read for SPEC rule 2b.
MCO_CLUSTER_OPERATOR: Final = "machine-config"
MCO_OPERATOR_VERSION_NAME: Final = "operator"
FEATUREGATE_PLURAL: Final = "featuregates"
FEATUREGATE_NAME: Final = "cluster"
DEFAULT_CLUSTER_OPERATOR: Final = "machine-config-bootimages"

# Where the providerSpec lives, per kind (SPEC section 1).
MACHINESET_PROVIDER_SPEC_PATH: Final = ("spec", "template", "spec", "providerSpec", "value")
CPMS_PROVIDER_SPEC_PATH: Final = (
    "spec",
    "template",
    "machines_v1beta1_machine_openshift_io",
    "spec",
    "providerSpec",
    "value",
)
MACHINESET_TEMPLATE_LABELS_PATH: Final = ("spec", "template", "metadata", "labels")
CPMS_TEMPLATE_LABELS_PATH: Final = (
    "spec",
    "template",
    "machines_v1beta1_machine_openshift_io",
    "metadata",
    "labels",
)

# --- labels ---------------------------------------------------------------------------------
LABEL_OSSTREAM: Final = "machineconfiguration.openshift.io/osstream"
LABEL_OS_ID: Final = "machine.openshift.io/os-id"
OS_ID_WINDOWS: Final = "Windows"
LABEL_ARCH: Final = "kubernetes.io/arch"
CONTROL_PLANE_NODE_LABELS: Final = (
    "node-role.kubernetes.io/master",
    "node-role.kubernetes.io/control-plane",
)

# --- annotations ----------------------------------------------------------------------------
ANNOTATION_AUTOSCALER_LABELS: Final = "capacity.cluster-autoscaler.kubernetes.io/labels"
ANNOTATION_BOOT_IMAGE_UPDATES: Final = "machineconfiguration.openshift.io/boot-image-updates"
BOOT_IMAGE_UPDATES_DISABLED: Final = "Disabled"

_MCO: Final = "machineconfiguration.openshift.io"
ANNOTATION_RELEASE: Final = f"{_MCO}/boot-image-release"
ANNOTATION_STREAM: Final = f"{_MCO}/boot-image-stream"
ANNOTATION_UPDATED_AT: Final = f"{_MCO}/boot-image-updated-at"
ANNOTATION_PREVIOUS: Final = f"{_MCO}/boot-image-previous"
ANNOTATION_HOT_LOOP: Final = f"{_MCO}/boot-image-hot-loop"
ANNOTATION_STUB_UPGRADED_TO: Final = f"{_MCO}/stub-ignition-upgraded-to"
ANNOTATION_STUB_UPGRADED_AT: Final = f"{_MCO}/stub-ignition-upgraded-at"
ANNOTATION_ALEPH_VERSION: Final = f"{_MCO}/aleph-version"
# On a CAPI infrastructure template this controller wrote: the template it replaced (docs/capi.md).
ANNOTATION_REPLACES: Final = f"{_MCO}/boot-image-replaces"
# An administrator hands a MachineSet to this controller (value `bootimage-controller`, SPEC rule 2b).
ANNOTATION_BOOT_IMAGE_MANAGER: Final = f"{_MCO}/boot-image-manager"
# Boot verification (SPEC section 3b): the verdict on a MachineSet's boot image (JSON), and the
# label of a canary Machine (its MachineSet's name: it counts for that MachineSet only).
ANNOTATION_BOOT_IMAGE_VERIFIED: Final = f"{_MCO}/boot-image-verified"
LABEL_BOOT_IMAGE_CANARY: Final = f"{_MCO}/boot-image-canary"
# The canary (SPEC section 3b): a MachineSet annotated `boot-image-canary: Enabled` gets one canary
# Machine after each boot image write of the daemon (the annotation shares the label's key). On the
# canary Machine: who runs it (`daemon` or `verify-boot`), and when it is deleted whatever it shows.
ANNOTATION_BOOT_IMAGE_CANARY: Final = LABEL_BOOT_IMAGE_CANARY
BOOT_IMAGE_CANARY_ENABLED: Final = "Enabled"
ANNOTATION_CANARY_RUNNER: Final = f"{_MCO}/boot-image-canary-runner"
ANNOTATION_CANARY_DEADLINE: Final = f"{_MCO}/boot-image-canary-deadline"
CANARY_RUNNER_DAEMON: Final = "daemon"
CANARY_RUNNER_VERIFY_BOOT: Final = "verify-boot"
# The label every Machine API Machine must carry: the machine controller refuses one without it
# (machine-api-operator `validateMachine`: "missing machine.openshift.io/cluster-api-cluster label").
LABEL_MACHINE_CLUSTER_ID: Final = "machine.openshift.io/cluster-api-cluster"
# How long a Machine whose instance runs may go without a Node before its image counts as failed
# (`run --first-boot-timeout`). MachineHealthCheck's nodeStartupTimeout defaults to 10m on
# OpenShift; a first boot also pulls and pivots to the release's OS image, hence twice that.
DEFAULT_FIRST_BOOT_TIMEOUT: Final = 20 * 60.0

# --- other managers of MachineSets (SPEC section 2 rule 2b, docs/install.md "Who updates what") ----
# Hive's MachinePool controller labels the MachineSets it keeps on a spoke cluster with its pool.
LABEL_HIVE_MACHINE_POOL: Final = "hive.openshift.io/machine-pool"
# Argo CD's annotation resource tracking (the default from Argo CD 3.0 and OpenShift GitOps 1.15).
ANNOTATION_ARGOCD_TRACKING_ID: Final = "argocd.argoproj.io/tracking-id"
# Flux's kustomize-controller and helm-controller label every object they apply.
FLUX_LABELS: Final = ("kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name")
# Argo CD's label tracking (`application.instanceLabelKey`, `app.kubernetes.io/instance` by default)
# is a common label Helm sets too, so it counts only when named (`--gitops-label`).
ARGOCD_DEFAULT_INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
# Field managers of metadata.managedFields that are known writers of MachineSets (SPEC rule 2b): a
# manager that owns the boot image field and is none of these (nor a person's tool) is `external`.
KNOWN_FIELD_MANAGERS: Final = (
    "bootimage-controller",  # this controller (its client's user agent)
    "machine-config-controller", "machine-config-operator", "mco-bootimage-controller",  # the MCO
    "argocd-controller", "argocd-application-controller", "argocd-server",  # Argo CD
    "kustomize-controller", "helm-controller",  # Flux
    "hive", "hive-controller", "hive-operator", "hiveadmission",  # Hive
)
# Policy and automation engines that keep fields with plain updates (not server-side apply): their
# Update of the boot image field makes the MachineSet `external` too. Prefixes.
POLICY_FIELD_MANAGER_PREFIXES: Final = (
    "config-policy-controller", "governance-policy", "kyverno", "gatekeeper", "crossplane", "terraform", "pulumi",
)
# A person's one-off edit is not a writer that comes back: `oc edit`, `kubectl patch`, the console.
HUMAN_FIELD_MANAGER_PREFIXES: Final = ("kubectl", "oc", "Mozilla", "openshift-console")
# What `kubectl apply` (and Argo CD's client-side apply) last applied: for a GitOps-tracked object,
# what Git holds (SPEC section 3, writer conflicts).
ANNOTATION_LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
# Flux's per-object apply policy: `IfNotPresent` creates the object and never corrects it again.
ANNOTATION_FLUX_SSA: Final = "kustomize.toolkit.fluxcd.io/ssa"
# The label a writer-conflict fix puts on a MachineSet (in Git, for a GitOps one) where no label of
# its own tells it apart, so a Partial `machineResourceSelector` can leave it out of the MCO's
# enrollment (docs/install.md, "Writer conflicts"). Its value names the writer that keeps it.
LABEL_BOOT_IMAGE_WRITER: Final = f"{_MCO}/boot-image-writer"

# --- claims ---------------------------------------------------------------------------------
# The ClusterRoles of manifests/rbac-users.yaml a 403 names (kube/forbidden.py).
ROLE_READER: Final = "bootimage-controller-reader"  # plan --from-cluster, fleet
ROLE_OPERATOR: Final = "bootimage-controller-operator"  # rollback, hand-over, hand-back, release-claims
ROLE_DAEMON: Final = "bootimage-controller"  # `run`: manifests/rbac-controller.yaml
CLAIM_HOLDER_NAME: Final = "machineset-boot-image-controller"
CLAIM_HOLDER_NAMESPACE: Final = MAPI_NAMESPACE
CLAIM_FINALIZER: Final = f"{_MCO}/boot-image-claims"
LEASE_NAME: Final = "bootimage-controller"

# --- stub Ignition (SPEC section 3) ---------------------------------------------------------
# The key of the user-data Secret (`providerSpec.userDataSecret.name`) that holds the Ignition config.
USER_DATA_SECRET_KEY: Final = "userData"
# Spec 2.x stubs are converted to the Ignition v3_5 types' MaxVersion, as the Machine Config
# Operator does (reference section 7); a new boot image only understands spec 3.
STUB_IGNITION_TARGET_VERSION: Final = "3.5.0"

# --- hot loop -------------------------------------------------------------------------------
# Three writes of the same target are allowed; the fourth is refused (MCO HotLoopLimit = 3).
HOT_LOOP_LIMIT: Final = 3
# The claim holder's `data` key keeping a MachineSet's hot-loop count (+ its uid), where a writer
# that replaces the MachineSet (oc replace, GitOps) cannot erase it with our annotation.
HOT_LOOP_KEY_PREFIX: Final = "hot-loop."

# --- skew -------------------------------------------------------------------------------------
# The Machine Config Operator's compile-time limits (pkg/controller/common/constants.go).
DEFAULT_OCP_SKEW_LIMIT: Final = "4.13.0"
DEFAULT_RHEL_SKEW_LIMIT: Final = "9.2"
# Where the project's docs are read (runbooks, install guide): `runbook_url` on every alert and
# `plan`'s "What to do" line point here. BOOTIMAGE_DOCS_URL (and the kustomization's
# `bootimage-controller-docs` ConfigMap) points them at a copy of your own: a mirror for a
# disconnected cluster, an internal wiki.
DOCS_BASE_URL: Final = "https://github.com/bootimage-controller/bootimage-controller/blob/main/docs"
ENV_DOCS_URL: Final = "BOOTIMAGE_DOCS_URL"
SKEW_DOCS_URL: Final = (
    "https://docs.redhat.com/en/documentation/openshift_container_platform/{version}"
    "/html/machine_configuration/mco-update-boot-skew-mgmt"
)
# The osstream label values the per-stream skew rule judges: `rhel-<major>`.
OSSTREAM_RHEL_PREFIX: Final = "rhel-"
# Aleph files (reference/stream-metadata.md section 5.1): CoreOS path first, then bootc's.
SYSROOT_PATH: Final = "/sysroot"
ALEPH_FILE: Final = ".coreos-aleph-version.json"
BOOTC_ALEPH_FILE: Final = ".bootc-aleph.json"
# How often the aleph-report node agent re-checks its Node's annotation (seconds).
DEFAULT_ALEPH_REPORT_INTERVAL: Final = 600.0

# --- cloud ----------------------------------------------------------------------------------
AWS_RED_HAT_OWNER: Final = "531415883065"
AWS_MARKETPLACE_OWNER: Final = "679593333241"
GCP_RHCOS_IMAGE_PREFIX: Final = "projects/rhcos-cloud/global/images/"
AWS_CREDENTIALS_SECRET: Final = "aws-cloud-credentials"
GCP_CREDENTIALS_SECRET: Final = "gcp-cloud-credentials"
AZURE_CREDENTIALS_SECRET: Final = "azure-cloud-credentials"
VSPHERE_CREDENTIALS_SECRET: Final = "vsphere-cloud-credentials"
# Where the daemon keeps downloaded OVAs (an emptyDir in manifests/deployment.yaml).
DEFAULT_OVA_CACHE_DIR: Final = "/var/cache/bootimage-controller/ova"
# Never user data, whatever a MachineSet's providerSpec.userDataSecret says: the stub Ignition
# upgrade refuses to read or write them (a hostile or mistaken MachineSet must not get the
# controller to rewrite cloud credentials).
CLOUD_CREDENTIALS_SECRETS: Final = frozenset(
    {AWS_CREDENTIALS_SECRET, GCP_CREDENTIALS_SECRET, AZURE_CREDENTIALS_SECRET, VSPHERE_CREDENTIALS_SECRET}
)

# --- architectures --------------------------------------------------------------------------
# Kubernetes (GOARCH) name -> RPM name used as the stream metadata key.
KUBE_TO_RPM_ARCH: Final = {
    "amd64": "x86_64",
    "arm64": "aarch64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}
RPM_ARCHES: Final = frozenset(KUBE_TO_RPM_ARCH.values())


class Platform(StrEnum):
    """Infrastructure `status.platformStatus.type` values this controller knows by name."""

    AWS = "AWS"
    GCP = "GCP"
    AZURE = "Azure"
    VSPHERE = "VSphere"
    BAREMETAL = "BareMetal"
    NONE = "None"


# Platforms whose MachineSets are enrolled by default (SPEC section 2 rule 1).
DEFAULT_ENROLLED_PLATFORMS: Final = frozenset(
    {Platform.AWS, Platform.GCP, Platform.AZURE, Platform.VSPHERE}
)
CPMS_PLATFORMS: Final = frozenset({Platform.AWS, Platform.GCP, Platform.AZURE})
# The Cluster API infrastructure template kind of each platform whose boot images are managed.
PLATFORM_TEMPLATE_KIND: Final[dict[str, str]] = {
    Platform.AWS: "AWSMachineTemplate",
    Platform.GCP: "GCPMachineTemplate",
    Platform.AZURE: "AzureMachineTemplate",
    Platform.VSPHERE: "VSphereMachineTemplate",
}

# providerSpec `kind` -> platform.
PROVIDER_KIND_PLATFORM: Final = {
    "AWSMachineProviderConfig": Platform.AWS,
    "GCPMachineProviderSpec": Platform.GCP,
    "AzureMachineProviderSpec": Platform.AZURE,
    "VSphereMachineProviderSpec": Platform.VSPHERE,
}


class Manager(StrEnum):
    """Who updates a MachineSet's boot image (SPEC section 2 rule 2b, `manager` in `plan -o json`)."""

    MCO = "mco"
    HIVE = "hive"
    GITOPS = "gitops"
    EXTERNAL = "external"  # another writer owns the boot image field in metadata.managedFields
    OURS = "bootimage-controller"
    # Not enrolled, and no other writer: nobody updates its boot image (the MCO reads the same
    # enrollment). Not counted as anyone's (issue 47: a ControlPlaneMachineSet left out is not ours).
    NOBODY = "nobody"


class Action(StrEnum):
    PATCH = "patch"
    NOOP = "noop"
    SKIP = "skip"
    ERROR = "error"


class Reason(StrEnum):
    """Decision reasons (SPEC section 2). CamelCase, stable, machine-readable."""

    NOT_ENROLLED = "NotEnrolled"
    OWNED_BY_OTHER = "OwnedByOther"
    WINDOWS = "Windows"
    STREAM_NOT_AVAILABLE = "StreamNotAvailable"
    STREAM_CHANGE_REQUIRES_LABEL = "StreamChangeRequiresLabel"
    ARCHITECTURE_UNKNOWN = "ArchitectureUnknown"
    INVALID_ARCHITECTURE = "InvalidArchitecture"
    ARCHITECTURE_NOT_IN_STREAM = "ArchitectureNotInStream"
    UNSUPPORTED_IMAGE_REFERENCE = "UnsupportedImageReference"
    REGION_NOT_IN_STREAM = "RegionNotInStream"
    CUSTOM_BOOT_IMAGE = "CustomBootImage"
    UNKNOWN_BOOT_IMAGE = "UnknownBootImage"
    IMAGE_NOT_IN_STREAM = "ImageNotInStream"
    UNSUPPORTED_ARCHITECTURE = "UnsupportedArchitecture"
    UNSUPPORTED_SECURITY_TYPE = "UnsupportedSecurityType"
    MARKETPLACE_DATA_MISSING = "MarketplaceDataMissing"
    MARKETPLACE_IMAGE_NOT_FOUND = "MarketplaceImageNotFound"
    VCENTER_UNAVAILABLE = "VCenterUnavailable"
    UNSUPPORTED_PLATFORM = "UnsupportedPlatform"
    UP_TO_DATE = "UpToDate"
    BOOT_IMAGE_OUTDATED = "BootImageOutdated"
    INVALID_PROVIDER_SPEC = "InvalidProviderSpec"
    INVALID_OBJECT = "InvalidObject"
    INVALID_STREAM_DATA = "InvalidStreamData"
    # The stream parsed, but the entry this MachineSet needs is not a usable boot image (an empty or
    # malformed id, a wrong type): the message names the stream, ConfigMap key and JSON path.
    BOOT_IMAGES_CONFIGMAP_INVALID = "BootImagesConfigMapInvalid"
    TARGET_IMAGE_NOT_FOUND = "TargetImageNotFound"
    # The cloud says the target image is deprecated (AWS DeprecationTime past, GCP deprecated.state):
    # never written (issue 34, item 4).
    TARGET_IMAGE_DEPRECATED = "TargetImageDeprecated"
    # The golden image failed its first boot on this MachineSet and was rolled back: never written
    # to it again while the golden data names it (SPEC section 3b).
    TARGET_IMAGE_FAILED_FIRST_BOOT = "TargetImageFailedFirstBoot"
    CLOUD_UNAVAILABLE = "CloudUnavailable"
    HOT_LOOP = "HotLoop"
    USER_DATA_INVALID = "UserDataInvalid"
    PATCH_FAILED = "PatchFailed"
    # vSphere (docs/vsphere.md): the workspace matches no failure domain of the Infrastructure; a
    # template name over vCenter's 80 characters; the stream's OVA could not be fetched (skip, retried);
    # its sha256 is not the stream's; a vCenter step of the template refresh failed (retried).
    # Cluster API (docs/capi.md): a CAPI MachineSet its MachineDeployment manages; a Machine API
    # MachineSet (or the CAPI mirror) that is not the authoritative side of its machine pool; a
    # MachineDeployment mid-rollout; an infrastructureRef whose template is missing or not a known kind.
    OWNED_BY_MACHINE_DEPLOYMENT = "OwnedByMachineDeployment"
    NOT_AUTHORITATIVE = "NotAuthoritative"
    ROLLOUT_IN_PROGRESS = "RolloutInProgress"
    TEMPLATE_NOT_FOUND = "InfrastructureTemplateNotFound"
    FAILURE_DOMAIN_NOT_FOUND = "FailureDomainNotFound"
    TEMPLATE_NAME_TOO_LONG = "TemplateNameTooLong"
    OVA_UNAVAILABLE = "OvaUnavailable"
    OVA_CHECKSUM_MISMATCH = "OvaChecksumMismatch"
    TEMPLATE_REFRESH_FAILED = "TemplateRefreshFailed"


# Skips an administrator can act on get a Warning event (SPEC section 3, Events).
ACTIONABLE_SKIPS: Final = frozenset(
    {
        Reason.STREAM_NOT_AVAILABLE,
        Reason.STREAM_CHANGE_REQUIRES_LABEL,
        Reason.ARCHITECTURE_UNKNOWN,
        Reason.ARCHITECTURE_NOT_IN_STREAM,
        Reason.REGION_NOT_IN_STREAM,
        Reason.UNKNOWN_BOOT_IMAGE,
        Reason.MARKETPLACE_DATA_MISSING,
        Reason.MARKETPLACE_IMAGE_NOT_FOUND,
        Reason.TARGET_IMAGE_NOT_FOUND,
        Reason.TARGET_IMAGE_DEPRECATED,
        Reason.OVA_UNAVAILABLE,
    }
)


# --- conditions -----------------------------------------------------------------------------
CONDITION_PROGRESSING: Final = "BootImageUpdateProgressing"
CONDITION_DEGRADED: Final = "BootImageUpdateDegraded"
CO_AVAILABLE: Final = "Available"
CO_PROGRESSING: Final = "Progressing"
CO_DEGRADED: Final = "Degraded"
CO_UPGRADEABLE: Final = "Upgradeable"
# The kind labels in our condition messages (the Machine Config Operator's wording).
MAPI_MACHINESETS_LABEL: Final = "MAPI MachineSets"
CAPI_MACHINESETS_LABEL: Final = "CAPI MachineSets"
CAPI_MACHINEDEPLOYMENTS_LABEL: Final = "CAPI MachineDeployments"
CPMS_LABEL: Final = "ControlPlaneMachineSets"
# metav1.Condition caps messages at 32768 characters; longer ones fail validation.
CONDITION_MESSAGE_MAX: Final = 32768


class ConditionReason(StrEnum):
    """Reasons on our MachineConfiguration and ClusterOperator conditions (not decision reasons)."""

    AS_EXPECTED = "AsExpected"
    RECONCILED = "Reconciled"
    RECONCILING = "Reconciling"
    MACHINE_SET_ERRORS = "MachineSetErrors"
    BOOT_IMAGES_CONFIGMAP_INVALID = "BootImagesConfigMapInvalid"
    CLUSTER_NOT_STABLE = "ClusterNotStable"
    INITIALIZING = "Initializing"
    NOT_EVALUATED = "NotEvaluated"


class SkewReason(StrEnum):
    AS_EXPECTED = "AsExpected"
    CLUSTER_BOOT_IMAGE_SKEW_ERROR = "ClusterBootImageSkewError"
    BOOT_IMAGE_UPDATE_DEGRADED = "BootImageUpdateDegraded"


class SkewMode(StrEnum):
    AUTOMATIC = "Automatic"
    MANUAL = "Manual"
    NONE = "None"


# --- events ---------------------------------------------------------------------------------
EVENT_UPDATED: Final = "BootImageUpdated"
EVENT_SKIPPED: Final = "BootImageUpdateSkipped"
EVENT_FAILED: Final = "BootImageUpdateFailed"
EVENT_HOT_LOOP: Final = "HotLoop"
# GitOps-managed: the JSON patch this controller would send, for the admin to commit (SPEC section 3).
EVENT_PROPOSED: Final = "BootImageUpdateProposed"
# MCO-managed: the MachineSet stays on another image than our target after the MCO's pass.
EVENT_DISAGREEMENT: Final = "BootImageDisagreement"
# The MCO's informers resync every 20 to 40 minutes: a disagreement that outlives the longest of them
# is not a pass in flight (`run --disagreement-grace`).
DEFAULT_DISAGREEMENT_GRACE: Final = 40 * 60.0
# Every key is planned again at least this often (`run --resync-period`): an outage that ended, a
# cloud answer that changed, anything no watch event tells (issue 24). Plans that find nothing to do
# write nothing.
DEFAULT_RESYNC_PERIOD: Final = 10 * 60.0
# Before claiming a MachineSet handed over from the MCO: the MCO's skew enforcement would then hold
# upgrades (it resets its record to the install version for every MachineSet it skips).
EVENT_CLAIM_HOLDS_UPGRADES: Final = "BootImageClaimWouldHoldUpgrades"
# Two writers would change one MachineSet: the MCO and GitOps or Hive (SPEC section 3, writer conflicts).
EVENT_WRITER_CONFLICT: Final = "BootImageWriterConflict"
# The cloud says the image a MachineSet boots now is deprecated: scale-up may fail (SPEC section 6).
EVENT_DEPRECATED: Final = "BootImageDeprecated"
# Boot verification (SPEC section 3b).
EVENT_FIRST_BOOT_FAILED: Final = "BootImageFirstBootFailed"
EVENT_VERIFIED: Final = "BootImageVerified"
EVENT_ROLLED_BACK: Final = "BootImageRolledBack"
# The daemon's canary (SPEC section 3b): started (Normal), or could not be made or recorded (Warning).
EVENT_CANARY_STARTED: Final = "BootImageCanaryStarted"
EVENT_CANARY_NOT_RUN: Final = "BootImageCanaryNotRun"
EVENT_COMPONENT: Final = "bootimage-controller"
# The events.k8s.io/v1 `note` limit; core/v1 has none, but a longer message helps nobody.
MAX_EVENT_MESSAGE: Final = 1024
EVENT_TYPE_NORMAL: Final = "Normal"
EVENT_TYPE_WARNING: Final = "Warning"

# --- metrics (SPEC section 6) ---------------------------------------------------------------
METRIC_MACHINESETS: Final = "bootimage_controller_machinesets"
METRIC_PATCHES: Final = "bootimage_controller_patches"  # prometheus-client appends _total
METRIC_RECONCILE_DURATION: Final = "bootimage_controller_reconcile_duration_seconds"
METRIC_API_REQUESTS: Final = "bootimage_controller_api_requests"  # _total appended
METRIC_SKEW_UPGRADEABLE: Final = "bootimage_controller_skew_upgradeable"
METRIC_SKEW_NONE: Final = "bootimage_controller_skew_enforcement_none"
METRIC_CLUSTER_BOOT_IMAGE: Final = "bootimage_controller_cluster_boot_image"  # _info appended
METRIC_DISAGREEMENTS: Final = "bootimage_controller_disagreements"
METRIC_WRITER_CONFLICTS: Final = "bootimage_controller_writer_conflicts"
METRIC_DEPRECATED: Final = "bootimage_controller_boot_image_deprecated"
# Boot verification (SPEC section 3b): 1 verified, 0 unverified, -1 failed; failures counted.
METRIC_BOOT_IMAGE_VERIFIED: Final = "bootimage_controller_boot_image_verified"
METRIC_FIRST_BOOT_FAILURES: Final = "bootimage_controller_first_boot_failures"  # _total appended
# Per pool, for fleets that aggregate (Thanos, ACM Observability): which boot image, how old, how far behind.
METRIC_POOL_BOOT_IMAGE: Final = "bootimage_controller_machineset_boot_image"  # _info appended
METRIC_POOL_BOOT_IMAGE_AGE: Final = "bootimage_controller_machineset_boot_image_age_seconds"
METRIC_POOL_RELEASES_BEHIND: Final = "bootimage_controller_machineset_boot_image_releases_behind"
# Not in the SPEC's list: an addition, for dashboards and the benchmark's "settled" signal.
METRIC_EVENTS_PENDING: Final = "bootimage_controller_events_pending"
METRIC_LEADER: Final = "bootimage_controller_leader"
METRIC_RECONCILE_ERRORS: Final = "bootimage_controller_reconcile_errors"  # _total appended
# vSphere template refreshes (docs/vsphere.md)
METRIC_OVA_DOWNLOADS: Final = "bootimage_controller_vsphere_ova_downloads"  # _total appended
METRIC_OVA_DOWNLOAD_BYTES: Final = "bootimage_controller_vsphere_ova_download_bytes"  # _total appended
METRIC_TEMPLATE_IMPORTS: Final = "bootimage_controller_vsphere_template_imports"  # _total appended
METRIC_TEMPLATE_IMPORT_DURATION: Final = "bootimage_controller_vsphere_template_import_duration_seconds"
METRIC_TEMPLATES: Final = "bootimage_controller_vsphere_templates"

# `plan -o`
OUTPUT_FORMATS: Final = ("table", "wide", "json", "yaml")  # wide: the table, every column in full

# Request content types of the two patch kinds we send.
MERGE_PATCH: Final = "application/merge-patch+json"  # RFC 7386
JSON_PATCH: Final = "application/json-patch+json"  # RFC 6902


# ---- HyperShift (fleet: HostedClusters and their NodePools, read only) ----------------------------
HYPERSHIFT_GROUP: Final = "hypershift.openshift.io"
HYPERSHIFT_VERSION: Final = "v1beta1"
HOSTED_CLUSTER_KIND: Final = "HostedCluster"
NODE_POOL_KIND: Final = "NodePool"

# ---- Hive (fleet on a hub: MachinePools and their ClusterDeployments, read only) -----------------
HIVE_GROUP: Final = "hive.openshift.io"
HIVE_VERSION: Final = "v1"
CLUSTER_DEPLOYMENT_KIND: Final = "ClusterDeployment"
MACHINE_POOL_KIND: Final = "MachinePool"
# Hive keeps the spoke's current version on its ClusterDeployment in this label.
LABEL_HIVE_VERSION: Final = "hive.openshift.io/version-major-minor-patch"
