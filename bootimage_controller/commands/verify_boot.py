"""`bootimage-controller verify-boot NAME... [--timeout 20m] [--keep]`: prove a MachineSet's boot
image by booting one canary Machine from its template (SPEC section 3b; what a canary is, and why it
looks as it does: `core/canary.py`).

For each MachineSet, at once: create the canary (or, when one of the same name exists, a `verify-boot`
run killed before it finished, take it over), watch it until it has shown what it can or `--timeout`
passes, record the verdict on the MachineSet (`boot-image-verified`, the annotation the daemon
writes), and delete the canary unless `--keep`. A failed image this controller wrote is then rolled
back by the daemon, as after any failed first boot.

Exit status: 0 every image verified; 3 some image failed its first boot; 1 some verdict could not be
told (a capacity error, no instance before the timeout, a refusal), each said in one line.
The upgrade gate is not consulted: this is an administrator's explicit request, and a canary
reads nothing the upgrade changes. A killed command leaves its canary; run it again (it takes it
over), or a running daemon deletes it a little after its deadline.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes_asyncio.client import CustomObjectsApi

from ..constants import (
    CANARY_RUNNER_VERIFY_BOOT,
    MACHINE_API_GROUP,
    MACHINE_PLURAL,
    MACHINE_VERSION,
    MACHINESET_KIND,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
)
from ..core.canary import CanaryError, CanaryProgress, canary_deadline, canary_machine, canary_progress
from ..core.model import get_path, image_label, parse_dotted
from ..core.rollback import verdict_patch
from ..core.verification import BootVerdict, NodeFacts, Verdict, node_facts
from ..errors import InputError
from ..kube.api_errors import ApiError, NotFound
from ..kube.client import make_api_client, object_path, read_path
from ..kube.core_api import CoreApi
from ..kube.retry import api_call, retry_on_conflict
from ..reconcile.writer import MachineSetWriter
from .rollback import boot_image_field

EXIT_VERIFIED, EXIT_COULD_NOT_TELL, EXIT_FAILED = 0, 1, 3
POLL_SECONDS = 2.0
RECORD_ATTEMPTS = 5


def verify_boot(args: argparse.Namespace) -> int:
    return asyncio.run(_verify_boot(args))


async def _verify_boot(args: argparse.Namespace) -> int:
    api = await make_api_client(args.kubeconfig)
    try:
        return await verify_machine_sets(api, args.namespace, args.names, args.timeout, keep=args.keep)
    finally:
        await api.close()


@dataclass(frozen=True)
class CanaryRun:
    """What one MachineSet's canary came to."""

    machine_set: str
    verdict: BootVerdict | None
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if self.verdict is not None and self.verdict.verdict is Verdict.VERIFIED:
            return EXIT_VERIFIED
        if self.verdict is not None and self.verdict.verdict is Verdict.FAILED:
            return EXIT_FAILED
        return EXIT_COULD_NOT_TELL

    def line(self) -> str:
        if self.error is not None:
            return f"error: {self.machine_set}: {self.error}"
        assert self.verdict is not None
        v = self.verdict
        return f"{self.machine_set}: {v.verdict}: boot image {v.image}: {v.reason}"


async def verify_machine_sets(api: Any, namespace: str, names: list[str], timeout: float, *, keep: bool = False,
                              poll: float = POLL_SECONDS) -> int:
    """Every MachineSet's canary at once; the exit status of the worst (module docstring)."""
    writer = MachineSetWriter(CustomObjectsApi(api), CoreApi(api))
    runs = await asyncio.gather(*(_run(api, writer, namespace, name, timeout, keep, poll) for name in names))
    for run in runs:
        print(run.line(), flush=True)
    codes = {run.exit_code for run in runs}
    return EXIT_FAILED if EXIT_FAILED in codes else EXIT_COULD_NOT_TELL if EXIT_COULD_NOT_TELL in codes \
        else EXIT_VERIFIED


async def _run(api: Any, writer: MachineSetWriter, namespace: str, name: str, timeout: float, keep: bool,
               poll: float) -> CanaryRun:
    who = f"MachineSet {namespace}/{name}"
    try:
        machine_set = await writer.get(MACHINESET_KIND, namespace, name)
        if machine_set is None:
            return CanaryRun(who, None, "not found")
        field = boot_image_field(machine_set)
        image = image_label(get_path(machine_set, parse_dotted(field)))
        if image is None:
            raise InputError(who, field, "no boot image to verify")
        peers = await api_call(lambda: writer.custom.list_namespaced_custom_object(
            MACHINE_API_GROUP, MACHINESET_VERSION, namespace, MACHINESET_PLURAL), what=f"list MachineSets in {namespace}")
        now = datetime.now(UTC)
        body = canary_machine(machine_set, image, peers.get("items", []), CANARY_RUNNER_VERIFY_BOOT,
                              now + timedelta(seconds=timeout))
        canary_name = str(body["metadata"]["name"])
        if await writer.create_machine(body):
            print(f"{who}: canary Machine {namespace}/{canary_name} created from boot image {image}", flush=True)
        else:
            print(f"{who}: canary Machine {namespace}/{canary_name} exists already; watching it", flush=True)
        seen = await _watch(api, namespace, canary_name, field, timeout, poll)
        if seen is None:
            return CanaryRun(who, None, f"canary Machine {namespace}/{canary_name} disappeared before its verdict")
        progress, uid = seen
        verdict = await _record(writer, namespace, name, progress.verdict)
        if not keep:
            await writer.delete_machine(namespace, canary_name, uid)
        return CanaryRun(who, verdict)
    except (CanaryError, InputError) as exc:
        return CanaryRun(who, None, str(exc))
    except ApiError as exc:
        return CanaryRun(who, None, exc.describe())


async def _watch(api: Any, namespace: str, name: str, field: str, timeout: float,
                 poll: float) -> tuple[CanaryProgress, str] | None:
    """Poll the canary and its Node until its verdict is final (its deadline ends the wait): the
    progress and the canary's uid (it is deleted by uid)."""
    path = object_path(MACHINE_API_GROUP, MACHINE_VERSION, namespace, MACHINE_PLURAL, name)
    while True:
        try:
            machine = await api_call(lambda: read_path(api, path), what=f"get canary Machine {namespace}/{name}")
        except NotFound:
            return None
        nodes = await _node(api, get_path(machine, ("status", "nodeRef", "name")))
        deadline = canary_deadline(machine)
        progress = canary_progress(machine, field, nodes, datetime.now(UTC), timedelta(seconds=timeout))
        if progress.done:
            return progress, str(get_path(machine, ("metadata", "uid")))
        wait = poll if deadline is None else max(0.0, min(poll, (deadline - datetime.now(UTC)).total_seconds()))
        await asyncio.sleep(wait or 0.1)


async def _node(api: Any, name: Any) -> dict[str, NodeFacts]:
    if not isinstance(name, str) or not name:
        return {}
    try:
        node = await api_call(lambda: read_path(api, f"/api/v1/nodes/{name}"), what=f"get Node {name}")
    except NotFound:
        return {}
    facts = node_facts(node)
    return {facts.name: facts}


async def _record(writer: MachineSetWriter, namespace: str, name: str, found: BootVerdict) -> BootVerdict:
    """The canary's verdict on the MachineSet, keeping the images the record says never to write
    again; a JSON patch testing the resourceVersion, read again and planned again after a conflict."""

    async def read() -> dict[str, Any] | None:
        return await writer.get(MACHINESET_KIND, namespace, name)

    async def plan(machine_set: dict[str, Any]) -> BootVerdict:
        return found.kept_from(BootVerdict.from_annotations(get_path(machine_set, ("metadata", "annotations")) or {}))

    async def write(machine_set: dict[str, Any], verdict: BootVerdict) -> BootVerdict:
        await writer.patch(machine_set, verdict_patch(machine_set, verdict), "record canary verdict")
        return verdict

    recorded = await retry_on_conflict(read, plan, write, what=f"record canary verdict on {namespace}/{name}",
                                       attempts=RECORD_ATTEMPTS)
    if recorded is None:
        raise InputError(f"MachineSet {namespace}/{name}", None, "deleted before its verdict was recorded")
    return recorded
