"""Working beside the other managers of boot images (SPEC section 3, companion rules). Pure.

- GitOps: the change is published, not made: `proposal_message` is the `BootImageUpdateProposed`
  Event's text, carrying the JSON patch (claims.change_ops) to commit.
- The MCO: `DisagreementClock` tells when an MCO-managed MachineSet has stayed on another image than
  our target for longer than one MCO resync after the MCO reported its pass done
  (`BootImageDisagreement`).
- Claims: `claim_hold_warning` says, before a MachineSet the MCO would otherwise manage is claimed,
  whether the MCO's skew enforcement will then hold upgrades (it resets its record to the install
  version for every MachineSet it skips, reference section 11.3), with the Manual setting that
  matches the real oldest boot image.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# An Event message longer than MAX_EVENT_MESSAGE is cut, and a cut patch is no patch.
from ..constants import (
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    DEFAULT_DISAGREEMENT_GRACE,
    MAX_EVENT_MESSAGE,
    Manager,
    SkewMode,
)
from ..errors import VersionError
from .claims import change_ops
from .manager import MachineConfigOperator
from .model import BootImageDecision, get_path, is_mapping
from .skew.policy import ManualMode, ManualSkew
from .skew.record import (
    BootImageRelease,
    ReleaseKind,
    ReleaseSource,
    machineset_boot_image,
    pick_cluster_boot_image,
)
from .skew.verdict import SkewLimits, below_limit
from .skew.versions import OcpVersion

# Said in every proposal for a MachineSet the MCO writes too (it reads no GitOps, Hive or policy mark).
MCO_WRITES_TOO = "the Machine Config Operator writes this MachineSet too (see BootImageWriterConflict)"


def proposal_message(decision: BootImageDecision) -> str:
    """`BootImageUpdateProposed`: what Git should change, as a JSON patch to apply (`kubectl patch
    --type=json -p '<patch>'` or a kustomize patch). The patch is always whole: when it does not fit
    an Event, the message says where to get it instead."""
    patch = json.dumps(change_ops(decision.changes), separators=(",", ":"), sort_keys=True)
    what = f"{decision.current_release or 'unknown release'} -> {decision.target_release or 'golden'}"
    if Manager.MCO in decision.also_written_by:
        # The MCO reads no GitOps mark: it writes this MachineSet too (Event BootImageWriterConflict).
        what += f"; {MCO_WRITES_TOO}"
    head = f"proposed boot image update {what} ({decision.manager_why}); JSON patch: "
    if len(head) + len(patch) <= MAX_EVENT_MESSAGE:
        return head + patch
    short = f"proposed boot image update {what}; JSON patch: "
    if len(short) + len(patch) <= MAX_EVENT_MESSAGE:
        return short + patch
    return (f"proposed boot image update {what}: the JSON patch is too long for an Event; "
            "`bootimage-controller plan --from-cluster --write-patched DIR` writes it")


# Hive MachinePool fields that set a pool's boot image, per platform (hive #2935: AWS `amiID`, which
# wins over Hive's AMI override annotation). Where Hive has none, its pools boot the release's image.


def hive_change(decision: BootImageDecision) -> str:
    """What to change on the hub for a Hive MachinePool's MachineSet: the MachinePool field and the
    target value, or why there is none."""
    field, value = decision.hive_field()
    where = "on the hub (the MachinePool of this pool, in its ClusterDeployment's namespace)"
    if field is None or not value:
        return (f"Hive has no MachinePool boot image field on {decision.platform or 'this platform'}: the pool boots "
                "the image of its ClusterDeployment's release; upgrade the release on the hub")
    return f"set {field}: {value} {where}; it wins over Hive's AMI override annotation"


def hive_proposal_message(decision: BootImageDecision) -> str:
    """`BootImageUpdateProposed` for a Hive MachinePool's MachineSet: the hub's field to set."""
    what = f"{decision.current_release or 'unknown release'} -> {decision.target_release or 'golden'}"
    also = f"; {MCO_WRITES_TOO}" if Manager.MCO in decision.also_written_by else ""
    return f"proposed boot image update {what} ({decision.manager_why}): {hive_change(decision)}{also}"[:MAX_EVENT_MESSAGE]


@dataclass(frozen=True)
class McoPass:
    """The MCO's own report of its boot image pass, from MachineConfiguration `status.conditions`."""

    done: bool  # BootImageUpdateProgressing is False
    message: str  # its Progressing and Degraded messages, for the disagreement's text

    @classmethod
    def from_machine_configuration(cls, mc: Mapping[str, Any] | None) -> McoPass:
        conditions = get_path(mc, ("status", "conditions"))
        found = {c.get("type"): c for c in conditions if is_mapping(c)} if isinstance(conditions, list) else {}
        progressing = found.get(CONDITION_PROGRESSING)
        if not is_mapping(progressing):
            return cls(False, "the MCO reports no boot image pass")
        texts = [str(c.get("message") or "") for c in (progressing, found.get(CONDITION_DEGRADED)) if is_mapping(c)]
        return cls(progressing.get("status") == "False", "; ".join(t for t in texts if t))


@dataclass(frozen=True)
class Disagreement:
    """An MCO-managed MachineSet on another image than ours. `lasting`: past the grace."""

    lasting: bool
    wait: float  # seconds until it would be lasting (0 when it is)
    message: str


class DisagreementClock:
    """When each MCO-managed MachineSet started to disagree (monotonic seconds), by key.

    A changed pair of images starts the clock again: only one disagreement that outlives a whole
    MCO resync is reported, never a pass the MCO has not finished yet.
    """

    def __init__(self, grace: float = DEFAULT_DISAGREEMENT_GRACE) -> None:
        self.grace = grace
        self._since: dict[str, tuple[float, str]] = {}

    def observe(self, key: str, decision: BootImageDecision, mco_pass: McoPass, now: float) -> Disagreement | None:
        """None when there is nothing to report (agreement, or the MCO still working)."""
        if not disagrees(decision) or not mco_pass.done:
            self._since.pop(key, None)
            return None
        pair = json.dumps([decision.current, decision.target], sort_keys=True, default=str)
        since, seen = self._since.get(key, (now, pair))
        if seen != pair:
            since = now
        self._since[key] = (since, pair)
        message = (
            f"the Machine Config Operator left {decision.kind} {decision.namespace}/{decision.name} on "
            f"{decision.current_release or 'an unknown release'} ({_short(decision.current)}), where this controller's "
            f"target is {decision.target_release or 'the golden image'} ({_short(decision.target)}): ours is "
            f"{decision.reason} ({decision.message}); the MCO's pass says: {mco_pass.message or 'nothing'}"
        )
        left = since + self.grace - now
        return Disagreement(left <= 0, max(0.0, left), message)

    def forget(self, key: str) -> None:
        self._since.pop(key, None)

    def keys(self) -> Iterable[str]:
        return tuple(self._since)


def disagrees(decision: BootImageDecision) -> bool:
    """We would write another boot image than the one the MachineSet carries."""
    return decision.action == "patch" and decision.current != decision.target


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= 160 else text[:157] + "..."


# ---- claims that would make the MCO hold upgrades -------------------------------------------------


@dataclass(frozen=True)
class ClaimHold:
    """The MCO will hold upgrades once we claim: what to tell the admin before writing."""

    message: str
    manual: ManualSkew | None  # the Manual setting that matches the real oldest boot image


def mco_skew_mode(mc: Mapping[str, Any] | None) -> str | None:
    """The skew mode the MCO enforces: its status, else Automatic when the spec leaves it unset."""
    status = get_path(mc, ("status", "bootImageSkewEnforcementStatus", "mode"))
    if isinstance(status, str) and status:
        return status
    spec = get_path(mc, ("spec", "bootImageSkewEnforcement", "mode"))
    return spec if isinstance(spec, str) and spec else SkewMode.AUTOMATIC


@dataclass(frozen=True, slots=True)
class MachineSetAfter:
    """One MachineSet as `boot_images_after` judges it: its decision, its annotations (our record),
    and where it will boot its target once the writes now due are made, the source to name for it
    (None: it keeps what it boots now)."""

    decision: BootImageDecision
    annotations: Mapping[str, str]
    written: ReleaseSource | None = None


def boot_images_after(machines: Iterable[MachineSetAfter], aleph_min: str | None,
                      install: OcpVersion | None) -> list[BootImageRelease]:
    """Every MachineSet's boot image once the writes now due are made, for `claim_hold_warning`:
    the target where it is written, else the best evidence of what it boots (SPEC section 5,
    `machineset_boot_image`: our record, the planner's current image, aleph, the install version).
    The daemon (before a claim) and `hand-over` (before handing over) ask it alike."""
    out = []
    for m in machines:
        d = m.decision
        if m.written is not None and d.target_release:
            out.append(BootImageRelease.rhcos(d.target_release, m.written))
            continue
        found = machineset_boot_image(m.annotations, d.current_release, d.current_release_source, aleph_min, install)
        if found is not None:
            out.append(found)
    return out


def claim_hold_warning(
    decision: BootImageDecision,
    mco: MachineConfigOperator | None,
    mc: Mapping[str, Any] | None,
    install_version: OcpVersion | None,
    oldest_after: Iterable[BootImageRelease],
    limits: SkewLimits,
) -> ClaimHold | None:
    """None unless claiming this MachineSet, which the MCO would otherwise manage, makes the MCO's
    Automatic skew record fall back to an install version below the limit (unknown counts as 0.0.0,
    as the MCO takes it). `oldest_after`: every MachineSet's boot image as it will be after our
    patch (this one at its target), from our records, the golden data, the cloud and aleph."""
    if not decision.taken_from_mco or mco is None or not mco.runs_skew_enforcement:
        return None
    if mco_skew_mode(mc) != SkewMode.AUTOMATIC:
        return None  # Manual and None are the admin's word: the MCO's reset only touches Automatic
    if install_version is not None and install_version >= limits.ocp:
        return None
    installed = str(install_version) if install_version is not None else "unknown (0.0.0 to the MCO)"
    oldest = pick_cluster_boot_image(oldest_after, lambda r: below_limit(r, limits))
    manual = _manual_for(oldest)
    message = (
        f"claiming {decision.kind} {decision.namespace}/{decision.name} makes the Machine Config Operator skip it, and "
        f"its skew enforcement then resets its record to the install version {installed}, below {limits.ocp}: it "
        "will hold upgrades although the boot images are current"
    )
    if manual is not None:
        setting = json.dumps({"mode": "Manual", "manual": manual.to_dict()}, separators=(",", ":"))
        message += (f". The real oldest boot image is {oldest}: set spec.bootImageSkewEnforcement to {setting} "
                    f"(oc patch machineconfiguration cluster --type=merge -p "
                    f"'{{\"spec\":{{\"bootImageSkewEnforcement\":{setting}}}}}')")
    else:
        message += ". The oldest boot image is not known yet: set spec.bootImageSkewEnforcement to Manual once it is"
    return ClaimHold(message, manual)


def _manual_for(release: BootImageRelease | None) -> ManualSkew | None:
    if release is None:
        return None
    if release.kind is ReleaseKind.OCP:
        try:
            return ManualSkew(ManualMode.OCP_VERSION, str(OcpVersion.parse(release.value)))
        except VersionError:
            return None
    return ManualSkew(ManualMode.RHCOS_VERSION, release.value)


__all__ = [
    "ClaimHold",
    "Disagreement",
    "DisagreementClock",
    "McoPass",
    "claim_hold_warning",
    "disagrees",
    "hive_change",
    "hive_proposal_message",
    "mco_skew_mode",
    "proposal_message",
]
