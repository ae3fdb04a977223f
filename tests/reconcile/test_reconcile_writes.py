"""The machine and claims reconcilers' write path with a fake writer (built as the daemon builds
them, with fakes of the writer interface): typed refusals, conflicts, the claims gate, releases,
and what the reporter makes of the outcomes (no API server)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness.objects import (
    bootimages_configmap,
    cluster_version,
    infrastructure,
    machine_configuration,
    machineset_from_fixture,
)
from kubernetes_asyncio.client import ApiClient

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_HOT_LOOP,
    CAPI_VERSIONS,
    CLAIM_FINALIZER,
    EVENT_FAILED,
    EVENT_HOT_LOOP,
    HOT_LOOP_LIMIT,
    Reason,
)
from bootimage_controller.core.claims import HotLoopRecord, owner_reference, target_fingerprint
from bootimage_controller.core.lookups import plan_object
from bootimage_controller.core.model import MachineResource, Refusal
from bootimage_controller.core.skew.verdict import SkewLimits
from bootimage_controller.kube.api_errors import Invalid, conflict
from bootimage_controller.kube.fence import NotLeader
from bootimage_controller.reconcile import assembly as assembly_module
from bootimage_controller.reconcile import counting as counting_module
from bootimage_controller.reconcile import machines as machines_module
from bootimage_controller.reconcile import reporting
from bootimage_controller.reconcile.assembly import Hooks, ReconcileOptions, Reconcilers, Writers, assemble
from bootimage_controller.reconcile.claim_reconciler import ClaimGate, release_all_claims
from bootimage_controller.reconcile.keys import CLAIMS_KEY
from bootimage_controller.reconcile.status_clock import StatusClock
from bootimage_controller.reconcile.store import InformerStore, build_informers
from bootimage_controller.reconcile.writer import Holder

NEW_AMI = {"id": "ami-06a6b025350ff1e23"}  # the 4.22 multistream target in us-east-1
KEY = "MachineSet/openshift-machine-api/ms"


def machineset(name: str = "ms", rv: str = "10", **kw: Any) -> dict[str, Any]:
    obj = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", name, **kw)
    obj["metadata"].update(resourceVersion=rv, uid=f"uid-{name}")
    return obj


class FakeWriter:
    """MachineSetWriter's surface, recording calls; a write raises the next of `results` (None: it
    is applied), as the real writer raises the API server's typed refusals."""

    custom = None

    def __init__(self) -> None:
        self.holder = Holder("holder-uid", deleting=False)
        self.calls: list[tuple[str, str]] = []
        self.results: list[Exception | None] = []
        self.release_results: list[Exception | None] = []
        self.keep_results: list[Exception | None] = []
        self.fresh: dict[str, Any] | None = None
        self.in_patch = asyncio.Event()
        self.finish_patch = asyncio.Event()
        self.finish_patch.set()
        self.keep_answered = asyncio.Event()  # a holder write is answered when this is set
        self.keep_answered.set()

    async def ensure_holder(self) -> Holder:
        self.calls.append(("ensure_holder", ""))
        return self.holder

    async def patch_boot_image(self, obj: Any, decision: Any, annotations: Any, holder: Holder) -> None:
        self.calls.append(("patch", obj["metadata"]["resourceVersion"]))
        self.in_patch.set()
        await self.finish_patch.wait()
        refusal = self.results.pop(0) if self.results else None
        if refusal is not None:
            raise refusal

    async def get(self, kind: str, namespace: str, name: str, version: str | None = None) -> dict[str, Any] | None:
        self.calls.append(("get", name))
        return self.fresh

    async def release(self, obj: Any) -> None:
        self.calls.append(("release", obj["metadata"]["name"]))
        refusal = self.release_results.pop(0) if self.release_results else None
        if refusal is not None:
            raise refusal

    async def keep_hot_loop(self, entries: Any) -> None:
        self.calls.append(("keep_hot_loop", ",".join(f"{v}" for v in entries.values())))
        await self.keep_answered.wait()
        refusal = self.keep_results.pop(0) if self.keep_results else None
        if refusal is not None:
            raise refusal

    async def remove_holder_finalizer(self) -> None:
        self.calls.append(("remove_finalizer", ""))


class FakeEvents:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    def post(self, involved: Any, type: str, reason: str, message: str) -> None:
        self.emitted.append((type, reason, message))

    async def emit_now(self, involved: Any, type: str, reason: str, message: str) -> None:
        self.emitted.append((type, reason, message))

    async def flush(self, timeout: float = 30.0) -> None:
        pass


@pytest.fixture
async def api() -> AsyncIterator[ApiClient]:
    client = ApiClient()
    yield client
    await client.close()


class Harness:
    """The assembled reconcilers, their fake writer and events, and what they queued."""

    def __init__(self, parts: Reconcilers, events: FakeEvents) -> None:
        self.parts = parts
        self.events = events
        self.states = parts.status.outcomes
        self.informers = parts.store.informers

    async def reconcile(self, key: str) -> Any:
        return await self.parts.loop.reconcile(key)

    def inputs(self) -> Any:
        return self.parts.cluster.inputs()

    def view(self) -> Any:
        return self.parts.status.view()


class QueuedKeys(list[str]):
    """A `KeySink` that records every key in order (delayed ones too, as the queue would get them)."""

    def add(self, key: str) -> None:
        self.append(key)

    def add_after(self, key: str, delay: float) -> None:
        self.append(key)


def make_controller(
    api: ApiClient, *machinesets: dict[str, Any], before_patch: Any = None,
    on_pass: Any = None, status_clock: StatusClock | None = None,
) -> tuple[Harness, FakeWriter, QueuedKeys]:
    writer = FakeWriter()
    events = FakeEvents()
    store = InformerStore(build_informers(api, CAPI_VERSIONS[-1]))
    queued = QueuedKeys()
    hooks = Hooks(stub_check=before_patch, events=events, on_pass=on_pass, status_clock=status_clock or StatusClock())
    parts = assemble(store, Writers(writer, FakeWriter(), CAPI_VERSIONS[-1]), ReconcileOptions(),  # type: ignore[arg-type]
                     hooks, queued)
    ctl = Harness(parts, events)
    fill(ctl, "bootimages", bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    fill(ctl, "infrastructure", infrastructure("AWS"))
    fill(ctl, "clusterversion", cluster_version())
    fill(ctl, "machineconfiguration", machine_configuration())
    fill(ctl, "MachineSet", *machinesets)
    for informer in ctl.informers.values():  # every other cache listed, empty: the loop reconciles on whole caches only
        if not informer.has_synced.is_set():
            informer.replace_all([], None)
    return ctl, writer, queued


def fill(ctl: Harness, informer: str, *objs: dict[str, Any]) -> None:
    items = []
    for obj in objs:
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("resourceVersion", "1")
        items.append(obj)
    ctl.informers[informer].replace_all(items, "1")


def holder_object(*, deleting: bool = False, finalizers: tuple[str, ...] = (CLAIM_FINALIZER,)) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "machineset-boot-image-controller",
        "namespace": "openshift-machine-api",
        "uid": "holder-uid",
        "finalizers": list(finalizers),
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


async def test_a_patch_is_written_and_recorded(api: ApiClient) -> None:
    ctl, writer, _ = make_controller(api, machineset())
    await ctl.reconcile(KEY)
    state = ctl.states[KEY]
    assert state.patched and state.error is None and state.error_reason is None
    assert ("patch", "10") in writer.calls
    assert ctl.events.emitted[0][:2] == ("Normal", "BootImageUpdated")


async def test_the_watch_event_of_our_patch_is_recognised_as_ours_and_no_other(api: ApiClient) -> None:
    """The triggers delay our own writes' echoes (triggers.OWN_WRITE_ECHO_DELAY): a change from the
    version our patch replaced is ours; a change from any other version, or of a key we never
    wrote, is not."""
    ctl, writer, _ = make_controller(api, machineset(rv="10"), machineset("other", rv="10"))
    machines = ctl.parts.machines
    assert not machines.memory.wrote(KEY, machineset(rv="10"))  # nothing written yet
    writer.finish_patch.clear()
    reconciling = asyncio.ensure_future(ctl.reconcile(KEY))
    await writer.in_patch.wait()
    # Sent, not answered: its watch event may come first, and is ours all the same.
    assert machines.memory.wrote(KEY, machineset(rv="10"))
    writer.finish_patch.set()
    await reconciling
    assert ctl.states[KEY].patched
    assert machines.memory.wrote(KEY, machineset(rv="10"))
    assert not machines.memory.wrote(KEY, machineset(rv="11"))
    assert not machines.memory.wrote("MachineSet/openshift-machine-api/other", machineset("other", rv="10"))


async def test_the_fourth_write_is_a_typed_hot_loop(api: ApiClient) -> None:
    ctl, writer, _ = make_controller(api)
    target = target_fingerprint_for(ctl)
    hot = HotLoopRecord(target, HOT_LOOP_LIMIT).to_annotation()
    fill(ctl, "MachineSet", machineset(annotations={ANNOTATION_HOT_LOOP: hot}))
    await ctl.reconcile(KEY)
    state = ctl.states[KEY]
    assert state.error_reason is Reason.HOT_LOOP and not state.patched
    assert not [c for c in writer.calls if c[0] == "patch"]
    assert ctl.events.emitted == [("Warning", EVENT_HOT_LOOP, state.error)]
    # The same refusal again is not a new event.
    await ctl.reconcile(KEY)
    assert len(ctl.events.emitted) == 1
    reporter = reporting.PassReporter(None, SkewLimits())
    reporter(ctl.view())
    assert reporter.summary.degraded
    assert reporter.summary.errors[0].startswith(f"MachineSet openshift-machine-api/ms: {Reason.HOT_LOOP}: ")
    assert sample("bootimage_controller_machinesets", kind="MachineSet", action="error", reason="HotLoop") == 1


def target_fingerprint_for(ctl: Harness) -> str:
    ctx = ctl.inputs().context
    assert ctx is not None
    from bootimage_controller.core.planner import plan_machine

    return target_fingerprint(plan_machine(machineset(), ctx.golden, ctx.facts, ctx.enrollment))


def sample(name: str, **labels: str) -> float | None:
    from bootimage_controller import observability as obs

    return obs.REGISTRY.get_sample_value(name, labels)


async def test_unusable_user_data_blocks_only_that_machineset_with_its_reason(api: ApiClient) -> None:
    async def check(resource: MachineResource) -> Refusal | None:
        if resource.name == "broken":
            return Refusal(Reason.USER_DATA_INVALID, "secret openshift-machine-api/x: networkd.units: not in spec 3")
        return None

    ctl, writer, _ = make_controller(api, machineset("broken"), machineset("fine"), before_patch=check)
    await ctl.reconcile("MachineSet/openshift-machine-api/broken")
    await ctl.reconcile("MachineSet/openshift-machine-api/fine")
    broken, fine = ctl.states["MachineSet/openshift-machine-api/broken"], ctl.states["MachineSet/openshift-machine-api/fine"]
    assert broken.error_reason is Reason.USER_DATA_INVALID and not broken.patched
    assert broken.error_text == f"{Reason.USER_DATA_INVALID}: secret openshift-machine-api/x: networkd.units: not in spec 3"
    assert fine.patched
    assert [c for c in writer.calls if c[0] == "patch"] == [("patch", "10")]
    warnings = [e for e in ctl.events.emitted if e[0] == "Warning"]
    assert warnings == [("Warning", EVENT_FAILED, broken.error_text)]


async def test_a_conflict_rereads_replans_and_patches_the_fresh_object(api: ApiClient) -> None:
    ctl, writer, _ = make_controller(api, machineset(rv="10"))
    writer.results = [conflict("patch", "someone wrote first")]
    writer.fresh = machineset(rv="11", labels={"team": "other"})
    await ctl.reconcile(KEY)
    assert [c for c in writer.calls if c[0] in ("patch", "get")] == [("patch", "10"), ("get", "ms"), ("patch", "11")]
    assert ctl.states[KEY].patched


async def test_every_write_is_counted_in_the_holder_before_it_is_sent_and_a_refused_one_once(api: ApiClient) -> None:
    """Issue 25 item 5: the first write too is counted where a PUT of the MachineSet cannot erase
    it, before the patch goes; a patch the server refused (here a conflict) is not counted again."""
    ctl, writer, _ = make_controller(api, machineset(rv="10"))
    writer.results = [conflict("patch", "someone wrote first")]
    writer.fresh = machineset(rv="11", labels={"team": "other"})
    await ctl.reconcile(KEY)
    kept = [(name, value) for name, value in writer.calls if name in ("keep_hot_loop", "patch")]
    assert [name for name, _ in kept] == ["keep_hot_loop", "patch", "patch"]
    assert kept[0][1].startswith("1:")  # count 1, then the target's digest
    assert ctl.states[KEY].patched


async def test_a_fleet_wide_pass_counts_every_write_ahead_in_one_holder_write(api: ApiClient) -> None:
    """The first write of a pass counts the writes the offline plan says the others need, so a
    pass of N patches costs one holder write, not N (a 5,000-MachineSet pass was 7 times slower)."""
    names = [f"ms-{i}" for i in range(20)]
    ctl, writer, _ = make_controller(api, *(machineset(n) for n in names))
    for n in names:
        await ctl.reconcile(f"MachineSet/openshift-machine-api/{n}")
    kept = [value for name, value in writer.calls if name == "keep_hot_loop"]
    assert len(kept) == 1 and len(kept[0].split(",")) == 20
    assert len([c for c in writer.calls if c[0] == "patch"]) == 20
    assert all(ctl.states[f"MachineSet/openshift-machine-api/{n}"].patched for n in names)


async def test_a_pass_plans_each_machineset_once_unless_it_changed_after_the_counts(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first write's counts ahead plan every other MachineSet; their own reconciles take that
    decision rather than planning again, but only for the very version and inputs it was made
    from: a MachineSet edited after the counts is planned again, and patched from its new version."""
    planned: list[str] = []

    def counting(obj: Any, *args: Any) -> Any:
        planned.append(obj["metadata"]["name"])
        return plan_object(obj, *args)

    monkeypatch.setattr(machines_module, "plan_object", counting)
    monkeypatch.setattr(counting_module, "plan_object", counting)  # the counts ahead plan there
    names = [f"ms-{i}" for i in range(10)]
    ctl, writer, _ = make_controller(api, *(machineset(n) for n in names))
    await ctl.reconcile("MachineSet/openshift-machine-api/ms-0")
    assert sorted(planned) == sorted(names)  # ms-0 by its reconcile, the 9 others by the counts
    informer = ctl.informers["MachineSet"]
    informer.replace_all([o for o in informer.list() if o["metadata"]["name"] != "ms-5"] + [machineset("ms-5", rv="11")], "2")
    planned.clear()
    for n in names[1:]:
        await ctl.reconcile(f"MachineSet/openshift-machine-api/{n}")
    assert planned == ["ms-5"], "only the MachineSet that changed after the counts is planned again"
    patched = [value for name, value in writer.calls if name == "patch"]
    assert len(patched) == 10 and "11" in patched  # ms-5 from its new version
    assert all(ctl.states[f"MachineSet/openshift-machine-api/{n}"].patched for n in names)


async def test_workers_that_arrive_while_the_counts_are_being_kept_do_not_plan_the_fleet_again(api: ApiClient) -> None:
    """The pass's first workers all reach the holder write before the first one is answered: the
    counts already in flight are not planned and sent again (4 workers planned 5,000
    MachineSets 4 times), and their patches go once it is answered, not one holder write later."""
    names = [f"ms-{i}" for i in range(20)]
    ctl, writer, _ = make_controller(api, *(machineset(n) for n in names))
    writer.keep_answered.clear()
    first = [asyncio.ensure_future(ctl.reconcile(f"MachineSet/openshift-machine-api/{n}")) for n in names[:4]]
    for _ in range(50):
        await asyncio.sleep(0)
    assert len([c for c in writer.calls if c[0] == "keep_hot_loop"]) == 1  # the first write is in flight
    writer.keep_answered.set()
    await asyncio.gather(*first)
    for n in names[4:]:
        await ctl.reconcile(f"MachineSet/openshift-machine-api/{n}")
    kept = [value.split(",") for name, value in writer.calls if name == "keep_hot_loop"]
    assert len(kept) == 1 and len(kept[0]) == 20  # the first write carries the pass, the others wait for it
    assert all(ctl.states[f"MachineSet/openshift-machine-api/{n}"].patched for n in names)


async def test_a_count_the_holder_could_not_keep_sends_no_patch(api: ApiClient) -> None:
    ctl, writer, _ = make_controller(api, machineset(rv="10"))
    writer.keep_results = [Invalid("patch claim holder", 422, "Invalid", "data: Too long: must have at most 1048576 bytes")]
    await ctl.reconcile(KEY)
    state = ctl.states[KEY]
    assert not [c for c in writer.calls if c[0] == "patch"]
    assert state.error_reason is Reason.PATCH_FAILED and "hot-loop count could not be kept" in (state.error or "")
    assert state.permanent


async def test_a_count_refused_by_the_write_fence_is_not_leading_not_a_failure(api: ApiClient) -> None:
    """The holder write is fenced like every write: refused because this replica no longer leads,
    no patch follows and the loop ends the key quietly, as for a refused patch."""
    ctl, writer, _ = make_controller(api, machineset(rv="10"))
    writer.keep_results = [NotLeader("not the leader (lease held by another-replica)")]
    result = await ctl.reconcile(KEY)
    assert result.error is None and not result.permanent
    assert not [c for c in writer.calls if c[0] == "patch"]
    state = ctl.states.get(KEY)
    assert state is None or (state.error is None and not state.patched)


async def test_a_conflict_that_changed_the_boot_image_is_not_overwritten(api: ApiClient) -> None:
    ctl, writer, _ = make_controller(api, machineset(rv="10"))
    writer.results = [conflict("patch", "someone wrote first")]
    writer.fresh = machineset(rv="11", provider_spec={"ami": NEW_AMI})  # someone else did it already
    await ctl.reconcile(KEY)
    assert [c[0] for c in writer.calls if c[0] == "patch"] == ["patch"]
    assert str(ctl.states[KEY].decision.reason) == Reason.UP_TO_DATE


async def test_while_the_holder_is_deleted_a_patch_waits_without_an_error(api: ApiClient) -> None:
    ctl, writer, queued = make_controller(api, machineset())
    writer.holder = Holder("holder-uid", deleting=True)
    await ctl.reconcile(KEY)
    state = ctl.states[KEY]
    assert state.error is None and not state.patched  # pending, not Degraded
    assert not [c for c in writer.calls if c[0] == "patch"]
    assert CLAIMS_KEY in queued
    # Once the holder is gone, every MachineSet is reconciled again.
    fill(ctl, "holder", holder_object(deleting=True))
    queued.clear()
    ctl.informers["holder"].replace_all([], "2")
    assert KEY in queued


async def test_the_cached_holder_saves_a_read_only_when_it_is_safe(api: ApiClient) -> None:
    ctl, writer, _ = make_controller(api, machineset())
    fill(ctl, "holder", holder_object())
    await ctl.reconcile(KEY)
    assert ("ensure_holder", "") not in writer.calls
    for unsafe in (holder_object(deleting=True), holder_object(finalizers=())):
        ctl, writer, _ = make_controller(api, machineset())
        fill(ctl, "holder", unsafe)
        await ctl.reconcile(KEY)
        assert ("ensure_holder", "") in writer.calls


async def test_leaving_enrollment_releases_the_claim_after_a_conflict(api: ApiClient) -> None:
    claimed = machineset(
        owner_references=[owner_reference("holder-uid")], annotations={ANNOTATION_BOOT_IMAGE_UPDATES: "Disabled"}
    )
    ctl, writer, queued = make_controller(api, claimed)
    writer.release_results = [conflict("release", "someone wrote first")]
    writer.fresh = {**claimed, "metadata": {**claimed["metadata"], "resourceVersion": "12"}}
    await ctl.reconcile(KEY)
    assert [c for c in writer.calls if c[0] in ("release", "get")] == [("release", "ms"), ("get", "ms"), ("release", "ms")]
    assert CLAIMS_KEY in queued


async def test_a_refused_release_is_the_keys_outcome_not_an_escaped_error(api: ApiClient) -> None:
    """One way back (issue 35): a refusal on the way (here, releasing the claim) comes back as the
    key's outcome, reported and waiting for a change, like a refused patch."""
    claimed = machineset(
        owner_references=[owner_reference("holder-uid")], annotations={ANNOTATION_BOOT_IMAGE_UPDATES: "Disabled"}
    )
    ctl, writer, _ = make_controller(api, claimed)
    writer.release_results = [Invalid("release MachineSet ms", 422, "Invalid", "metadata.ownerReferences: bad")]
    result = await ctl.reconcile(KEY)
    assert result.permanent and result.reason == Reason.PATCH_FAILED
    state = ctl.states[KEY]
    assert state.error_reason is Reason.PATCH_FAILED and state.permanent
    assert state.error is not None and "release MachineSet ms" in state.error and "ownerReferences" in state.error
    reporter = reporting.PassReporter(None, SkewLimits())
    reporter(ctl.view())
    assert reporter.summary.degraded


async def test_a_deleted_machineset_leaves_no_outcome_and_no_counts(api: ApiClient) -> None:
    ctl, _, _ = make_controller(api, machineset())
    await ctl.reconcile(KEY)
    assert ctl.states[KEY].patched and ctl.parts.machines.memory.hot_loops
    fill(ctl, "MachineSet")  # deleted: the informer no longer has it
    await ctl.reconcile(KEY)
    assert KEY not in ctl.states
    memory = ctl.parts.machines.memory
    assert not memory.hot_loops and not memory.superseded and KEY not in memory.uids
    # Created again under the same name (a new uid): planned afresh, its first write counted as one.
    fill(ctl, "MachineSet", {**machineset(), "metadata": {**machineset()["metadata"], "uid": "uid-again"}})
    await ctl.reconcile(KEY)
    assert ctl.states[KEY].patched and set(memory.hot_loops) == {"uid-again"}
    assert memory.hot_loops["uid-again"].count == 1


async def test_leaving_enrollment_keeps_the_claim_when_the_fresh_object_is_enrolled_again(api: ApiClient) -> None:
    claimed = machineset(owner_references=[owner_reference("holder-uid")])
    opted_out = copy.deepcopy(claimed)
    opted_out["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_UPDATES] = "Disabled"
    ctl, writer, _ = make_controller(api, opted_out)
    writer.release_results = [conflict("release", "someone wrote first")]
    writer.fresh = claimed  # the annotation was removed meanwhile
    await ctl.reconcile(KEY)
    assert [c for c in writer.calls if c[0] == "release"] == [("release", "ms")]


async def test_deleting_holder_releases_every_claim_then_the_finalizer(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    claimed = [machineset(n, owner_references=[owner_reference("holder-uid")]) for n in ("a", "b")]
    live = {"items": claimed}

    async def fresh(_custom: Any) -> list[dict[str, Any]]:
        return list(live["items"])

    monkeypatch.setattr(assembly_module, "fresh_machines", fresh)
    ctl, writer, _ = make_controller(api, *claimed)
    fill(ctl, "holder", holder_object(deleting=True))
    real_release = writer.release

    async def release(obj: Any) -> None:
        await real_release(obj)
        live["items"] = [m for m in live["items"] if m["metadata"]["name"] != obj["metadata"]["name"]]

    writer.release = release  # type: ignore[method-assign]
    await ctl.reconcile(CLAIMS_KEY)
    assert writer.calls == [("release", "a"), ("release", "b"), ("remove_finalizer", "")]


async def test_a_finalizer_removed_by_hand_comes_back_while_claims_exist(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    claimed = machineset(owner_references=[owner_reference("holder-uid")])

    async def fresh(_custom: Any) -> list[dict[str, Any]]:
        return [claimed]

    monkeypatch.setattr(assembly_module, "fresh_machines", fresh)
    ctl, writer, _ = make_controller(api, claimed)
    fill(ctl, "holder", holder_object(finalizers=()))
    await ctl.reconcile(CLAIMS_KEY)
    assert writer.calls == [("ensure_holder", "")]


async def test_release_all_claims_gives_up_when_claims_keep_coming_back() -> None:
    writer = FakeWriter()
    claimed = machineset(owner_references=[owner_reference("u")])

    async def always_claimed() -> list[dict[str, Any]]:
        return [claimed]

    assert await release_all_claims(writer, always_claimed, attempts=3) is False  # type: ignore[arg-type]
    assert ("remove_finalizer", "") not in writer.calls
    assert writer.calls.count(("release", "ms")) == 3


async def test_the_gate_holds_a_release_until_claims_in_flight_land_and_claims_during_a_release() -> None:
    gate = ClaimGate()
    order: list[str] = []
    claim_in = asyncio.Event()
    claim_out = asyncio.Event()

    async def claim(name: str, hold: asyncio.Event | None = None) -> None:
        async with gate.claiming():
            order.append(f"{name} start")
            claim_in.set()
            if hold is not None:
                await hold.wait()
            order.append(f"{name} end")

    async def release() -> None:
        async with gate.releasing():
            order.append("release start")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            order.append("release end")

    first = asyncio.create_task(claim("claim-1", claim_out))
    await claim_in.wait()
    releasing = asyncio.create_task(release())
    await asyncio.sleep(0)
    second = asyncio.create_task(claim("claim-2"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == ["claim-1 start"]  # the release waits for claim-1; claim-2 waits for the release
    claim_out.set()
    await asyncio.gather(first, releasing, second)
    assert order == ["claim-1 start", "claim-1 end", "release start", "release end", "claim-2 start", "claim-2 end"]


async def test_mid_pass_counts_cover_the_whole_fleet(api: ApiClient) -> None:
    ctl, _, _ = make_controller(api, machineset("a"), machineset("b"), machineset("c"))
    await ctl.reconcile("MachineSet/openshift-machine-api/a")
    reporter = reporting.PassReporter(None, SkewLimits())
    reporter(ctl.view())
    assert reporter.summary.machinesets.total == 3 and reporter.summary.pending == 2
    assert reporter.summary.progress_message().startswith("Reconciled 1 of 3 MAPI MachineSets")


async def test_a_mid_pass_report_waits_until_the_pass_has_something_to_say(api: ApiClient) -> None:
    """A restart on a settled fleet writes no status however long its pass (SPEC section 7,
    invariant 5): with a report due after every key, the current MachineSets make none (it could
    only say Progressing for the keys not reached, which the end of the pass takes back), and the
    first patch makes one that counts the whole fleet."""
    reports: list[tuple[int, int]] = []

    def on_pass(view: Any) -> None:
        reports.append((len(view.states), len(view.unplanned)))

    every_key = StatusClock(progress_interval=0.0)
    current = [machineset(f"current-{i}", provider_spec={"ami": NEW_AMI}) for i in range(3)]
    ctl, _, _ = make_controller(api, *current, machineset("stale"), on_pass=on_pass, status_clock=every_key)
    for i in range(3):
        await ctl.reconcile(f"MachineSet/openshift-machine-api/current-{i}")
    assert all(state.settled for state in ctl.states.values()) and reports == []
    await ctl.reconcile("MachineSet/openshift-machine-api/stale")
    assert ctl.states["MachineSet/openshift-machine-api/stale"].patched
    assert reports == [(4, 0)]
    fill(ctl, "MachineSet", *current, machineset("stale", rv="11", provider_spec={"ami": NEW_AMI}))
    await ctl.reconcile("MachineSet/openshift-machine-api/stale")  # the echo: current now, settled
    assert ctl.states["MachineSet/openshift-machine-api/stale"].settled
    assert reports == [(4, 0)]  # nothing left unsettled: no more mid-pass reports


async def test_a_refusal_for_good_waits_for_a_change_and_a_busy_server_is_retried(api: ApiClient) -> None:
    too_long = Invalid("patch boot image openshift-machine-api/ms", 422, "Invalid",
                       "MachineSet.machine.openshift.io \"ms\" is invalid: metadata.annotations: Too long: "
                       "must have at most 262144 bytes")
    ctl, writer, _ = make_controller(api, machineset())
    writer.results = [too_long]
    result = await ctl.reconcile(KEY)
    state = ctl.states[KEY]
    assert state.permanent and not state.patched and "metadata.annotations: Too long" in (state.error or "")
    assert result.permanent and result.error is not None  # no backoff timer: it waits for a change
    # Conflicts that never end are someone else's writes: retried with backoff, not parked.
    ctl, writer, _ = make_controller(api, machineset())
    writer.results = [conflict("patch", "someone wrote first")] * 5
    writer.fresh = machineset(rv="11")
    result = await ctl.reconcile(KEY)
    assert result.error is not None and not result.permanent
