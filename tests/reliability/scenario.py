"""What every reliability scenario shares: the fleet, the upgrade, a concurrent writer, the checks.

A scenario: an AWS-installed cluster running 4.22 whose `coreos-bootimages` still holds the 4.16
boot images and a fleet of 20 MachineSets across AWS (x86_64 and aarch64), GCP and Azure, all
current for 4.16. The daemon starts (through the fault proxy), settles on 4.16 writing nothing,
then the ConfigMap becomes the 4.22 multistream one (an upgrade): 16 MachineSets must move to
their 4.22 boot image, 4 must be left alone. Meanwhile another writer keeps changing labels,
annotations, replicas and an unknown providerSpec key on random MachineSets, straight to the API
server. At the end every SPEC section 7 invariant is checked on whole objects and on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.objects import (
    MERGE_PATCH,
    apply,
    bootimages_configmap,
    cluster_version,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
)
from integration.daemon_helpers import OUR_ANNOTATIONS, configmap_from_stream, strip_ours, user_data_secret
from kubernetes_asyncio.client.rest import ApiException

from bootimage_controller.constants import (
    ANNOTATION_HOT_LOOP,
    ANNOTATION_RELEASE,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    CLAIM_HOLDER_NAMESPACE,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    MACHINECONFIGURATION_NAME,
    MAPI_NAMESPACE,
    ConditionReason,
)
from bootimage_controller.core.claims import is_our_reference, pointer

from .proxy import FaultProxy, ProxyStats

SPEC: Final = ("spec", "template", "spec", "providerSpec", "value")
MS_PATH: Final = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"
HOLDER_PATH: Final = f"/api/v1/namespaces/{CLAIM_HOLDER_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}"
MC_PATH: Final = f"/apis/operator.openshift.io/v1/machineconfigurations/{MACHINECONFIGURATION_NAME}"
GA_416: Final = "installer-4.16-416.94.202405291527-0-rhcos.json"
MULTISTREAM_422: Final = "coreos-bootimages-4.22-multistream.yaml"
# Known answers from the fixture headers, so a wrong golden lookup below cannot go unnoticed.
AWS_422_US_EAST_1: Final = "ami-06a6b025350ff1e23"
GCP_422: Final = "projects/rhcos-cloud/global/images/rhcos-9-8-20260403-0-gcp-x86-64"
AZURE_422: Final = {"publisher": "azureopenshift", "offer": "aro4", "sku": "420-v2", "version": "9.6.20251015",
                    "resourceID": "", "type": "MarketplaceNoPlan"}

# The concurrent writer's keys: none of them is ours, all must survive every daemon write.
WRITER_LABEL: Final = "reliability.example.com/bumps"
WRITER_ANNOTATION: Final = "reliability.example.com/last-bump"
WRITER_PROVIDER_KEY: Final = "reliabilityMarker"  # unknown to every platform: must be kept


@dataclass(frozen=True)
class Member:
    """One MachineSet of the fleet and what the upgrade must do to it."""

    name: str
    fixture: str
    platform: str  # AWS, GCP, Azure
    arch: str
    field: tuple[str | int, ...]  # the boot image field under providerSpec.value
    patched: bool  # True: moves to its 4.22 target; False: never written by the daemon

    @property
    def boot_path(self) -> tuple[str | int, ...]:
        return (*SPEC, *self.field)


def fleet(small: bool = False) -> tuple[Member, ...]:
    """20 MachineSets (16 to patch, 4 to leave alone); `small`: 10 (6 to patch)."""
    counts = {"aws": 2, "arm": 1, "gcp": 2, "azure": 1} if small else {"aws": 6, "arm": 2, "gcp": 5, "azure": 3}
    members = [
        *(Member(f"aws-e1-{i}", "aws-x86_64-us-east-1a-4.16.yaml", "AWS", "x86_64", ("ami",), True)
          for i in range(counts["aws"])),
        *(Member(f"aws-arm-{i}", "aws-aarch64-us-east-2a-4.16.yaml", "AWS", "aarch64", ("ami",), True)
          for i in range(counts["arm"])),
        *(Member(f"gcp-{i}", "gcp-x86_64-us-central1-a-4.16.yaml", "GCP", "x86_64", ("disks", 0, "image"), True)
          for i in range(counts["gcp"])),
        *(Member(f"azure-{i}", "azure-x86_64-legacy-gallery-gen2-4.16.yaml", "Azure", "x86_64", ("image",), True)
          for i in range(counts["azure"])),
        # Left alone under 4.16 and 4.22: no AMI id; a custom GCP image; an Azure marketplace image
        # already current; an explicit rhel-10 stream already current (skipped under 4.16).
        Member("aws-filters", "aws-x86_64-ami-filters.yaml", "AWS", "x86_64", ("ami",), False),
        Member("gcp-custom", "gcp-x86_64-custom-image.yaml", "GCP", "x86_64", ("disks", 0, "image"), False),
        Member("azure-noplan", "azure-x86_64-marketplace-noplan-4.20.yaml", "Azure", "x86_64", ("image",), False),
        Member("aws-rhel10", "aws-x86_64-rhel-10-stream.yaml", "AWS", "x86_64", ("ami",), False),
    ]
    return tuple(members)


def get_path(obj: Any, path: Sequence[str | int]) -> Any:
    cur = obj
    for part in path:
        cur = cur[part]
    return cur


# ---- golden data: targets and the set of every image it names -----------------------------------------
@dataclass(frozen=True)
class Golden:
    """The 4.22 ConfigMap read directly (not through the planner): targets and known images."""

    default_stream: Mapping[str, Any]
    aws: frozenset[str]
    gcp: frozenset[str]
    azure: frozenset[tuple[str, str, str, str]]

    @classmethod
    def from_configmap(cls, configmap: Mapping[str, Any]) -> Golden:
        data = configmap["data"]
        streams = [json.loads(data["stream"]), *json.loads(data.get("streams") or "{}").values()]
        aws: set[str] = set()
        gcp: set[str] = set()
        azure: set[tuple[str, str, str, str]] = set()
        for stream in streams:
            for arch in stream["architectures"].values():
                images = arch.get("images") or {}
                aws.update(r["image"] for r in ((images.get("aws") or {}).get("regions") or {}).values())
                if "gcp" in images:
                    gcp_image = images["gcp"]
                    gcp.add(f"projects/{gcp_image['project']}/global/images/{gcp_image['name']}")
                market = ((arch.get("rhel-coreos-extensions") or {}).get("marketplace") or {}).get("azure") or {}
                for variant in market.values():
                    for image in variant.values():
                        azure.add((image["publisher"], image["offer"], image["sku"], image["version"]))
        return cls(streams[0], frozenset(aws), frozenset(gcp), frozenset(azure))

    def target(self, member: Member, obj: Mapping[str, Any]) -> Any:
        arch = self.default_stream["architectures"][member.arch]
        spec = get_path(obj, SPEC)
        if member.platform == "AWS":
            return {"id": arch["images"]["aws"]["regions"][spec["placement"]["region"]]["image"]}
        if member.platform == "GCP":
            gcp = arch["images"]["gcp"]
            return f"projects/{gcp['project']}/global/images/{gcp['name']}"
        # A legacy gallery image (resourceID, "gen2") moves to the no-purchase-plan Gen2 offer.
        image = arch["rhel-coreos-extensions"]["marketplace"]["azure"]["no-purchase-plan"]["hyperVGen2"]
        return {**image, "resourceID": "", "type": "MarketplaceNoPlan"}

    def knows(self, value: Any) -> bool:
        """Whether a boot image field value names an image of the golden data."""
        if isinstance(value, str):
            return value in self.gcp
        if isinstance(value, Mapping) and "id" in value:
            return value["id"] in self.aws
        if isinstance(value, Mapping) and "publisher" in value:
            key = (value.get("publisher"), value.get("offer"), value.get("sku"), value.get("version"))
            return key in self.azure
        return False


# ---- setting the cluster up ---------------------------------------------------------------------------
async def setup_cluster(api: Any, members: Sequence[Member]) -> dict[str, dict[str, Any]]:
    """The 4.22 cluster with 4.16 golden data and the fleet; returns the MachineSets as stored."""
    await apply(api, infrastructure("AWS"))
    await apply(api, cluster_version())
    await apply(api, machine_configuration())
    await apply(api, configmap_from_stream(GA_416, "4.16.0"))
    await apply(api, user_data_secret())
    stored = {}
    for m in members:
        stored[m.name] = await apply(api, machineset_from_fixture(m.fixture, m.name))
    return stored


async def upgrade_golden_data(api: Any) -> Golden:
    configmap = bootimages_configmap(MULTISTREAM_422)
    golden = Golden.from_configmap(configmap)
    # The lookups are this test's own: pin them to the answers the fixture headers give.
    us_east_1: dict[str, Any] = {"spec": {"template": {"spec": {"providerSpec": {"value": {"placement": {"region": "us-east-1"}}}}}}}
    x86 = {p: Member("pin", "", p, "x86_64", (), True) for p in ("AWS", "GCP", "Azure")}
    assert golden.target(x86["AWS"], us_east_1) == {"id": AWS_422_US_EAST_1}
    assert golden.target(x86["GCP"], us_east_1) == GCP_422
    assert golden.target(x86["Azure"], us_east_1) == AZURE_422
    await apply(api, configmap)
    return golden


async def machinesets(api: Any) -> dict[str, dict[str, Any]]:
    doc = await kube_request(api, "GET", MS_PATH)
    return {item["metadata"]["name"]: item for item in doc["items"]}


async def conditions(api: Any) -> dict[str, dict[str, Any]]:
    obj = await kube_request(api, "GET", MC_PATH)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> float:
    """Poll `check` until true; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await check():
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


async def wait_settled_on_416(api: Any, proxy: FaultProxy, timeout: float = 40.0) -> None:
    """The daemon has finished a pass on the 4.16 data: a Reconciled condition is written."""

    async def settled() -> bool:
        progressing = (await conditions(api)).get(CONDITION_PROGRESSING)
        return progressing is not None and progressing["reason"] == ConditionReason.RECONCILED

    await wait_for(settled, timeout, "the daemon's first pass on the 4.16 data")
    assert not proxy.stats.patches, "nothing is outdated under the 4.16 data: the daemon must not write"


async def wait_converged(api: Any, members: Sequence[Member], golden: Golden, timeout: float = 50.0) -> float:
    """Every MachineSet to patch boots its 4.22 target and the daemon reports Reconciled, not Degraded."""

    async def converged() -> bool:
        fleet_now = await machinesets(api)
        if any(
            get_path(fleet_now[m.name], m.boot_path) != golden.target(m, fleet_now[m.name]) for m in members if m.patched
        ):
            return False
        conds = await conditions(api)
        progressing, degraded = conds.get(CONDITION_PROGRESSING), conds.get(CONDITION_DEGRADED)
        return (
            progressing is not None
            and progressing["reason"] == ConditionReason.RECONCILED
            and degraded is not None
            and degraded["status"] == "False"
        )

    return await wait_for(converged, timeout, "the fleet to reach its 4.22 boot images with status Reconciled")


async def wait_quiet(proxy: FaultProxy, quiet: float = 3.0, timeout: float = 30.0) -> None:
    """No MachineSet PATCH from the daemon for `quiet` seconds (late writes would show up here)."""

    def last_patch() -> int:
        return len(proxy.stats.patches)

    started = time.monotonic()
    seen, since = last_patch(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() - started > timeout:
            raise AssertionError("the daemon kept writing MachineSets after convergence")
        await asyncio.sleep(0.1)
        if last_patch() != seen:
            seen, since = last_patch(), time.monotonic()


# ---- the concurrent writer ------------------------------------------------------------------------------
class ConcurrentWriter:
    """Another controller (an autoscaler, an admin's script) writing the same MachineSets.

    Blind JSON merge patches straight to the API server (not through the proxy), so only the
    daemon could ever undo one. `last[name]` is the number of its last write to `name`.
    """

    def __init__(self, api: Any, names: Sequence[str], seed: int, interval: float = 0.08) -> None:
        self.api = api
        self.names = list(names)
        self.rng = random.Random(seed)
        self.interval = interval
        self.last: dict[str, int] = {}
        self.writes = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @staticmethod
    def bump(k: int) -> dict[str, Any]:
        return {
            "metadata": {"labels": {WRITER_LABEL: str(k)}, "annotations": {WRITER_ANNOTATION: f"bump-{k}"}},
            "spec": {
                "replicas": k % 4,
                "template": {"spec": {"providerSpec": {"value": {WRITER_PROVIDER_KEY: f"bump-{k}"}}}},
            },
        }

    async def _run(self) -> None:
        while not self._stopping.is_set():
            name = self.rng.choice(self.names)
            k = self.last.get(name, 0) + 1
            await kube_request(self.api, "PATCH", f"{MS_PATH}/{name}", self.bump(k), content_type=MERGE_PATCH)
            self.last[name] = k
            self.writes += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="concurrent-writer")

    async def stop(self) -> None:
        if self._task is None:
            return
        task, self._task = self._task, None
        # Not cancelled mid-request: a PATCH cancelled in flight could land after the read below
        # (under a loaded CI it did: the expected object was one write behind). Its last write
        # completes, then it stops.
        self._stopping.set()
        with contextlib.suppress(Exception):
            await task
        # Its last write may have failed on its way back: settle `last` from the server.
        doc = await kube_request(self.api, "GET", MS_PATH)
        for item in doc["items"]:
            value = (item["metadata"].get("labels") or {}).get(WRITER_LABEL)
            if value is not None:
                self.last[item["metadata"]["name"]] = max(self.last.get(item["metadata"]["name"], 0), int(value))

    def expected(self, before: Mapping[str, Any]) -> dict[str, Any]:
        """`before` with this writer's last change applied (what must survive)."""
        out = copy.deepcopy(dict(before))
        k = self.last.get(out["metadata"]["name"])
        if k is None:
            return out
        out["metadata"].setdefault("labels", {})[WRITER_LABEL] = str(k)
        out["metadata"].setdefault("annotations", {})[WRITER_ANNOTATION] = f"bump-{k}"
        out["spec"]["replicas"] = k % 4
        get_path(out, SPEC)[WRITER_PROVIDER_KEY] = f"bump-{k}"
        return out


# ---- the checks -----------------------------------------------------------------------------------------
_OUR_ANNOTATION_POINTERS: Final = frozenset(pointer(("metadata", "annotations", k)) for k in OUR_ANNOTATIONS)


def _allowed_op(op: Mapping[str, Any], boot_pointer: str) -> bool:
    path = str(op.get("path", ""))
    if path == "/metadata/resourceVersion":
        return op.get("op") == "test"
    return (
        path == boot_pointer
        or path in _OUR_ANNOTATION_POINTERS
        or path == "/metadata/ownerReferences"
        or path.startswith("/metadata/ownerReferences/")
    )


def check_wire(stats: ProxyStats, members: Sequence[Member], golden: Golden) -> None:
    """Invariants 1 and 2 on every MachineSet PATCH the daemon sent, and exactly-once writes."""
    by_name = {m.name: m for m in members}
    for record in stats.patches:
        member = by_name[record.name]
        assert isinstance(record.ops, list), f"{record.name}: not a JSON patch: {record.ops!r}"
        first = record.ops[0] if record.ops else {}
        assert first.get("op") == "test" and first.get("path") == "/metadata/resourceVersion" and first.get("value"), (
            f"{record.name}: a write must be conditional on the resourceVersion it was planned from"
        )
        boot = pointer(member.boot_path)
        for op in record.ops:
            assert _allowed_op(op, boot), f"{record.name}: the daemon wrote outside its fields: {op}"
            if op["path"] == boot and op["op"] != "test":
                assert golden.knows(op["value"]), f"{record.name}: patch targets an image not in the golden data: {op}"
    applied = stats.applied_spec_patches()
    for m in members:
        expected = 1 if m.patched else 0
        assert applied.get(m.name, 0) == expected, (
            f"{m.name}: {applied.get(m.name, 0)} successful boot image patches, expected {expected}"
        )
    for verb in ("create", "update", "delete", "deletecollection"):
        assert stats.requests.get((verb, "machinesets"), 0) == 0, f"the daemon must only PATCH MachineSets, saw {verb}"


async def check_fleet(
    api: Any,
    members: Sequence[Member],
    before: Mapping[str, dict[str, Any]],
    golden: Golden,
    writer: ConcurrentWriter,
    *,
    crashed: bool = False,
) -> None:
    """Invariants 1, 3 and 4 on whole objects, targets reached, claims and hot-loop records sane.

    `crashed`: a daemon died mid-pass. Every write is counted in the claim holder before it is
    sent, and a pass counts its writes ahead; a successor cannot tell a count whose write never went
    out from one whose did, so a MachineSet written after the crash may say count 2 for its one
    write (over by one, never under: docs/claims.md, "Hot loop"). Exactly one write per MachineSet
    is still checked on the wire (`check_wire`)."""
    after = await machinesets(api)
    assert set(after) == {m.name for m in members}, "every MachineSet must still exist (invariant 4)"
    holder = await kube_request(api, "GET", HOLDER_PATH)
    assert CLAIM_FINALIZER in (holder["metadata"].get("finalizers") or [])
    for m in members:
        obj, expected = after[m.name], writer.expected(before[m.name])
        # Invariants 1 and 3: whole objects equal but for the boot image field and our metadata,
        # with every change of the other writer in place.
        assert strip_ours(obj, m.boot_path) == strip_ours(expected, m.boot_path), (
            m.name, "writer label", (obj["metadata"].get("labels") or {}).get(WRITER_LABEL), "expected",
            (expected["metadata"].get("labels") or {}).get(WRITER_LABEL))
        meta = obj["metadata"]
        ours = [r for r in meta.get("ownerReferences") or [] if is_our_reference(r)]
        annotations = meta.get("annotations") or {}
        if not m.patched:
            assert get_path(obj, m.boot_path) == get_path(before[m.name], m.boot_path), m.name
            assert not ours and not (OUR_ANNOTATIONS & set(annotations)), f"{m.name} must not be touched"
            continue
        assert get_path(obj, m.boot_path) == golden.target(m, obj), m.name
        # Claimed by the live holder (a dangling uid would let the garbage collector delete it).
        assert len(ours) == 1 and ours[0]["uid"] == holder["metadata"]["uid"], (m.name, ours)
        counts = (1, 2) if crashed else (1,)
        assert json.loads(annotations[ANNOTATION_HOT_LOOP])["count"] in counts, (m.name, annotations[ANNOTATION_HOT_LOOP])
        assert annotations[ANNOTATION_RELEASE], m.name


async def get_or_none(api: Any, path: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = await kube_request(api, "GET", path)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


# ---- reporting ------------------------------------------------------------------------------------------
@dataclass
class ScenarioReport:
    name: str
    seconds: float
    stats: dict[str, Any]
    writer_writes: int
    patched: int
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        s = self.stats
        faults = ", ".join(f"{k}={v}" for k, v in s["faults"].items()) or "none"
        extra = "".join(f" {k}={v}" for k, v in self.extra.items())
        gone = f" 410s={s['gone_410']}" if s["gone_410"] else ""
        if s["hangs_ended_after"]:
            gone += f" hangs-ended-after={s['hangs_ended_after']}s"
        if s["max_watch_reconnect_gap"] is not None:
            gone += f" max-watch-reconnect-gap={s['max_watch_reconnect_gap']}s"
        return (
            f"{self.name}: {self.seconds:.1f}s, {s['requests']} requests {s['by_verb']}, faults: {faults}{gone}; "
            f"MachineSet PATCHes forwarded={s['machineset_patches']} applied={s['machineset_patches_applied']} "
            f"conflicts={s['machineset_patch_conflicts']} answer-lost={s['machineset_patches_answer_lost']}; "
            f"patched={self.patched}; "
            f"concurrent writes={self.writer_writes}{extra}"
        )


REPORTS: list[ScenarioReport] = []
