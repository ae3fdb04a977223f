"""The daemon's canaries (SPEC section 3b; what a canary is: `core/canary.py`).

A step of boot verification, for one MachineSet per reconcile, level-triggered: everything it knows
is in the cluster (the canary Machines, found by their label, and the MachineSet's record), so a
daemon restarted mid-canary picks up where the last one stopped. In order:
1. A canary of the daemon's that has shown what it can (its Node Ready, a failure, its deadline
   passed) and whose result the MachineSet's record holds is deleted. One whose result is not held
   yet is recorded first (`unverified` results here; `verified` and `failed` ones by verification in
   the same reconcile), and deleted on the watch event of that record: once the Machine is gone the
   record is the only evidence, so it is never deleted before.
2. A canary that no longer proves anything is deleted at once: its image is not the MachineSet's any
   more (rolled back, or a newer golden image written), or the MachineSet left this controller.
3. A `verify-boot` canary is that command's; it is deleted here only once its deadline has passed by
   `ABANDONED_AFTER` (the command was killed), never when it is kept (`--keep`: no deadline).
4. Then, when one is due (`canary_due`) and none runs, one is created.
Every write goes through the fenced client (only the leader) under the upgrade gate, as every other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from ..constants import CANARY_RUNNER_DAEMON
from ..core.canary import (
    CanaryError,
    canary_deadline,
    canary_due,
    canary_machine,
    canary_progress,
    canary_runner,
    recorded_for,
)
from ..core.model import as_mapping, get_path, image_label
from ..core.rollback import verdict_patch
from ..core.verification import BootVerdict, MachineFacts, NodeFacts, Verdict
from ..kube.api_errors import ApiError
from ..kube.fence import UpgradeGateClosed, write_preconditions
from .writer import MachineSetWriter, guarded_patch

log = structlog.get_logger(__name__)

# How long past its deadline a `verify-boot` canary is left to that command before the daemon
# takes it for abandoned and deletes it.
ABANDONED_AFTER = timedelta(minutes=2)


@dataclass(frozen=True)
class CanaryReport:
    """What the step did and saw, for the log and the verification outcome."""

    running: str | None = None  # the canary Machine still being watched
    created: str | None = None
    deleted: tuple[str, ...] = ()
    error: str | None = None  # a canary could not be made or written (said in the Warning and the log)
    recheck_at: datetime | None = None


@dataclass(frozen=True)
class CanaryInputs:
    """One MachineSet's view for the step (all read from the caches by `BootVerification`)."""

    machine_set: Mapping[str, Any]
    machine_sets: Sequence[Mapping[str, Any]]  # its namespace's, for the selectors a canary must escape
    field: str | None
    current: Any
    judged: BootVerdict
    recorded: BootVerdict | None
    wrote_current: bool
    ours: bool  # this controller keeps the MachineSet's boot image and may record on it
    machines: Sequence[MachineFacts]  # the MachineSet's Machines, canaries included
    canaries: Sequence[Mapping[str, Any]]
    nodes: Mapping[str, NodeFacts]


class Canaries:
    def __init__(self, timeout: float, upgrade_gate: Callable[[], UpgradeGateClosed | None],
                 clock: Callable[[], datetime]) -> None:
        self.timeout = timedelta(seconds=timeout)
        self.upgrade_gate = upgrade_gate
        self.clock = clock

    async def step(self, writer: MachineSetWriter, seen: CanaryInputs) -> CanaryReport:
        now = self.clock()
        deleted: list[str] = []
        running: str | None = None
        recheck: datetime | None = None
        image = image_label(seen.current)
        for canary in seen.canaries:
            meta = as_mapping(canary.get("metadata"))
            if meta.get("deletionTimestamp"):
                running = running or str(meta.get("name"))
                continue
            if canary_runner(canary) != CANARY_RUNNER_DAEMON:
                deadline = canary_deadline(canary)
                if deadline is not None and now >= deadline + ABANDONED_AFTER and await self._delete(writer, canary):
                    deleted.append(str(meta.get("name")))
                continue
            progress = canary_progress(canary, seen.field, seen.nodes, now, self.timeout)
            if not seen.ours or progress.machine.image != image:
                if await self._delete(writer, canary):
                    deleted.append(progress.machine.name)
                continue
            if not progress.done:
                running, recheck = progress.machine.name, progress.recheck_at
                continue
            if recorded_for(progress, seen.recorded):
                if await self._delete(writer, canary):
                    deleted.append(progress.machine.name)
                continue
            running = progress.machine.name
            if progress.verdict.verdict is Verdict.UNVERIFIED:
                # Verification records only `verified` and `failed`; this canary's `unverified`
                # (capacity, no instance) is recorded here, so the same image gets no second canary.
                verdict = progress.verdict.kept_from(seen.recorded)
                _, error = await guarded_patch(writer, self.upgrade_gate, seen.machine_set,
                                               verdict_patch(seen.machine_set, verdict), "record canary verdict")
                if error is not None:
                    return CanaryReport(running, None, tuple(deleted), error, recheck)
        if running is not None or deleted or not seen.ours:
            return CanaryReport(running, None, tuple(deleted), None, recheck)
        if not canary_due(seen.machine_set, seen.current, seen.judged, seen.wrote_current, seen.machines,
                          seen.canaries):
            return CanaryReport(recheck_at=recheck)
        if self.upgrade_gate() is not None:
            # Never a new Machine while an upgrade runs (checked again when the create is sent):
            # the gate's opening queues every MachineSet, and the canary is due then.
            return CanaryReport()
        return await self._create(writer, seen, image, now)

    async def _create(self, writer: MachineSetWriter, seen: CanaryInputs, image: str | None,
                      now: datetime) -> CanaryReport:
        assert image is not None  # canary_due
        try:
            body = canary_machine(seen.machine_set, image, seen.machine_sets, CANARY_RUNNER_DAEMON,
                                  now + self.timeout)
        except CanaryError as exc:
            return CanaryReport(error=str(exc))
        name = str(body["metadata"]["name"])
        try:
            with write_preconditions(self.upgrade_gate):
                made = await writer.create_machine(body)
        except UpgradeGateClosed:
            return CanaryReport()
        except ApiError as exc:
            return CanaryReport(error=f"create canary Machine {name}: {exc.describe()}")
        # Not made: a reconcile the cache had not caught up with made it first, and said so.
        return CanaryReport(running=name, created=name if made else None, recheck_at=now + self.timeout)

    async def orphaned(self, writer: MachineSetWriter, canaries: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The canaries of a MachineSet that is gone: the daemon's deleted at once (nothing is left
        to record on), `verify-boot`'s left to that command."""
        deleted = []
        for canary in canaries:
            if canary_runner(canary) == CANARY_RUNNER_DAEMON and await self._delete(writer, canary):
                deleted.append(str(get_path(canary, ("metadata", "name"))))
        return tuple(deleted)

    async def _delete(self, writer: MachineSetWriter, canary: Mapping[str, Any]) -> bool:
        meta = as_mapping(canary.get("metadata"))
        try:
            with write_preconditions(self.upgrade_gate):
                return await writer.delete_machine(str(meta.get("namespace")), str(meta.get("name")),
                                                   str(meta.get("uid")))
        except UpgradeGateClosed:
            return False
        except ApiError as exc:
            log.warning("canary Machine not deleted; tried again on its next event", name=meta.get("name"),
                        error=exc.describe())
            return False
