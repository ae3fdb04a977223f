"""claims.py: the one JSON patch per write, the release patch, the hot-loop count (pure)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from harness.objects import machineset_from_fixture

from bootimage_controller.constants import (
    ANNOTATION_HOT_LOOP,
    ANNOTATION_PREVIOUS,
    ANNOTATION_RELEASE,
    ANNOTATION_STREAM,
    ANNOTATION_UPDATED_AT,
    CLAIM_HOLDER_NAME,
    HOT_LOOP_LIMIT,
    Action,
    Reason,
)
from bootimage_controller.core.claims import (
    HotLoopRecord,
    LedgerEntry,
    boot_image_patch,
    hot_loop_check,
    owner_reference,
    record_annotations,
    release_patch,
)
from bootimage_controller.core.model import BootImageDecision, FieldChange

AMI = ("spec", "template", "spec", "providerSpec", "value", "ami")
OLD, NEW = {"id": "ami-05483066c3caaccf5"}, {"id": "ami-06a6b025350ff1e23"}
FOREIGN = {"apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else", "uid": "u-other"}
NOW = datetime(2026, 3, 4, 5, 6, 7, 890, tzinfo=UTC)


class PatchTestFailed(Exception):
    """An RFC 6902 `test` operation did not match (the API server answers 422)."""


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A small RFC 6902 applier (test, add, replace, remove), enough to check our patches."""
    doc = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [_unescape(t) for t in op["path"].split("/")[1:]]
        cur = doc
        for token in parents:
            cur = cur[int(token)] if isinstance(cur, list) else cur[token]
        key: Any = last if not isinstance(cur, list) else (len(cur) if last == "-" else int(last))
        if op["op"] == "test":
            if cur[key] != op["value"]:
                raise PatchTestFailed(op["path"])
        elif op["op"] == "add":
            if isinstance(cur, list):
                cur.insert(key, op["value"])
            else:
                cur[key] = op["value"]
        elif op["op"] == "replace":
            cur[key]  # must exist
            cur[key] = op["value"]
        elif op["op"] == "remove":
            del cur[key]
        else:
            raise ValueError(op["op"])
    return doc


def machineset(**kw: Any) -> dict[str, Any]:
    obj = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "ms", **kw)
    obj["metadata"]["resourceVersion"] = "42"
    return obj


def decision(target: Any = NEW) -> BootImageDecision:
    return BootImageDecision(
        "MachineSet", "openshift-machine-api", "ms", Action.PATCH, Reason.BOOT_IMAGE_OUTDATED, "outdated",
        platform="AWS", stream="rhel-9", current=OLD, target=target, target_release="9.8.20260403-0",
        changes=(FieldChange(AMI, OLD, target),),
    )


def patched(obj: dict[str, Any], uid: str = "holder-uid", annotations: dict[str, str] | None = None) -> Any:
    ops = boot_image_patch(obj, decision().changes, annotations or {"a/b": "c"}, uid)
    return apply_json_patch(obj, ops)


def without(obj: dict[str, Any], *paths: tuple[str, ...]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for path in paths:
        cur = out
        for p in path[:-1]:
            cur = cur.get(p, {})
        cur.pop(path[-1], None)
    return out


def test_the_patch_changes_the_field_claims_and_records_and_nothing_else() -> None:
    obj = machineset()
    after = patched(obj)
    assert after["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] == NEW
    assert after["metadata"]["ownerReferences"] == [owner_reference("holder-uid")]
    assert after["metadata"]["annotations"]["a/b"] == "c"
    assert {k: v for k, v in after["metadata"]["annotations"].items() if k != "a/b"} == obj["metadata"]["annotations"]
    rest = (("spec", "template", "spec", "providerSpec", "value", "ami"),)
    meta = (("metadata", "ownerReferences"), ("metadata", "annotations"))
    assert without(after, *rest, *meta) == without(obj, *rest, *meta)


def test_the_owner_reference_never_blocks_deletion_and_names_the_holder() -> None:
    ref = owner_reference("u1")
    assert ref == {
        "apiVersion": "v1", "kind": "ConfigMap", "name": CLAIM_HOLDER_NAME, "uid": "u1",
        "controller": True, "blockOwnerDeletion": False,
    }


def test_a_stale_resource_version_fails_the_whole_patch() -> None:
    obj = machineset()
    ops = boot_image_patch(obj, decision().changes, {}, "u")
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "42"}
    moved = copy.deepcopy(obj)
    moved["metadata"]["resourceVersion"] = "43"
    with pytest.raises(PatchTestFailed):
        apply_json_patch(moved, ops)


def test_a_changed_boot_image_fails_the_patch_even_at_the_same_version() -> None:
    obj = machineset()
    ops = boot_image_patch(obj, decision().changes, {}, "u")
    other = copy.deepcopy(obj)
    other["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": "ami-custom"}
    with pytest.raises(PatchTestFailed):
        apply_json_patch(other, ops)


def test_a_stale_claim_is_repaired_in_place_and_foreign_owners_stay() -> None:
    stale = {**owner_reference("old-uid")}
    obj = machineset(owner_references=[FOREIGN, stale])
    after = patched(obj, uid="new-uid")
    assert after["metadata"]["ownerReferences"] == [FOREIGN, owner_reference("new-uid")]
    current = machineset(owner_references=[owner_reference("same")])
    assert patched(current, uid="same")["metadata"]["ownerReferences"] == [owner_reference("same")]


def test_annotations_are_created_when_the_object_has_none() -> None:
    obj = machineset()
    del obj["metadata"]["annotations"]
    assert patched(obj, annotations={"x/y": "1"})["metadata"]["annotations"] == {"x/y": "1"}


def test_release_removes_only_our_references() -> None:
    ours = owner_reference("u")
    obj = machineset(owner_references=[ours, FOREIGN, {**ours, "uid": "stale"}])
    after = apply_json_patch(obj, release_patch(obj) or [])
    assert after["metadata"]["ownerReferences"] == [FOREIGN]
    assert without(after, ("metadata", "ownerReferences")) == without(obj, ("metadata", "ownerReferences"))
    assert release_patch(machineset(owner_references=[FOREIGN])) is None
    assert release_patch(machineset()) is None


def test_the_record_annotations() -> None:
    hot = HotLoopRecord("t", 1)
    record = record_annotations(decision(), hot, NOW)
    assert record == {
        ANNOTATION_STREAM: "rhel-9",
        ANNOTATION_UPDATED_AT: "2026-03-04T05:06:07Z",
        ANNOTATION_PREVIOUS: json.dumps(OLD, separators=(",", ":")),
        ANNOTATION_HOT_LOOP: hot.to_annotation(),
        ANNOTATION_RELEASE: "9.8.20260403-0",
    }


def _after_write(annotations: dict[str, str], hot: HotLoopRecord) -> dict[str, str]:
    return {**annotations, **record_annotations(decision(), hot, NOW)}


def test_the_fourth_write_of_the_same_target_is_refused() -> None:
    annotations: dict[str, str] = {}
    counts = []
    for _ in range(HOT_LOOP_LIMIT):
        hot = hot_loop_check(annotations, decision())
        assert hot is not None
        counts.append(hot.count)
        annotations = _after_write(annotations, hot)
    assert counts == [1, 2, 3]
    assert hot_loop_check(annotations, decision()) is None
    # A new target starts again at one.
    fresh = hot_loop_check(annotations, decision(target={"id": "ami-0fffffffffffffff0"}))
    assert fresh is not None and fresh.count == 1


def test_memory_counts_when_the_whole_record_vanished_but_not_after_an_admin_reset() -> None:
    hot = hot_loop_check({}, decision())
    assert hot is not None
    remembered = HotLoopRecord(hot.target, HOT_LOOP_LIMIT)
    # Someone put back an old copy of the object: no record, so our memory decides.
    assert hot_loop_check({}, decision(), remembered) is None
    # The admin removed only the hot-loop annotation: the record is there, the count restarts.
    reset = {k: v for k, v in _after_write({}, remembered).items() if k != ANNOTATION_HOT_LOOP}
    again = hot_loop_check(reset, decision(), remembered)
    assert again is not None and again.count == 1


def test_the_holders_count_wins_over_a_wiped_record_and_a_refused_write_is_not_counted_twice() -> None:
    first = hot_loop_check({}, decision())
    assert first is not None
    kept = first.ledger_entry()  # in the holder before the patch went; then the object was put back
    second = hot_loop_check({}, decision(), None, kept)  # a restart: no memory, no annotation
    assert second is not None and second.count == 2
    at_limit = HotLoopRecord(first.target, HOT_LOOP_LIMIT).ledger_entry()
    assert hot_loop_check({}, decision(), None, at_limit) is None
    # The count was kept, then the server refused the patch: the retry reuses that count.
    retry = hot_loop_check({}, decision(), None, kept, unsent=kept)
    assert retry is not None and retry.ledger_entry() == kept
    # Another target's count is not this one's.
    other = LedgerEntry("0" * 16, HOT_LOOP_LIMIT)
    again = hot_loop_check({}, decision(), None, other)
    assert again is not None and again.count == 1


@pytest.mark.parametrize("value", ["", "not json", "{}", '{"target": "t", "count": "many"}', "[]"])
def test_a_hand_edited_count_is_no_record(value: str) -> None:
    hot = hot_loop_check({ANNOTATION_HOT_LOOP: value}, decision())
    assert hot is not None and hot.count == 1
