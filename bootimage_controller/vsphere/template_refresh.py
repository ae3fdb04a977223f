"""Build or replace one RHCOS template in vCenter, each step safe to crash after.

The order (reference section 6, and why each step is where it is):

1. Recover what a crashed refresh left, recognised by its names, fixed per template and release
   (`topology.leftover_names`):
   an old template renamed away but no template of the name -> renamed back (roll back); both ->
   the swap had put the new one in place, the old one is deleted (finish).
2. The template already holds the target (another MachineSet's refresh did it): done, no import.
3. A temporary VM: reused when it is complete (a template with our record of the target release:
   the crash came after the import), else deleted.
4. Download the OVA (verified, cached), import it as the temporary VM, turn EFI secure boot off
   when the OVF turns it on, tag it like the old template (its tags, the infrastructure tag,
   `providerSpec.tagIDs`), write the release record, mark it a template. Record and template mark
   come last: together they are how step 3 knows the VM is complete.
5. Swap: old -> the recoverable name, new -> the template name, delete old. Between the two
   renames no VM has the name; a MachineSet scaling up in that moment fails to clone and the
   machine controller retries it.

Every vCenter write is preceded by `guard()`, which raises `WriteRefused` when this replica must
not write now (lost the Lease, upgrade started): a refresh stops between steps, never half-way
through one, and the next pass resumes from step 1.

One refresh per template at a time (MachineSets sharing a template wait for the first, then find it
current in step 2), at most `concurrency` templates at once.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from .. import observability as obs
from ..core.cloud.facts import TemplateVm
from ..core.vsphere.topology import TemplateRefresh, leftover_names
from .ova import OvaCache, read_ovf
from .vcenter import VCenterError, VCenterSession

log = structlog.get_logger(__name__)

Guard = Callable[[], None]
# Tests only (docs/vsphere.md): exit the process at a named step, as a kill would.
ENV_CRASH_AT = "BOOTIMAGE_VSPHERE_TEST_CRASH_AT"
CRASH_STEPS = frozenset({"imported", "old-renamed"})


@dataclass(frozen=True)
class RefreshOutcome:
    result: Literal["current", "created", "replaced"]
    name: str
    previous_release: str | None
    imported: bool


class VCenterClient:
    """One vCenter session, its calls serialised and run in a thread (pyvmomi is synchronous)."""

    def __init__(self, session: VCenterSession) -> None:
        self.session = session
        self._lock = asyncio.Lock()

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async with self._lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    def close(self) -> None:
        self.session.close()


class TemplateRefresher:
    def __init__(self, cache: OvaCache, *, concurrency: int = 2, crash_at: str | None = None) -> None:
        self.cache = cache
        self._slots = asyncio.Semaphore(concurrency)
        self._locks: dict[tuple[str, str, str, str], asyncio.Lock] = {}
        self._crash_at = crash_at if crash_at in CRASH_STEPS else None
        # The last refresh of each template to each release: a MachineSet that waited on the lock
        # while another built its template is told what was done, not "it was current".
        self._done: dict[tuple[tuple[str, str, str, str], str], RefreshOutcome] = {}

    @classmethod
    def from_env(cls, cache: OvaCache, concurrency: int = 2) -> TemplateRefresher:
        return cls(cache, concurrency=concurrency, crash_at=os.environ.get(ENV_CRASH_AT) or None)

    async def refresh(self, client: VCenterClient, work: TemplateRefresh, guard: Guard) -> RefreshOutcome:
        """Raises `VCenterError`, `ova.OvaError` or `WriteRefused`; whatever it leaves behind, the
        next call recovers."""
        p = work.placement
        key = (p.server, p.datacenter, p.folder, work.name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock, self._slots:
            outcome = await _Refresh(self, client, work, guard).run()
        done_key = (key, work.ova.release)
        if outcome.result != "current":
            self._done[done_key] = outcome
        elif done_key in self._done:
            return self._done[done_key]  # built for a MachineSet sharing it, moments ago
        return outcome

    def crash_point(self, step: str) -> None:
        if self._crash_at == step:
            log.warning("test hook: exiting at a template refresh step", step=step)
            os._exit(70)


class _Refresh:
    def __init__(self, owner: TemplateRefresher, client: VCenterClient, work: TemplateRefresh, guard: Guard) -> None:
        self.owner, self.client, self.work, self.guard = owner, client, work, guard
        self.s = client.session
        self.release = work.ova.release
        self.tmp_name, self.old_name = leftover_names(work.name, self.release)

    async def _find(self) -> dict[str, tuple[str, TemplateVm] | None]:
        p = self.work.placement
        found = await self.client.call(self.s.find, p.datacenter, p.folder, (self.work.name, self.tmp_name, self.old_name))
        # Only VMs in the workspace folder are ours to recover, reuse or replace.
        return {n: (f if f is not None and f[1].in_folder else None) for n, f in found.items()}

    async def _write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.guard()
        return await self.client.call(fn, *args, **kwargs)

    async def run(self) -> RefreshOutcome:
        found = await self._find()
        named, tmp, old = found[self.work.name], found[self.tmp_name], found[self.old_name]
        if old is not None:
            if named is not None:
                log.info("finishing an interrupted template swap: deleting the old template", template=self.work.name)
                await self._write(self.s.destroy, old[0])
            else:
                log.info("rolling back an interrupted template swap", template=self.work.name, from_name=self.old_name)
                await self._write(self.s.rename, old[0], self.work.name)
                named = (old[0], old[1])
        previous = named[1].release if named is not None else None
        if named is not None and previous == self.release:
            if tmp is not None:
                await self._write(self.s.destroy, tmp[0])
            return RefreshOutcome("current", self.work.name, previous, imported=False)
        imported = False
        if tmp is not None and tmp[1].is_template and tmp[1].release == self.release:
            log.info("reusing the template imported before an interruption", template=self.work.name, vm=self.tmp_name)
            moid = tmp[0]
        else:
            if tmp is not None:
                await self._write(self.s.destroy, tmp[0])
            moid = await self._import(named[0] if named is not None else None)
            imported = True
        self.owner.crash_point("imported")
        await self._swap(moid, named[0] if named is not None else None)
        result: Literal["created", "replaced"] = "replaced" if named is not None else "created"
        log.info("template refreshed", template=self.work.name, release=self.release, previous_release=previous, result=result)
        return RefreshOutcome(result, self.work.name, previous, imported)

    async def _import(self, old_moid: str | None) -> str:
        work = self.work
        path = await self.owner.cache.fetch(work.ova)
        try:
            ovf = await asyncio.to_thread(read_ovf, path)
        except ValueError as exc:
            raise VCenterError(f"the stream's OVA cannot be imported: {exc}") from None
        started = time.monotonic()
        self.guard()

        def progress(done: int, total: int) -> None:
            log.info("uploading template disk", template=work.name, bytes=done, total_bytes=total)

        try:
            moid = await self.client.call(
                self.s.import_ova, work.placement, self.tmp_name, path, ovf, work.network, progress
            )
            await self._write(self.s.finish_template, moid, self.release, disable_secure_boot=ovf.secure_boot,
                              mark=False)
            await self._tag(moid, old_moid)
            await self._write(self.s.finish_template, moid, self.release, disable_secure_boot=False, mark=True)
        except VCenterError:
            obs.TEMPLATE_IMPORTS.labels(result="failed").inc()
            raise
        obs.TEMPLATE_IMPORTS.labels(result="imported").inc()
        obs.TEMPLATE_IMPORT_DURATION.observe(time.monotonic() - started)
        log.info("template imported", vm=self.tmp_name, release=self.release, seconds=round(time.monotonic() - started, 1))
        return str(moid)

    async def _tag(self, moid: str, old_moid: str | None) -> None:
        wanted: list[str] = []
        if old_moid is not None:
            wanted += await self.client.call(self.s.attached_tags, old_moid)
        wanted += list(self.work.tag_ids)
        infra = self.work.infrastructure_name
        if infra:
            # The installer's tag: category `openshift-<infraID>`, tag `<infraID>`.
            infra_tag = await self.client.call(self.s.tag_named, infra, f"openshift-{infra}")
            if infra_tag is not None:
                wanted.append(infra_tag)
        for tag_id in dict.fromkeys(wanted):
            await self._write(self.s.attach_tag, tag_id, moid)

    async def _swap(self, new_moid: str, old_moid: str | None) -> None:
        if old_moid is not None:
            await self._write(self.s.rename, old_moid, self.old_name)
            self.owner.crash_point("old-renamed")
        await self._write(self.s.rename, new_moid, self.work.name)
        if old_moid is not None:
            await self._write(self.s.destroy, old_moid)
