"""The `bootimage-controller` command (SPEC section 4).

`plan` runs here; `run`, `release-claims` and `rollback` (the daemon) and `aleph-report` (the node
agent) are imported only when chosen, so `plan` starts fast and needs no cluster libraries beyond
what it uses. Exit codes: 0 done, 1 bad input (the message names file, object and field), 2 usage,
3 `plan --fail-on-skew` with upgrades held. Bad input never prints a traceback: every error this
project raises on purpose is a `BootImageControllerError`, printed as `error: <message>`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import structlog

from .. import __version__
from ..constants import (
    ARGOCD_DEFAULT_INSTANCE_LABEL,
    DEFAULT_CLUSTER_OPERATOR,
    DEFAULT_DISAGREEMENT_GRACE,
    DEFAULT_FIRST_BOOT_TIMEOUT,
    DEFAULT_OCP_SKEW_LIMIT,
    DEFAULT_OVA_CACHE_DIR,
    DEFAULT_RESYNC_PERIOD,
    DEFAULT_RHEL_SKEW_LIMIT,
    MAPI_NAMESPACE,
    OUTPUT_FORMATS,
    VSPHERE_CREDENTIALS_SECRET,
    Platform,
)
from ..errors import BootImageControllerError, InputError, VersionError

if TYPE_CHECKING:
    from ..core.model import BootImageDecision
    from ..plan.inputs import PreparedPlan

log = structlog.get_logger(__name__)

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_SKEW = 3
EXIT_DOWNGRADE = 4  # --fail-on-downgrade: --bootimages is older than the cluster
EXIT_CANNOT_JUDGE = 5  # --fail-on-downgrade: there is no release to compare (issue 27: never a silent 0)
# --cloud-verify could not ask a cloud the plan needed (its SDK or credentials missing): the plan was
# made with the offline rules for it, and a script must not take it for a verified one (issue 47).
EXIT_NOT_VERIFIED = 6

ENV_GCP_ENDPOINT = "BOOTIMAGE_GCP_ENDPOINT"
ENV_OVA_MIRROR = "BOOTIMAGE_OVA_MIRROR"
ENV_AZURE_ENDPOINT = "BOOTIMAGE_AZURE_ENDPOINT"
ENV_AZURE_AUTHORITY = "BOOTIMAGE_AZURE_AUTHORITY"
DEFAULT_ALEPH_PATH = "/sysroot/.coreos-aleph-version.json"
DEFAULT_HEALTH_ADDR = ":8081"
DEFAULT_METRICS_ADDR = ":8080"
DEFAULT_CONCURRENCY = 4
DEFAULT_QPS = 20.0
DEFAULT_BURST = 40


# ---- argument types (a bad value is a usage error: exit 2 with argparse's message) ------------


def arch_arg(value: str) -> str:
    """`--control-plane-arch`: Kubernetes (`amd64`) or RPM (`x86_64`) names; returns the RPM name."""
    from ..core.cluster import normalise_arch

    rpm = normalise_arch(value.strip().lower())
    if rpm is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an architecture: use amd64, arm64, ppc64le or s390x (or x86_64, aarch64)"
        )
    return rpm


def ocp_limit_arg(value: str) -> str:
    from ..core.skew.versions import OcpVersion

    try:
        return str(OcpVersion.parse(value, "--ocp-skew-limit"))
    except VersionError as exc:
        raise argparse.ArgumentTypeError(exc.problem) from None


def rhel_limit_arg(value: str) -> str:
    from ..core.skew.versions import RhelVersion

    try:
        return str(RhelVersion.parse(value, "--rhel-skew-limit"))
    except VersionError as exc:
        raise argparse.ArgumentTypeError(exc.problem) from None


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def secret_ref_arg(value: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` of a Secret."""
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {value!r}")
    return namespace, name


def port_arg(value: str) -> int:
    """A TCP port, 1 to 65535."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, got {port}")
    return port


def duration_arg(value: str) -> float:
    """Seconds from a Go-style duration (`137s`, `2m17s`, `1.5m`) or a plain number of seconds."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise argparse.ArgumentTypeError(f"not a duration: {value!r} (e.g. 137s, 2m17s)") from None
        seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return seconds


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return number


def non_negative_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return number


# ---- the parser ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors as kubectl says them (issue 47): the one line that matters and where the help
    is, not the whole usage block before it. Exit 2, as argparse."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {message}\nSee '{self.prog} --help' for usage.\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With `only` (a command's name) it has that command alone, which
    is what `main` builds when the first argument names one: the others' arguments and their
    gettext lookups were 4 of the 6 ms argparse took at every start, inside the daemon's time to
    its first patch (issue 36). A command's own help and usage errors read the same either way;
    the top level's (`--help`, a misspelt command) list every command, so they get them all."""
    parser = _Parser(
        prog="bootimage-controller",
        description="Keeps OpenShift worker MachineSet boot images current and enforces boot image skew.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = [_COMMANDS[only]] if only in _COMMANDS else dict.fromkeys(_COMMANDS.values())
    for add in adders:
        add(sub)
    return parser


def _add_plan(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="show what the controller would do, offline, from files or a live cluster",
        description=(
            "Plan boot image updates from YAML/JSON files or folders (multi-document YAML, kind: List, "
            "must-gather trees) or from a live cluster, without changing anything."
        ),
        epilog=(
            "exit status: 0 a plan was made (skips and per-MachineSet errors included), 1 bad input, "
            "2 usage, 3 with --fail-on-skew when boot image skew would hold upgrades, 4 with "
            "--fail-on-downgrade when --bootimages is older than the cluster, 5 with --fail-on-downgrade "
            "when that cannot be told, 6 with --cloud-verify when a cloud the plan needed could not be asked "
            "(its SDK or credentials missing; the warning names which)"
        ),
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="YAML/JSON files or folders (searched recursively); - reads standard input")
    p.add_argument("--bootimages", metavar="FILE",
                   help="the coreos-bootimages ConfigMap, or a bare stream metadata JSON (wins over the inputs)")
    p.add_argument("--from-cluster", action="store_true", help="read the objects from a live cluster instead of PATHs")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig for --from-cluster (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", metavar="NAME", help="the kubeconfig's context for --from-cluster (default: its current one)")
    p.add_argument("--timeout", type=duration_arg, default=30.0, metavar="DURATION",
                   help="give up reading the cluster after DURATION with --from-cluster (default: 30s)")
    p.add_argument("-o", "--output", choices=OUTPUT_FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--write-patched", metavar="DIR",
                   help="write DIR/<namespace>_<name>.yaml for each MachineSet to patch (for GitOps)")
    p.add_argument("--cloud-verify", action="store_true",
                   help="ask the clouds whether every target image exists and is available, and who owns "
                        "unknown current images; credentials: the *-cloud-credentials Secrets among the "
                        "inputs (or read with --from-cluster), else AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                        "GOOGLE_APPLICATION_CREDENTIALS, AZURE_CLIENT_ID/AZURE_TENANT_ID/"
                        "AZURE_SUBSCRIPTION_ID/AZURE_CLIENT_SECRET")
    p.add_argument("--control-plane-arch", type=arch_arg, metavar="ARCH",
                   help="control-plane architecture (amd64, arm64, ppc64le, s390x); default: from control-plane Nodes, else amd64")
    p.add_argument("--fail-on-skew", action="store_true", help="exit 3 when boot image skew would hold upgrades")
    p.add_argument("--fail-on-downgrade", action="store_true",
                   help=f"exit {EXIT_DOWNGRADE} when --bootimages is older than the cluster's ClusterVersion (a warning otherwise)")
    _add_skew_limits(p)
    _add_cloud_endpoints(p)
    _add_gitops_label(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug details (ignored files, sources) to stderr")
    _add_logging(p, one_shot=True)
    p.set_defaults(handler=cmd_plan)


def _add_run(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run the controller (the daemon)",
        description=(
            "Watch MachineSets (and, opted in, the ControlPlaneMachineSet and Cluster API objects), plan each "
            "against the golden boot images, and, while holding the Lease, claim and patch the ones this "
            "controller manages (the Machine Config Operator, Hive and GitOps keep theirs); report conditions, "
            "skew and metrics."
        ),
        epilog="exit status: 0 stopped cleanly (or --once: a clean pass), 1 a failure, said in one 'error:' line with --once",
    )
    _add_kubeconfig(p, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    p.add_argument("--dry-run", action="store_true", help="plan and report, but write nothing to MachineSets")
    p.add_argument("--once", action="store_true",
                   help="one full pass, then exit 0 when nothing is Degraded (skips are fine), else 1")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="take the Lease before writing (default: on)")
    # Unset: library-go's timings (137s/107s/26s), or its single-node ones (270s/240s/60s) when
    # Infrastructure status.controlPlaneTopology is SingleReplica. Set: these win.
    p.add_argument("--leader-elect-lease-duration", type=duration_arg, default=None, metavar="DURATION",
                   help="how long a Lease lasts without renewal (default: 137s; 270s on single-node)")
    p.add_argument("--leader-elect-renew-deadline", type=duration_arg, default=None, metavar="DURATION",
                   help="the leader stops writing and exits when it cannot renew for this long (default: 107s; 240s on single-node)")
    p.add_argument("--leader-elect-retry-period", type=duration_arg, default=None, metavar="DURATION",
                   help="how often to renew or try to acquire (default: 26s; 60s on single-node)")
    p.add_argument("--cluster-operator", default=DEFAULT_CLUSTER_OPERATOR, metavar="NAME",
                   help=f"ClusterOperator to report to (default: {DEFAULT_CLUSTER_OPERATOR}; empty: none)")
    p.add_argument("--health-addr", default=DEFAULT_HEALTH_ADDR, metavar="ADDR",
                   help=f"/healthz and /readyz listen address (default: {DEFAULT_HEALTH_ADDR})")
    p.add_argument("--metrics-cert-file", type=Path, metavar="PATH",
                   help="serve /metrics over TLS with this certificate (the service CA's serving cert; re-read when "
                        "it changes); scrapers then need a bearer token allowed to get /metrics")
    p.add_argument("--metrics-key-file", type=Path, metavar="PATH", help="the key of --metrics-cert-file")
    p.add_argument("--metrics-addr", default=DEFAULT_METRICS_ADDR, metavar="ADDR",
                   help=f"/metrics listen address (default: {DEFAULT_METRICS_ADDR})")
    p.add_argument("--concurrency", type=positive_int, default=DEFAULT_CONCURRENCY, metavar="N",
                   help=f"MachineSets reconciled at once (default: {DEFAULT_CONCURRENCY})")
    p.add_argument("--qps", type=non_negative_float, default=DEFAULT_QPS,
                   help=f"Kubernetes API requests per second (default: {DEFAULT_QPS:g}; 0: unlimited)")
    p.add_argument("--burst", type=positive_int, default=DEFAULT_BURST,
                   help=f"Kubernetes API request burst (default: {DEFAULT_BURST})")
    _add_gitops_label(p)
    p.add_argument("--disagreement-grace", type=duration_arg, default=DEFAULT_DISAGREEMENT_GRACE, metavar="DURATION",
                   help="how long an MCO-managed MachineSet may stay on another boot image than ours after the "
                        "MCO's pass before Event BootImageDisagreement (default: 40m, the MCO's longest resync)")
    p.add_argument("--first-boot-timeout", type=duration_arg, default=DEFAULT_FIRST_BOOT_TIMEOUT, metavar="DURATION",
                   help="how long a Machine whose instance runs may go without a Node before its boot image "
                        "counts as failed (default: 20m)")
    p.add_argument("--no-rollback-on-failed-boot", dest="rollback_on_failed_boot", action="store_false",
                   help="report a boot image this controller wrote that failed its first boot, without rolling "
                        "it back")
    p.add_argument("--resync-period", type=duration_arg, default=DEFAULT_RESYNC_PERIOD, metavar="DURATION",
                   help="plan every MachineSet again at least this often, so an outage that ended is noticed "
                        "without an edit (default: 10m; a settled fleet writes nothing)")
    _add_logging(p)
    _add_skew_limits(p)
    _add_cloud_endpoints(p)
    p.set_defaults(handler=_lazy("daemon.run", "run_daemon"))


def _add_gitops_label(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gitops-label", action="append", default=[], metavar="KEY",
                   help="a label that marks MachineSets applied from Git (repeatable), besides Argo CD's "
                        f"tracking annotation and Flux's labels: e.g. {ARGOCD_DEFAULT_INSTANCE_LABEL} where Argo CD "
                        "tracks by label")


def _add_aleph_report(sub: Any) -> None:
    from ..constants import DEFAULT_ALEPH_REPORT_INTERVAL

    p = sub.add_parser(
        "aleph-report", help="node agent: annotate this Node with its aleph (install boot image) version",
        description=(
            "Run on control-plane Nodes (a DaemonSet): read the aleph file the Node was installed from and "
            "annotate the Node with its build id, the install-time boot image the skew check falls back to."
        ),
        epilog="exit status: 0 reported (or still running), 1 a failure (--once), said in one 'error:' line",
    )
    p.add_argument("--node-name", default=os.environ.get("NODE_NAME") or None, metavar="N",
                   help="this Node's name (default: $NODE_NAME)")
    p.add_argument("--aleph-path", default=DEFAULT_ALEPH_PATH, metavar="P",
                   help=f"aleph file or sysroot folder (default: {DEFAULT_ALEPH_PATH}, then .bootc-aleph.json beside it)")
    p.add_argument("--once", action="store_true", help="report once and exit (0 on success, 1 on failure)")
    p.add_argument("--interval", type=non_negative_float, default=DEFAULT_ALEPH_REPORT_INTERVAL, metavar="SECONDS",
                   help=f"re-check period (default: {DEFAULT_ALEPH_REPORT_INTERVAL:g})")
    _add_kubeconfig(p, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    _add_logging(p)
    p.set_defaults(handler=cmd_aleph_report)


def _add_release_claims(sub: Any) -> None:
    p = sub.add_parser(
        "release-claims", help="remove all our owner references, then the claims finalizer",
        description=(
            "Before uninstalling: remove this controller's owner reference from every MachineSet and Cluster "
            "API object it claimed, then the finalizer of the claim holder ConfigMap. Scale the daemon to zero "
            "first (oc -n openshift-machine-config-operator scale deployment/bootimage-controller --replicas=0): "
            "a running leader claims again at its next patch."
        ),
        epilog="exit status: 0 every claim released, 1 a failure, said in one 'error:' line",
    )
    _add_kubeconfig(p, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    _add_write_timeout(p)
    _add_logging(p, one_shot=True)
    p.set_defaults(handler=_lazy("commands.release_claims", "release_claims"))


def _add_rollback(sub: Any) -> None:
    p = sub.add_parser(
        "rollback", help="restore a MachineSet's boot image from its boot-image-previous annotation",
        description=(
            "Write back the boot image a MachineSet had before this controller's last patch (its "
            "machineconfiguration.openshift.io/boot-image-previous annotation), and opt it out in the same "
            "write (annotation machineconfiguration.openshift.io/boot-image-updates: Disabled) so the daemon "
            "does not put the golden image straight back. Remove that annotation to resume updates."
        ),
        epilog="exit status: 0 restored (or --dry-run shown), 1 a failure, said in one 'error:' line",
    )
    p.add_argument("name", metavar="NAME", help="the MachineSet")
    p.add_argument("-n", "--namespace", default=MAPI_NAMESPACE, help=f"its namespace (default: {MAPI_NAMESPACE})")
    p.add_argument("--dry-run", action="store_true", help="show the change without writing it")
    _add_kubeconfig(p, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    _add_write_timeout(p)
    _add_logging(p, one_shot=True)
    p.set_defaults(handler=_lazy("commands.release_claims", "rollback"))


def _add_verify_boot(sub: Any) -> None:
    p = sub.add_parser(
        "verify-boot", help="boot one canary Machine from each MachineSet's template and record the verdict",
        description=(
            "Prove a MachineSet's boot image (SPEC section 3b): create one Machine from its template that no "
            "MachineSet selects (label machineconfiguration.openshift.io/boot-image-canary: <MachineSet>), wait "
            "until its Node is Ready, it fails, or --timeout passes, record the verdict on the MachineSet "
            "(annotation machineconfiguration.openshift.io/boot-image-verified) and delete the Machine. Run again "
            "after an interruption: it takes over the canary it left."
        ),
        epilog="exit status: 0 every image verified, 3 an image failed its first boot, 1 a verdict could not be "
               "told (capacity, no instance in time, an error), each said in one line",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="the MachineSets (Machine API)")
    p.add_argument("-n", "--namespace", default=MAPI_NAMESPACE, help=f"their namespace (default: {MAPI_NAMESPACE})")
    p.add_argument("--timeout", type=duration_arg, default=DEFAULT_FIRST_BOOT_TIMEOUT, metavar="DURATION",
                   help="how long a canary may take to join (default: 20m, as run --first-boot-timeout)")
    p.add_argument("--keep", action="store_true", help="leave the canary Machine (and its Node) when done")
    _add_kubeconfig(p, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    _add_logging(p, one_shot=True)
    p.set_defaults(handler=_lazy("commands.verify_boot", "verify_boot"))


def _add_hand_over(sub: Any) -> None:
    p = sub.add_parser(
        "hand-over", help="hand MachineSets to this controller: claim and annotation in one write",
        description=(
            "Hand MachineSets the Machine Config Operator would update to this controller: write this "
            "controller's claim (owner reference) and the annotation machineconfiguration.openshift.io/"
            "boot-image-manager: bootimage-controller in one JSON patch guarded by the object's resourceVersion, "
            "so no controller that skips owned MachineSets (the MCO) can write it after the decision. When the "
            "hand-over makes the MCO hold upgrades (its skew enforcement resets its record for MachineSets it "
            "skips), the warning names the Manual skew setting that matches the real oldest boot image and "
            "nothing is written unless --yes."
        ),
        epilog="exit status: 0 every MachineSet handed over, 1 a failure or the skew warning without --yes",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="the MachineSets")
    p.add_argument("-n", "--namespace", default=MAPI_NAMESPACE, help=f"their namespace (default: {MAPI_NAMESPACE})")
    p.add_argument("--yes", action="store_true", help="hand over even when the MCO will then hold upgrades")
    _add_skew_limits(p)
    _add_kubeconfig(p, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    _add_write_timeout(p)
    _add_logging(p, one_shot=True)
    p.set_defaults(handler=_lazy("commands.handover", "hand_over"))
    back = sub.add_parser(
        "hand-back", help="hand MachineSets back: claim and annotation removed in one write",
        description=(
            "Undo hand-over: remove this controller's claim and the boot-image-manager annotation in one JSON "
            "patch guarded by the object's resourceVersion; the Machine Config Operator (where it covers the "
            "MachineSet) updates its boot image from then on."
        ),
        epilog="exit status: 0 every MachineSet handed back, 1 a failure, said in one 'error:' line",
    )
    back.add_argument("names", nargs="+", metavar="NAME", help="the MachineSets")
    back.add_argument("-n", "--namespace", default=MAPI_NAMESPACE, help=f"their namespace (default: {MAPI_NAMESPACE})")
    _add_kubeconfig(back, "default: in-cluster, else $KUBECONFIG or ~/.kube/config")
    _add_write_timeout(back)
    _add_logging(back, one_shot=True)
    back.set_defaults(handler=_lazy("commands.handover", "hand_back"))


def _add_fleet(sub: Any) -> None:
    p = sub.add_parser(
        "fleet", help="boot images and skew across many clusters and HyperShift NodePools, read-only",
        description=(
            "Read many clusters (must-gather trees and kubeconfig contexts) concurrently and report, per "
            "cluster, its boot images, their age, the decision plan makes for each pool and whether the "
            "next upgrade would be held; on HyperShift management clusters, every HostedCluster and its "
            "NodePools, flagging a stream with no image for a pool's platform (ValidPlatformImage=False)."
        ),
        epilog="exit status: 0 every cluster read, 1 some could not be read (their rows say why), 2 usage, "
               "3 with --fail-on-skew when any cluster's next upgrade would be held",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="must-gather trees (or folders of YAML), one cluster each")
    p.add_argument("--kubeconfig", action="append", default=[], metavar="FILE",
                   help="kubeconfig file or folder of them (repeatable); each file's current context unless "
                        "--context or --all-contexts")
    p.add_argument("--context", action="append", default=[], metavar="NAME", help="a kubeconfig context (repeatable)")
    p.add_argument("--all-contexts", action="store_true", help="every context of the kubeconfig files")
    p.add_argument("--prometheus", metavar="URL",
                   help="read the fleet from an aggregating Prometheus API (Thanos Querier, ACM Observability): "
                        "the per-pool metrics grouped by their cluster label")
    p.add_argument("--bearer-token-file", type=Path, metavar="FILE", help="token sent to --prometheus")
    p.add_argument("--ca-file", type=Path, metavar="FILE", help="CA bundle trusted for --prometheus")
    p.add_argument("--prometheus-job", default="bootimage-controller-metrics", metavar="JOB",
                   help="the job label of the daemons' targets, for their up series (default: %(default)s)")
    p.add_argument("--cluster-label", default="cluster", metavar="LABEL",
                   help="the label that names the cluster (default: %(default)s)")
    p.add_argument("--parallel", type=positive_int, default=8, metavar="N", help="clusters read at once (default 8)")
    p.add_argument("--timeout", type=duration_arg, default=60.0, metavar="DURATION",
                   help="per cluster (default 60s)")
    p.add_argument("--bootimages", metavar="[RELEASE=]FILE", action="append", default=[],
                   help="golden data (a coreos-bootimages ConfigMap or stream JSON): FILE alone for every cluster and "
                        "NodePool, instead of each cluster's own ConfigMap and the bundled data of each NodePool's "
                        "release; RELEASE=FILE (repeatable) for the clusters, Hive spokes and NodePools of exactly "
                        "that release (4.16.3): the images that release shipped")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format (default: table)")
    p.add_argument("--html", metavar="FILE", help="also write one self-contained HTML page (needs the [fleet] "
                   "extra: pip install 'bootimage-controller[fleet]')")
    p.add_argument("--fail-on-skew", action="store_true", help="exit 3 when any cluster's next upgrade would be held")
    _add_skew_limits(p)
    _add_logging(p, one_shot=True)
    p.set_defaults(handler=_lazy("fleet.command", "main"))


# Each command's name -> what adds its parser (hand-over adds hand-back beside it), in help order.
_COMMANDS: dict[str, Callable[[Any], None]] = {
    "plan": _add_plan,
    "run": _add_run,
    "aleph-report": _add_aleph_report,
    "release-claims": _add_release_claims,
    "rollback": _add_rollback,
    "verify-boot": _add_verify_boot,
    "hand-over": _add_hand_over,
    "hand-back": _add_hand_over,
    "fleet": _add_fleet,
}


def _add_write_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=duration_arg, default=30.0, metavar="DURATION",
                   help="give up after this long without an answer (default: 30s; exit 1, the server named)")


def _add_kubeconfig(p: argparse.ArgumentParser, default_text: str) -> None:
    p.add_argument("--kubeconfig", metavar="FILE", help=f"kubeconfig file ({default_text})")


def _add_logging(p: argparse.ArgumentParser, *, one_shot: bool = False) -> None:
    """`--log-format`/`--log-level`; a one-shot command also gets `-v` (unless it has its own) and
    logs only warnings, as plain sentences, by default (SPEC section 6)."""
    if not one_shot:
        p.add_argument("--log-format", choices=("json", "console"), default=None,
                       help="log format (default: console on a terminal, else json)")
        p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"), type=str.upper,
                       help="log level (default: INFO)")
        return
    p.add_argument("--log-format", choices=("json", "console"), default=None,
                   help="log as JSON or console lines (default: warnings only, as plain sentences)")
    p.add_argument("--log-level", default=None, choices=("DEBUG", "INFO", "WARNING", "ERROR"), type=str.upper,
                   help="log level (default: WARNING; INFO with -v or --log-format)")
    if not any("-v" in action.option_strings for action in p._actions):
        p.add_argument("-v", "--verbose", action="store_true", help="log what is read and done, not only warnings")
    p.set_defaults(one_shot=True)


def _logging_of(args: argparse.Namespace) -> tuple[str | None, str]:
    """(format, level) for a command: a one-shot command's warnings are sentences unless asked."""
    if not getattr(args, "one_shot", False):
        return args.log_format, args.log_level
    if args.log_format is None and not getattr(args, "verbose", False):
        return "sentences", args.log_level or "WARNING"
    return args.log_format, args.log_level or ("DEBUG" if getattr(args, "verbose", False) else "INFO")


def _add_skew_limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ocp-skew-limit", type=ocp_limit_arg, default=DEFAULT_OCP_SKEW_LIMIT, metavar="VERSION",
                   help=f"oldest OCP boot image version upgrades allow (default: {DEFAULT_OCP_SKEW_LIMIT})")
    p.add_argument("--rhel-skew-limit", type=rhel_limit_arg, default=DEFAULT_RHEL_SKEW_LIMIT, metavar="VERSION",
                   help=f"oldest RHEL version of an RHCOS boot image upgrades allow (default: {DEFAULT_RHEL_SKEW_LIMIT})")


def _add_cloud_endpoints(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gcp-endpoint", default=os.environ.get(ENV_GCP_ENDPOINT) or None, metavar="URL",
                   help=f"GCP Compute API endpoint (private clouds, tests; env {ENV_GCP_ENDPOINT})")
    p.add_argument("--azure-endpoint", default=os.environ.get(ENV_AZURE_ENDPOINT) or None, metavar="URL",
                   help=f"Azure Resource Manager endpoint (private clouds, tests; env {ENV_AZURE_ENDPOINT})")
    p.add_argument("--azure-authority", default=os.environ.get(ENV_AZURE_AUTHORITY) or None, metavar="URL",
                   help=f"Entra ID authority to sign in at (sovereign or private clouds, tests; env {ENV_AZURE_AUTHORITY})")
    p.add_argument("--vsphere-credentials", type=secret_ref_arg, default=(MAPI_NAMESPACE, VSPHERE_CREDENTIALS_SECRET),
                   metavar="NAMESPACE/NAME",
                   help=f"vCenter credentials Secret (default: {MAPI_NAMESPACE}/{VSPHERE_CREDENTIALS_SECRET})")
    p.add_argument("--vsphere-ca-file", metavar="PATH",
                   help="CA bundle trusted for vCenter, besides the system store (e.g. the cluster's trusted CA bundle)")
    p.add_argument("--vsphere-insecure", action="store_true",
                   help="do not verify vCenter's TLS certificate (tests only; logged as a warning)")
    p.add_argument("--vsphere-port", type=port_arg, default=443, metavar="PORT",
                   help="vCenter port when the Infrastructure lists no vCenter (clusters installed before "
                        "failure domains; default 443)")
    p.add_argument("--ova-mirror", default=os.environ.get(ENV_OVA_MIRROR) or None, metavar="URL",
                   help="fetch the stream's OVAs from this mirror (replaces the URL up to its last '/'; "
                        f"env {ENV_OVA_MIRROR})")
    p.add_argument("--ova-cache-dir", type=Path, default=DEFAULT_OVA_CACHE_DIR, metavar="PATH",
                   help=f"where downloaded OVAs are kept (default: {DEFAULT_OVA_CACHE_DIR})")


# ---- dispatch -------------------------------------------------------------------------------------

Handler = Callable[[argparse.Namespace], int]
ROOT_PACKAGE = __package__.rpartition(".")[0] if __package__ else "bootimage_controller"


def _lazy(module: str, function: str) -> Handler:
    """A handler importing `bootimage_controller.<module>.<function>` only when its command runs."""

    def handler(args: argparse.Namespace) -> int:
        _configure_logging(*_logging_of(args))
        name = f"{ROOT_PACKAGE}.{module}"
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            print(f"error: `{args.command}` is not available in this build ({name} is missing)", file=sys.stderr)
            return EXIT_BAD_INPUT
        result: int = getattr(mod, function)(args)
        return result

    return handler


def _configure_logging(fmt: str | None, level: str) -> None:
    from ..observability import configure_logging

    configure_logging(fmt, level)


def main(argv: Sequence[str] | None = None) -> int:
    args_given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_given[0] if args_given else None)
    try:
        args = parser.parse_args(args_given)
        _check_usage(parser, args)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
    handler: Handler = args.handler
    try:
        return handler(args)
    except BootImageControllerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _stdout_gone()
        return EXIT_OK
    except Exception as exc:  # one line, never a traceback (SPEC: every failure is an exit code and a message)
        print(f"error: {_one_line(exc, args.command, _target(args))}", file=sys.stderr)
        if os.environ.get(TRACEBACK_ENV):
            raise
        return EXIT_BAD_INPUT


# Set to get the Python traceback of an unexpected error (for a bug report).
TRACEBACK_ENV = "BOOTIMAGE_TRACEBACK"


# The commands that talk to one cluster through a kubeconfig: a failure to reach it, or its answer,
# names the kubeconfig, the context and the server (SPEC section 4). `fleet` names each cluster on
# its own row; `aleph-report` runs in the cluster.
_ONE_CLUSTER_COMMANDS = frozenset({"run", "plan", "rollback", "hand-over", "hand-back", "release-claims", "verify-boot"})


def _target(args: argparse.Namespace) -> str | None:
    if args.command not in _ONE_CLUSTER_COMMANDS:
        return None
    from ..kube.kubeconfig import target_of

    return target_of(getattr(args, "kubeconfig", None), getattr(args, "context", None))


def _one_line(exc: Exception, command: str | None = None, target: str | None = None) -> str:
    """What went wrong, in the words an administrator can act on. An answer of the API server (a
    403, a 404) is the server's word, never "unexpected"; only a fault of ours asks for a traceback.
    `target`: the kubeconfig, context and server, said before a failure to reach it or its answer."""
    where = f"{target}: " if target else ""
    from ..kube.client import ClientConfigError
    from ..kube.forbidden import answer_sentence
    from ..kube.retry import CONNECTION_ERRORS, describe

    if isinstance(exc, ClientConfigError):
        return str(exc)
    answer = answer_sentence(exc, command)
    if answer is not None:
        return where + answer
    text = describe(exc)
    if isinstance(exc, (*CONNECTION_ERRORS, OSError)):
        return f"{where}cannot reach the Kubernetes API server: {text}"
    return f"{text} (unexpected; set {TRACEBACK_ENV}=1 for the traceback)"


def _stdout_gone() -> None:
    """`plan | head`: the reader left. Point stdout at /dev/null so the flush at exit stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.command == "aleph-report" and not args.node_name:
        parser.error("aleph-report: --node-name is required (or set NODE_NAME)")
    if args.command == "fleet" and not (args.paths or args.kubeconfig or args.context or args.all_contexts
                                        or args.prometheus):
        parser.error("fleet: give must-gather PATHs, --kubeconfig FILE, --context NAME, --all-contexts or "
                     "--prometheus URL")
    if args.command == "fleet" and not args.prometheus and (args.bearer_token_file or args.ca_file):
        parser.error("fleet: --bearer-token-file and --ca-file are used only with --prometheus")
    if args.command != "plan":
        return
    if args.from_cluster and args.paths:
        parser.error("plan: give PATHs or --from-cluster, not both")
    if not args.from_cluster and not args.paths:
        parser.error("plan: give PATHs (files or folders) or --from-cluster")
    if (args.kubeconfig or args.context) and not args.from_cluster:
        parser.error("plan: --kubeconfig and --context are used only with --from-cluster")


# ---- plan -----------------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    from ..core.skew.verdict import SkewLimits
    from ..plan import inputs as plan_inputs
    from ..plan import output as plan_output

    _configure_logging(*_logging_of(args))
    if args.from_cluster:
        from ..plan.live import fetch_cluster_objects

        objects = fetch_cluster_objects(
            args.kubeconfig, with_secrets=args.cloud_verify, vsphere_secret=args.vsphere_credentials,
            context=args.context, timeout=args.timeout,
        )
    else:
        objects = plan_inputs.load_paths(args.paths)
    inputs = plan_inputs.classify(objects)
    try:
        prepared = plan_inputs.prepare(
            inputs, bootimages_file=args.bootimages, control_plane_arch=args.control_plane_arch,
            gitops_labels=tuple(args.gitops_label),
        )
    except InputError as exc:
        if inputs.kinds or args.from_cluster:
            raise
        # Nothing was read at all: name what was given (issue 47), not only "the input".
        raise exc.located(", ".join(str(p) for p in args.paths if str(p) != "-") or "standard input") from None
    decisions = plan_inputs.run_planner(prepared)
    cloud_note = "cloud verification: off (offline rules)"
    unverified: list[str] = []
    if args.cloud_verify:
        prepared, decisions, cloud_note, unverified = _cloud_verify(args, prepared, decisions)
    limits = SkewLimits.from_flags(
        args.ocp_skew_limit, args.rhel_skew_limit, ocp_flag="--ocp-skew-limit", rhel_flag="--rhel-skew-limit"
    )
    skew = plan_inputs.evaluate_plan_skew(prepared, decisions, limits)
    context = [*prepared.context.explanation, cloud_note, f"skew mode {skew.verdict.mode}: {skew.explanation}"]
    context += [f"stream mismatch (not enforced): {m.message}" for m in skew.verdict.mismatches if skew.verdict.upgradeable]
    report = plan_output.PlanReport.build(decisions, skew.to_json(), context, prepared.forecast(decisions))
    if args.write_patched:
        written = plan_output.write_patched(report.decisions, prepared.objects_by_key(), Path(args.write_patched))
        others = plan_output.left_to_their_writers(report.decisions)
        left = f" ({others} left to the MCO, Hive or a policy, which write their own)" if others else ""
        print(f"wrote {len(written)} patched manifest(s) to {args.write_patched}{left}", file=sys.stderr)
    code = EXIT_SKEW if args.fail_on_skew and report.upgrades_held else EXIT_OK
    if unverified and code == EXIT_OK:
        code = EXIT_NOT_VERIFIED
    downgrade, unknown = _downgrade(args, prepared)
    if downgrade is not None:
        print(f"warning: {downgrade}", file=sys.stderr)
        if args.fail_on_downgrade and code == EXIT_OK:
            code = EXIT_DOWNGRADE
    elif unknown is not None and args.fail_on_downgrade:
        print(f"warning: --fail-on-downgrade cannot judge: {unknown}", file=sys.stderr)
        if code == EXIT_OK:
            code = EXIT_CANNOT_JUDGE
    try:
        sys.stdout.write(plan_output.render(report, "table" if args.output == "wide" else args.output,
                                            _terminal_width(), _table_style(args.output)))
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()  # the plan was made: the exit code still tells a pipeline about skew
    return code


def _cloud_verify(
    args: argparse.Namespace, prepared: PreparedPlan, decisions: list[BootImageDecision]
) -> tuple[PreparedPlan, list[BootImageDecision], str, list[str]]:
    """Rule 9: ask the clouds about the images the offline plan names, then plan again with the answers.
    Also returns the platforms the plan needed that could not be asked (their SDK or credentials missing)."""
    from ..cloud import queries
    from ..cloud.verifier import SDK_EXTRAS, CloudVerifier
    from ..plan import inputs as plan_inputs

    creds = plan_inputs.cloud_credentials(prepared.inputs, os.environ)
    secrets: dict[Any, Any] = dict(creds.secrets)
    verifier = CloudVerifier.from_secrets(secrets, gcp_endpoint=args.gcp_endpoint, azure_endpoint=args.azure_endpoint,
                                          azure_authority=args.azure_authority)
    try:
        prepared, decisions = asyncio.run(_verify_rounds(verifier, prepared, decisions))
        platforms = sorted(str(p) for p in verifier.platforms)
        no_sdk = {str(p) for p in verifier.sdk_missing}
    finally:
        verifier.close()
    used = [f"{p} ({origin})" for p, origin in creds.origins.items() if str(p) in platforms]
    if any(d.template is not None for d in decisions):
        prepared, decisions = asyncio.run(_verify_vsphere(args, prepared, decisions))
        secret = prepared.inputs.secrets.get(str(Platform.VSPHERE))
        used.append(f"VSphere (Secret {secret.namespace}/{secret.name}, {secret.source})" if secret is not None
                    else "VSphere (no credentials Secret among the inputs)")
    missing = {d.platform for d in decisions if d.platform in queries.CLOUD_PLATFORM_NAMES} - set(platforms)
    missing_all = set(missing)
    note = "cloud verification: " + ("; ".join(used) if used else "no usable credentials")
    for name in sorted(missing & no_sdk):
        # The credentials are there; the SDK is what is missing (issue 27): say that, and the fix.
        note += f"; offline rules for {name} (its SDK is not installed)"
        print(f"warning: --cloud-verify: the {name} SDK is not installed, so {name} was planned with the offline "
              f"rules; install it with: pip install 'bootimage-controller[{SDK_EXTRAS[Platform(name)]}]'",
              file=sys.stderr)
    missing -= no_sdk
    if missing:
        names = ", ".join(sorted(str(m) for m in missing))
        note += f"; offline rules for {names} (no credentials)"
        print(
            f"warning: --cloud-verify: no usable credentials for {names}; planned with the offline rules "
            "(give the credentials Secret among the inputs, use --from-cluster, or set the cloud's "
            "environment variables: see `plan --help`)",
            file=sys.stderr,
        )
    return prepared, decisions, note, sorted(str(m) for m in missing_all)


async def _verify_rounds(
    verifier: Any, prepared: PreparedPlan, decisions: list[BootImageDecision]
) -> tuple[PreparedPlan, list[BootImageDecision]]:
    """Ask the clouds about the images the offline plan names, then plan again with the answers
    (`lookups.plan_verified`, as the daemon does for each MachineSet)."""
    from dataclasses import replace

    from ..cloud.queries import verify_decisions
    from ..core.cloud.facts import CloudFacts
    from ..core.context import ClusterFacts
    from ..core.lookups import plan_verified
    from ..plan import inputs as plan_inputs

    planned = prepared

    def plan(facts: ClusterFacts) -> list[BootImageDecision]:
        nonlocal planned
        planned = replace(prepared, context=replace(prepared.context, facts=facts))
        return decisions if facts is prepared.context.facts else plan_inputs.run_planner(planned)

    async def ask(asking: list[BootImageDecision]) -> tuple[CloudFacts, frozenset[str]]:
        facts = await verify_decisions(verifier, asking)
        return facts, frozenset(str(p) for p in verifier.platforms)

    decided = await plan_verified(plan, prepared.context.facts, ask)
    return planned, decided


async def _verify_vsphere(
    args: argparse.Namespace, prepared: PreparedPlan, decisions: list[BootImageDecision]
) -> tuple[PreparedPlan, list[BootImageDecision]]:
    """Read-only: ask vCenter about each vSphere MachineSet's templates, then plan again."""
    from dataclasses import replace

    from ..core.cloud.facts import CloudFacts
    from ..kube.api_errors import NotFound
    from ..plan import inputs as plan_inputs
    from ..vsphere.template_checks import VSphereChecks, VSphereOptions

    secret = prepared.inputs.secrets.get(str(Platform.VSPHERE))

    async def read(namespace: str, name: str) -> Any:
        if secret is None:
            raise NotFound(f"Secret {namespace}/{name}", 404, "NotFound", "not among the inputs")
        return secret.obj

    checks = VSphereChecks(VSphereOptions.from_args(args), read)
    merged = prepared.context.facts.cloud or CloudFacts()
    try:
        for d in decisions:
            if d.template is not None:
                found = await checks.lookup(d.template, d.target_release)
                merged = replace(
                    merged,
                    templates={**merged.templates, **found.templates},
                    template_errors={**merged.template_errors, **found.template_errors},
                    vcenters_unavailable={**merged.vcenters_unavailable, **found.vcenters_unavailable},
                )
    finally:
        checks.close()
    platforms = prepared.context.facts.cloud_platforms | {str(Platform.VSPHERE)}
    prepared = prepared.with_cloud(merged, platforms)
    return prepared, plan_inputs.run_planner(prepared)


def cmd_aleph_report(args: argparse.Namespace) -> int:
    _configure_logging(args.log_format, args.log_level)
    return asyncio.run(_aleph_report(args))


async def _aleph_report(args: argparse.Namespace) -> int:
    from ..kube.client import ClientConfigError, make_api_client
    from .aleph_report import run_aleph_report

    try:
        api = await make_api_client(args.kubeconfig)
    except ClientConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    async with api:
        return await run_aleph_report(
            args.node_name, Path(args.aleph_path), api, interval=args.interval, once=args.once
        )


def _table_style(output: str) -> Any:
    """Fit the table to a terminal (unless `-o wide`) and colour it there, unless NO_COLOR is set
    (no-color.org) or the terminal is dumb. A pipe gets every column, plain."""
    from ..plan.output import TableStyle

    tty = sys.stdout.isatty()
    colour = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    return TableStyle(width=_terminal_width() if tty and output != "wide" else None, colour=colour)


def _downgrade(args: argparse.Namespace, prepared: PreparedPlan) -> tuple[str | None, str | None]:
    """(downgrade, unknown). `downgrade`: `--bootimages` of an older OCP release than the cluster
    runs: planned as given (the golden data is the target), but worth a loud line: it moves boot
    images backwards. `unknown`: why that cannot be told (no release in the golden data, no
    ClusterVersion, a version that does not parse)."""
    from ..core.skew.versions import OcpVersion
    from ..errors import VersionError

    if not args.bootimages:
        return None, None
    golden_release = prepared.context.golden.release_version
    cv = prepared.inputs.cluster_version
    desired = ((cv.obj.get("status") or {}).get("desired") or {}).get("version") if cv is not None else None
    if not golden_release:
        return None, (f"--bootimages {args.bootimages} names no OCP release (a bare stream JSON, or a ConfigMap "
                      "without data.releaseVersion)")
    if not isinstance(desired, str):
        return None, "the input has no ClusterVersion with status.desired.version to compare with"
    try:
        given, running = OcpVersion.parse(golden_release), OcpVersion.parse(desired)
    except VersionError as exc:
        return None, str(exc)
    if (given.major, given.minor, given.patch) >= (running.major, running.minor, running.patch):
        return None, None
    return (f"--bootimages {args.bootimages} is OCP {golden_release}, older than the cluster's {desired} "
            "(ClusterVersion status.desired): patches would move boot images back"), None


def _terminal_width() -> int:
    """The terminal's columns: the table fills them (prose is wrapped at 120 at most: plan_output)."""
    return shutil.get_terminal_size((100, 24)).columns
