"""`bootimage-controller hand-over NAME...` and `hand-back NAME...` (SPEC section 3, hand-over).

Handing a MachineSet over used to be an annotation; only the claim (our owner reference) stops the
Machine Config Operator, which skips owned MachineSets, and it read the annotation never: started
together, the real MCO wrote a handed-over stale MachineSet before the daemon could claim it (3 of 3
runs, 40-150 ms ahead). `hand-over` writes the claim and the annotation in one JSON patch guarded by
the object's resourceVersion, so from the moment the admin decides no other controller that skips
owned MachineSets writes it. `hand-back` removes both in one patch.

Before a hand-over that makes the MCO hold upgrades (its skew enforcement resets its record for a
MachineSet it skips) the command says so on stderr, with the Manual setting that matches the real
oldest boot image, and writes nothing unless `--yes` (which still prints the warning).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio.client import CustomObjectsApi

from ..constants import ANNOTATION_BOOT_IMAGE_MANAGER, CLAIM_HOLDER_NAME, MACHINESET_KIND, Action, Manager
from ..core.claims import JsonPatch, boot_image_patch, pointer, release_patch
from ..core.companion import ClaimHold, MachineSetAfter, boot_images_after, claim_hold_warning
from ..core.model import BootImageDecision
from ..core.planner import plan_machine
from ..core.skew.assess import install_aleph
from ..core.skew.policy import install_version_from_cluster_version
from ..core.skew.record import ReleaseSource
from ..core.skew.verdict import SkewLimits
from ..kube.api_errors import ApiError, NotFound
from ..kube.client import make_api_client
from ..kube.core_api import CoreApi
from ..kube.retry import retry_on_conflict
from ..reconcile.writer import MachineSetWriter
from .one_shot import run_within_timeout

EXIT_OK, EXIT_FAILED = 0, 1


def hand_over(args: argparse.Namespace) -> int:
    return run_within_timeout(_hand_over, args)


def hand_back(args: argparse.Namespace) -> int:
    return run_within_timeout(_hand_back, args)


def hand_over_ops(obj: Mapping[str, Any], holder_uid: str) -> JsonPatch | None:
    """The one patch: resourceVersion test, our claim, the annotation. None when both are there."""
    ops = boot_image_patch(obj, (), {ANNOTATION_BOOT_IMAGE_MANAGER: str(Manager.OURS)}, holder_uid)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    claimed = len(ops) == 2  # only the test and the annotation: the claim is there already
    if claimed and annotations.get(ANNOTATION_BOOT_IMAGE_MANAGER) == Manager.OURS:
        return None
    return ops


def hand_back_ops(obj: Mapping[str, Any]) -> JsonPatch | None:
    """The one patch: resourceVersion test, our claim and the annotation removed. None when neither is there."""
    meta = obj.get("metadata") or {}
    ops = release_patch(obj) or [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}]
    if ANNOTATION_BOOT_IMAGE_MANAGER in (meta.get("annotations") or {}):
        ops.append({"op": "remove", "path": pointer(("metadata", "annotations", ANNOTATION_BOOT_IMAGE_MANAGER))})
    return ops if len(ops) > 1 else None


async def _hand_over(args: argparse.Namespace) -> int:
    warnings = await _hold_warnings(args)
    if warnings is None:
        return EXIT_FAILED
    # Said with --yes too (stderr): a script, or an admin who knows the flag, is told the MCO will
    # hold upgrades and which Manual setting avoids it as surely as one asked first.
    for name, hold in warnings.items():
        print(f"warning: {args.namespace}/{name}: {hold.message}", file=sys.stderr)
    if warnings and not args.yes:
        print("error: nothing written: handing these over makes the Machine Config Operator hold upgrades; "
              "set the Manual skew setting above first, or run again with --yes", file=sys.stderr)
        return EXIT_FAILED
    if warnings:
        print("handing over as asked (--yes): the Machine Config Operator will hold upgrades until the Manual skew "
              "setting above is made", file=sys.stderr)
    return await _write_each(args, over=True)


async def _hand_back(args: argparse.Namespace) -> int:
    return await _write_each(args, over=False)


async def _write_each(args: argparse.Namespace, *, over: bool) -> int:
    api = await make_api_client(args.kubeconfig)
    failed = False
    try:
        writer = MachineSetWriter(CustomObjectsApi(api), CoreApi(api))
        holder_uid = ""
        if over:
            holder = await writer.ensure_holder()
            if holder.deleting:
                print(f"error: the claim holder {writer.holder_namespace}/{CLAIM_HOLDER_NAME} is being deleted "
                      "(release-claims is running); hand over once it is gone")
                return EXIT_FAILED
            holder_uid = holder.uid
        for name in args.names:
            failed |= not await _write_one(writer, args.namespace, name, holder_uid, over=over)
    finally:
        await api.close()
    return EXIT_FAILED if failed else EXIT_OK


async def _write_one(writer: MachineSetWriter, namespace: str, name: str, holder_uid: str, *, over: bool) -> bool:
    verb = "hand-over" if over else "hand-back"

    async def read() -> dict[str, Any] | None:
        return await writer.get(MACHINESET_KIND, namespace, name)

    async def plan(obj: dict[str, Any]) -> JsonPatch | None:
        return hand_over_ops(obj, holder_uid) if over else hand_back_ops(obj)

    async def write(obj: dict[str, Any], ops: JsonPatch) -> bool:
        await writer.patch(obj, ops, verb)
        return True

    try:
        first = await read()
        if first is None:
            print(f"error: MachineSet {namespace}/{name} not found")
            return False
        written = await retry_on_conflict(read, plan, write, what=f"{verb} {namespace}/{name}", current=first)
    except NotFound:
        print(f"error: MachineSet {namespace}/{name} not found")
        return False
    except ApiError as exc:
        print(f"error: {verb} of {namespace}/{name} not written: {exc.describe()}")
        return False
    if over:
        print(f"{namespace}/{name}: handed over to bootimage-controller (claim and "
              f"{ANNOTATION_BOOT_IMAGE_MANAGER} written in one patch)" if written else
              f"{namespace}/{name}: already handed over")
    else:
        print(f"{namespace}/{name}: handed back (claim and annotation removed in one patch)" if written else
              f"{namespace}/{name}: not handed over; nothing to remove")
    return True


async def _hold_warnings(args: argparse.Namespace) -> dict[str, ClaimHold] | None:
    """Per name, the companion rules' warning when handing it over makes the MCO hold upgrades
    (planned from the live cluster as `plan --from-cluster` reads it). None: the cluster could not
    be read (said on stdout)."""
    from ..kube.kubeconfig import target_of
    from ..plan import inputs as plan_inputs
    from ..plan.live import read_cluster_objects

    try:
        objects = await read_cluster_objects(args.kubeconfig, False, command=args.command)
        prepared = plan_inputs.prepare(plan_inputs.classify(objects))
    except Exception as exc:  # a read or parse failure: one line, nothing written
        print(f"error: cannot judge the hand-over, nothing written: {target_of(args.kubeconfig)}: {exc}",
              file=sys.stderr)
        return None
    machines = {(m.namespace, m.name): m.obj for m in prepared.inputs.machines if m.kind == MACHINESET_KIND}
    decisions = plan_inputs.run_planner(prepared)
    cv = prepared.inputs.cluster_version
    mc = prepared.inputs.machine_configuration
    ctx = prepared.context
    install = install_version_from_cluster_version(cv.obj if cv is not None else None)
    aleph = install_aleph(n.obj for n in prepared.inputs.nodes)
    limits = SkewLimits.from_flags(args.ocp_skew_limit, args.rhel_skew_limit, ocp_flag="--ocp-skew-limit",
                                   rhel_flag="--rhel-skew-limit")
    out: dict[str, ClaimHold] = {}
    for name in args.names:
        obj = machines.get((args.namespace, name))
        if obj is None:
            continue  # said when it is written
        handed = copy.deepcopy(dict(obj))
        handed.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_BOOT_IMAGE_MANAGER] = str(Manager.OURS)
        decision = plan_machine(handed, ctx.golden, ctx.facts, ctx.enrollment)
        after = [_after(decision, handed)]
        after += [_after(d, machines.get((d.namespace, d.name))) for d in decisions
                  if (d.namespace, d.name) != (args.namespace, name)]
        hold = claim_hold_warning(decision, ctx.facts.managers.mco, mc.obj if mc is not None else None, install,
                                  boot_images_after(after, aleph, install), limits)
        if hold is not None:
            out[name] = hold
    return out


def _after(decision: BootImageDecision, obj: Mapping[str, Any] | None) -> MachineSetAfter:
    """A MachineSet as it will be once the next writes are made: at its target where it is patched."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    written = ReleaseSource.GOLDEN_DATA if decision.action is Action.PATCH else None
    return MachineSetAfter(decision, annotations, written)


__all__ = ["hand_back", "hand_back_ops", "hand_over", "hand_over_ops"]
